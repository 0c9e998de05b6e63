"""Symbol tables of the modules on this host, verified by build id and cached per build id.

A module is symbolized only from a file whose GNU build id equals the one the
core recorded, so a library upgraded since the crash never names the wrong
function. ``/usr/lib/debug/.build-id/xx/yyyy.debug`` is preferred when present
(full ``.symtab``), else the file at the mapped path. Symbol arrays are
decoded with numpy straight from the section bytes (an ``Elf64_Sym`` is a
fixed 24-byte record), which is ~100x faster than iterating pyelftools
symbol objects; names are read from the string table only for hits.
Reading the same build id twice costs nothing: :class:`SymbolCache` keeps
the tables (LRU) for the life of the agent.
"""

from __future__ import annotations

import mmap
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile

from fleetepi.agents.core.cfi import EhFrame, Section
from fleetepi.agents.core.mappings import ModuleInfo, parse_elf_head

_SYM = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")])
_STT_FUNC = 2
_STT_GNU_IFUNC = 10
_STB_GLOBAL = 1
#: A symbol without a size covers at most this many bytes (assembly stubs).
_SIZELESS_SPAN = 256

DEFAULT_DEBUG_DIRS = ("/usr/lib/debug",)


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    start: int  # link-time virtual address


class SymbolTable:
    """Function symbols and code bytes of one ELF file on this host.

    :param path: the file whose symbols to read (already verified to match the build id).
    :param code_path: the file whose code bytes to read, when ``path`` is a
        separate ``.debug`` file (those keep no code); ``None`` for no code.
    """

    def __init__(self, path: str, code_path: str | None = "") -> None:
        self.path = path
        self._maps: list[tuple[object, mmap.mmap]] = []
        elf = ELFFile(self._open(path))
        code_mm = self._open(code_path) if code_path else (self._maps[0][1] if code_path == "" else None)
        self._code_mm = code_mm
        code_elf = elf if code_path == "" else (ELFFile(code_mm) if code_mm is not None else None)
        self._loads = [
            (s.header["p_vaddr"], s.header["p_offset"], s.header["p_filesz"])
            for s in (code_elf.iter_segments() if code_elf is not None else ())
            if s.header["p_type"] == "PT_LOAD"
        ]
        self._eh_sections: tuple[Section, Section] | None = None
        if code_elf is not None:
            eh, hdr = code_elf.get_section_by_name(".eh_frame"), code_elf.get_section_by_name(".eh_frame_hdr")
            if eh is not None and hdr is not None and eh.header["sh_type"] != "SHT_NOBITS":
                self._eh_sections = (
                    Section(eh.header["sh_addr"], eh.header["sh_offset"], eh.header["sh_size"]),
                    Section(hdr.header["sh_addr"], hdr.header["sh_offset"], hdr.header["sh_size"]),
                )
        self._eh_frame: EhFrame | None | bool = False  # False: not built yet
        values, sizes, names, binds = [], [], [], []
        # String tables stay in the file (mmap, page cache), not copied: C++ libraries
        # such as libtorch carry tens of MB of mangled names, and only hits are read.
        self._sym_mm = self._maps[0][1]
        self._strtabs: list[tuple[int, int]] = []  # (file offset, size)
        for section_name in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(section_name)
            if sec is None or sec.header["sh_entsize"] != _SYM.itemsize or sec.header["sh_type"] == "SHT_NOBITS":
                continue
            strsec = elf.get_section(sec.header["sh_link"])
            strtab = (strsec.header["sh_offset"], strsec.header["sh_size"])
            count = sec.header["sh_size"] // _SYM.itemsize
            if sec.header["sh_offset"] + count * _SYM.itemsize > len(self._sym_mm):
                continue  # a cut file
            syms = np.frombuffer(self._sym_mm, dtype=_SYM, count=count, offset=sec.header["sh_offset"])
            kind = syms["info"] & 0xF
            keep = ((kind == _STT_FUNC) | (kind == _STT_GNU_IFUNC)) & (syms["shndx"] != 0) & (syms["value"] != 0)
            syms = syms[keep]  # a copy: no view of the mmap outlives this loop (close() needs that)
            values.append(syms["value"])
            sizes.append(syms["size"])
            # Name offsets are tagged with their string table: index * 2**32 + offset.
            names.append(syms["name"].astype(np.uint64) + np.uint64(len(self._strtabs) << 32))
            binds.append((syms["info"] >> 4) != _STB_GLOBAL)  # globals sort first among aliases
            self._strtabs.append(strtab)
        if values:
            v = np.concatenate(values)
            order = np.lexsort((np.concatenate(binds), v))  # by address, then global before local/weak
            v, s, n = v[order], np.concatenate(sizes)[order], np.concatenate(names)[order]
            first = np.ones(len(v), dtype=bool)
            first[1:] = v[1:] != v[:-1]  # one name per address: the first (symtab, global) wins
            self._values, self._sizes, self._names = v[first], s[first], n[first]
        else:
            self._values = self._sizes = self._names = np.zeros(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self._values)

    def lookup(self, vaddr: int) -> Symbol | None:
        """The function containing link-time address ``vaddr``, if a sized symbol covers it."""
        i = int(np.searchsorted(self._values, np.uint64(vaddr), side="right")) - 1
        if i < 0:
            return None
        start, size = int(self._values[i]), int(self._sizes[i])
        if vaddr >= start + (size if size else _SIZELESS_SPAN):
            return None
        tagged = int(self._names[i])
        tab_off, tab_size = self._strtabs[tagged >> 32]
        start_at = tab_off + (tagged & 0xFFFFFFFF)
        end = self._sym_mm.find(b"\0", start_at, tab_off + tab_size)
        name = self._sym_mm[start_at : end if end >= 0 else tab_off + tab_size].decode("utf-8", "replace")
        return Symbol(name.split("@", 1)[0] or name, start)  # "memcpy@@GLIBC_2.14" -> "memcpy"

    def _open(self, path: str) -> mmap.mmap:
        fh = open(path, "rb")
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            fh.close()
            raise
        self._maps.append((fh, mm))
        return mm

    def code(self, vaddr: int, size: int) -> bytes | None:
        """File bytes at link-time address ``vaddr`` (text pages are not in cores)."""
        if self._code_mm is None:
            return None
        for p_vaddr, p_offset, p_filesz in self._loads:
            if p_vaddr <= vaddr and vaddr + size <= p_vaddr + p_filesz:
                off = p_offset + vaddr - p_vaddr
                return self._code_mm[off : off + size]
        return None

    def unwind_rows(self, vaddr: int) -> list[dict[str, object]] | None:
        """CFI rows of the function at link-time ``vaddr`` (``.eh_frame``), built on first use."""
        if self._eh_frame is False:
            self._eh_frame = None
            if self._eh_sections is not None and self._code_mm is not None:
                try:
                    self._eh_frame = EhFrame(self._code_mm, *self._eh_sections)
                except Exception:  # noqa: BLE001 - unsupported or damaged header (ValueError, construct): scan instead
                    self._eh_frame = None
        if not isinstance(self._eh_frame, EhFrame):
            return None
        found = self._eh_frame.rows_for(vaddr)
        return found[0] if found else None

    def close(self) -> None:
        for fh, mm in self._maps:
            mm.close()
            fh.close()  # type: ignore[attr-defined]
        self._maps.clear()


