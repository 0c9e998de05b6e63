"""DWARF call-frame information (``.eh_frame``): exact unwinding where the compiler left it.

Every x86-64 Linux object carries ``.eh_frame`` for C++ exceptions, frame
pointers or not, libc included. Given a pc, ``.eh_frame_hdr``'s sorted table
finds its FDE in a binary search; pyelftools decodes that one FDE (never the
whole section) into the rule "CFA = rsp + 24, return address at CFA - 8,
rbx at CFA - 16". Applying the rule to the registers gives the caller's
registers: no guessing, so none of the stale return addresses that stack
scanning can pick up. Rules we do not evaluate (DWARF expressions, as in
PLT stubs and signal trampolines) end the CFI walk; the scanner takes over
from there.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from elftools.dwarf.callframe import FDE, CallFrameInfo, RegisterRule
from elftools.dwarf.structs import DWARFStructs

#: DWARF register numbers on x86-64 (System V psABI, figure 3.36).
DWARF_REGS = {0: "rax", 1: "rdx", 2: "rcx", 3: "rbx", 4: "rsi", 5: "rdi", 6: "rbp", 7: "rsp",
              8: "r8", 9: "r9", 10: "r10", 11: "r11", 12: "r12", 13: "r13", 14: "r14", 15: "r15"}
RA = 16
_DW_EH_PE_datarel_sdata4 = 0x3B


class _Window:
    """A read-only file-like view of part of an mmap (pyelftools wants a stream; no copy)."""

    def __init__(self, mm: mmap.mmap, start: int, size: int) -> None:
        self._mm, self._start, self._size, self._pos = mm, start, size, 0

    def read(self, n: int = -1) -> bytes:
        end = self._size if n < 0 else min(self._size, self._pos + n)
        data = self._mm[self._start + self._pos : self._start + end]
        self._pos = end
        return data

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else self._size + pos)
        return self._pos

    def tell(self) -> int:
        return self._pos


@dataclass(frozen=True, slots=True)
class Section:
    addr: int
    offset: int
    size: int


class EhFrame:
    """The ``.eh_frame`` of one ELF file, searched through its ``.eh_frame_hdr``.

    :param mm: the file, mmap'd.
    :param eh_frame: ``.eh_frame`` section (link address, file offset, size).
    :param eh_frame_hdr: ``.eh_frame_hdr`` section; its table must be the
        usual ``DW_EH_PE_datarel | sdata4`` encoding (what GNU ld and lld write).
    :raises ValueError: an ``.eh_frame_hdr`` we cannot search.
    """

    def __init__(self, mm: mmap.mmap, eh_frame: Section, eh_frame_hdr: Section) -> None:
        hdr = mm[eh_frame_hdr.offset : eh_frame_hdr.offset + eh_frame_hdr.size]
        if len(hdr) < 12 or hdr[0] != 1 or hdr[3] != _DW_EH_PE_datarel_sdata4 or hdr[2] != 0x03:
            raise ValueError("unsupported .eh_frame_hdr encoding")
        (count,) = struct.unpack_from("<I", hdr, 8)
        table = np.frombuffer(hdr, dtype="<i4", count=2 * count, offset=12).reshape(count, 2).astype(np.int64)
        self._starts = table[:, 0] + eh_frame_hdr.addr  # link-time initial locations, sorted
        self._fdes = table[:, 1] + eh_frame_hdr.addr - eh_frame.addr  # offsets inside .eh_frame
        self._cfi = CallFrameInfo(
            stream=_Window(mm, eh_frame.offset, eh_frame.size),  # type: ignore[arg-type]
            size=eh_frame.size,
            address=eh_frame.addr,
            base_structs=DWARFStructs(little_endian=True, dwarf_format=32, address_size=8),
            for_eh_frame=True,
        )
        self._rows: dict[int, list[dict[str, Any]] | None] = {}

    def rows_for(self, vaddr: int) -> tuple[list[dict[str, Any]], int] | None:
        """The decoded CFI table of the FDE covering link-time ``vaddr``, and the FDE's end."""
        i = int(np.searchsorted(self._starts, vaddr, side="right")) - 1
        if i < 0:
            return None
        off = int(self._fdes[i])
        if off not in self._rows:
            try:
                entry = self._cfi._parse_entry_at(off)  # noqa: SLF001 - one FDE, not the whole section
                self._rows[off] = [entry] if isinstance(entry, FDE) else None  # type: ignore[list-item]
            except Exception:  # noqa: BLE001 - a damaged FDE: no CFI for this function
                self._rows[off] = None
        cached = self._rows[off]
        if not cached:
            return None
        fde = cached[0]
        start, length = fde["initial_location"], fde["address_range"]  # type: ignore[index]
        if not start <= vaddr < start + length:
            return None
        return fde.get_decoded().table, start + length  # type: ignore[attr-defined]


@dataclass(slots=True)
class UnwindState:
    """Registers known in one frame (DWARF numbering) and its pc."""

    pc: int
    regs: dict[int, int]


def step(table: list[dict[str, Any]], vaddr: int, state: UnwindState, read_u64: Any) -> UnwindState | None:
    """The caller's state from ``state`` by the CFI row for link-time ``vaddr``.

    ``None`` when a rule cannot be evaluated here (the walk falls back to
    scanning); a state with ``pc == 0`` when the CFI marks the outermost frame.
    """
    row = None
    for r in table:
        if r["pc"] <= vaddr:
            row = r
        else:
            break
    if row is None:
        return None
    cfa_rule = row["cfa"]
    if cfa_rule.expr is not None or cfa_rule.reg not in state.regs:
        return None
    cfa = state.regs[cfa_rule.reg] + cfa_rule.offset
    new_regs: dict[int, int] = {7: cfa}
    for reg in (3, 6, 12, 13, 14, 15):  # callee-saved: same value unless a rule says where they went
        if reg in state.regs:
            new_regs[reg] = state.regs[reg]
    ra: int | None = None
    for reg, rule in row.items():
        if not isinstance(reg, int):
            continue
        value: int | None
        if rule.type == RegisterRule.OFFSET:
            value = read_u64(cfa + rule.arg)
        elif rule.type == RegisterRule.VAL_OFFSET:
            value = cfa + rule.arg
        elif rule.type == RegisterRule.SAME_VALUE:
            value = state.regs.get(reg)
        elif rule.type == RegisterRule.REGISTER:
            value = state.regs.get(rule.arg)  # type: ignore[arg-type]
        else:  # UNDEFINED, EXPRESSION, VAL_EXPRESSION, ARCHITECTURAL
            value = None
        if reg == RA:
            if rule.type == RegisterRule.UNDEFINED:
                return UnwindState(0, {})  # "no return address": the outermost frame (_start, clone3)
            ra = value
        elif value is None:
            new_regs.pop(reg, None)
        else:
            new_regs[reg] = value
    if ra is None and RA not in row:
        ra = read_u64(cfa - 8)  # x86-64 CIEs always say "RA at CFA-8"; be lenient when they don't
    if ra is None:
        return None
    return UnwindState(ra, new_regs)


__all__ = ["DWARF_REGS", "EhFrame", "RA", "Section", "UnwindState", "step"]