def file_build_id(path: str) -> str | None:
    """The GNU build id of an ELF file on disk (its first page), or ``None``."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    return parse_elf_head(head).build_id


class SymbolCache:
    """Symbol tables per build id, shared across cores (LRU of ``capacity`` files).

    :param debug_dirs: roots searched for ``.build-id/xx/rest.debug`` files.
    :param path_map: optional override of where a module's file lives on this
        host (``{"name-or-path": "/local/path"}``), e.g. ``--executable``.
    """

    def __init__(self, capacity: int = 64, debug_dirs: tuple[str, ...] = DEFAULT_DEBUG_DIRS) -> None:
        self.capacity = capacity
        self.debug_dirs = debug_dirs
        self._tables: OrderedDict[str, SymbolTable | None] = OrderedDict()
        self.hits = 0
        self.loads = 0

    def get(self, module: ModuleInfo, override: str | None = None) -> tuple[SymbolTable | None, str | None]:
        """``(table, why_not)``: the verified table for ``module``, or ``None`` and the reason."""
        key = (module.build_id or f"path:{module.path}") + (f"@{override}" if override else "")
        if key in self._tables:
            self._tables.move_to_end(key)
            self.hits += 1
            table = self._tables[key]
            return table, None if table else "no matching file on this host"
        table, why = self._load(module, override)
        self.loads += 1
        self._tables[key] = table
        if len(self._tables) > self.capacity:
            _, old = self._tables.popitem(last=False)
            if old is not None:
                old.close()
        return table, why

    def _debug_file(self, module: ModuleInfo) -> str | None:
        if not module.build_id or len(module.build_id) <= 2:
            return None
        for root in self.debug_dirs:
            cand = os.path.join(root, ".build-id", module.build_id[:2], module.build_id[2:] + ".debug")
            if Path(cand).is_file():
                return cand
        return None

    def _binary(self, module: ModuleInfo, override: str | None) -> tuple[str | None, str]:
        why = "no file on this host"
        path = module.path[: -len(" (deleted)")] if module.path.endswith(" (deleted)") else module.path
        for cand in (override, path if path.startswith("/") else None):
            if not cand or not Path(cand).is_file():
                continue
            if module.build_id is None:
                why = "the core has no build id for it; not trusting the file on this host"
                continue
            if file_build_id(cand) != module.build_id:
                why = f"build id of {cand} differs from the core's"
                continue
            return cand, ""
        return None, why

    def _load(self, module: ModuleInfo, override: str | None) -> tuple[SymbolTable | None, str | None]:
        binary, why = self._binary(module, override)
        debug = self._debug_file(module)
        try:
            if debug is not None:
                return SymbolTable(debug, code_path=binary), None
            if binary is not None:
                return SymbolTable(binary), None
        except Exception as exc:  # noqa: BLE001 - pyelftools on a damaged file: symbolize nothing from it
            return None, f"unreadable symbols ({type(exc).__name__}: {exc})"[:200]
        return None, why

    def close(self) -> None:
        for table in self._tables.values():
            if table is not None:
                table.close()
        self._tables.clear()


__all__ = ["DEFAULT_DEBUG_DIRS", "Symbol", "SymbolCache", "SymbolTable", "file_build_id"]
