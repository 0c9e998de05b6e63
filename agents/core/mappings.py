"""Modules of the crashed process: which file each address belongs to, and its build id.

``NT_FILE`` lists every file mapping; grouping them by path gives one module
per shared object with its load base (the mapping of file page 0). Offsets in
signatures are relative to that base, so they do not move with ASLR. The
GNU build id is read from the module's first page *in the core* (the kernel
dumps ELF headers of file mappings by default, ``coredump_filter`` bit 4), so
the event names the exact build of every library even when the host that
reads the core has another one, or none.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
from dataclasses import dataclass

from fleetepi.agents.core.elfcore import CoreFile

_EHDR = struct.Struct("<4s12xHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_PT_LOAD = 1
_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """One mapped ELF file of the process.

    :param path: path on the crashed host (for finding the file, never for signatures).
    :param name: basename, what signatures show (``(deleted)`` suffix removed).
    :param base: address of file offset 0; ``address - base`` is the module offset.
    :param link_vaddr: the ELF's first ``PT_LOAD`` virtual address (0 for PIE and
        shared objects), so ``address - base + link_vaddr`` is the address the
        symbol tables speak in.
    """

    path: str
    name: str
    base: int
    end: int
    build_id: str | None
    link_vaddr: int
    exec_ranges: tuple[tuple[int, int], ...] = ()  # absolute [start, end) of its PF_X loads


_SO_MINOR = re.compile(r"(\.so\.\d+)(\.\d+)+$")


def module_name(path: str) -> str:
    """The name that signatures show, stable across hosts and install prefixes.

    The basename, with a shared object's minor versions cut at its soname's
    major (``libstdc++.so.6.0.30`` -> ``libstdc++.so.6``): two hosts a point
    release apart crash in the same ``std::terminate``. The exact build is in
    the event's ``modules`` (build id).
    """
    if path.endswith(" (deleted)"):
        path = path[: -len(" (deleted)")]
    return _SO_MINOR.sub(r"\1", os.path.basename(path) or path)


@dataclass(frozen=True, slots=True)
class ElfHead:
    """What the first page of an ELF image tells: build id, link base, executable loads."""

    build_id: str | None = None
    link_vaddr: int = 0
    exec_loads: tuple[tuple[int, int], ...] = ()  # link-time [start, end) of PF_X PT_LOADs


def parse_elf_head(page: bytes) -> ElfHead:
    """Parse the first page of an ELF64 file in memory (or on disk).

    Returns an empty :class:`ElfHead` for anything that is not a readable
    ELF64 header: the caller still has a module, just without a build id.
    """
    if len(page) < _EHDR.size or page[:4] != b"\x7fELF" or page[4] != 2:
        return ElfHead()
    (_m, _type, _mach, _ver, _entry, phoff, _shoff, _flags, _ehsize, phentsize, phnum, *_rest) = _EHDR.unpack_from(page)
    if phentsize != _PHDR.size:
        return ElfHead()
    build_id: str | None = None
    link_vaddr: int | None = None
    exec_loads: list[tuple[int, int]] = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + _PHDR.size > len(page):
            break
        p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_align = _PHDR.unpack_from(page, at)
        if p_type == _PT_LOAD:
            if link_vaddr is None:
                link_vaddr = p_vaddr & ~(max(p_align, 1) - 1) if p_align else p_vaddr
            if p_flags & 1:
                exec_loads.append((p_vaddr, p_vaddr + p_memsz))
        elif p_type == _PT_NOTE and build_id is None:
            build_id = _find_build_id(page[p_offset : p_offset + p_filesz])
    return ElfHead(build_id, link_vaddr or 0, tuple(exec_loads))


def _find_build_id(blob: bytes) -> str | None:
    pos = 0
    while pos + 12 <= len(blob):
        namesz, descsz, n_type = struct.unpack_from("<III", blob, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(blob):
            return None
        if n_type == _NT_GNU_BUILD_ID and blob[name_at : name_at + namesz].rstrip(b"\0") == b"GNU":
            return blob[desc_at : desc_at + descsz].hex()
        pos = desc_at + ((descsz + 3) & ~3)
    return None


class ModuleMap:
    """Address -> module lookup over the core's ``NT_FILE`` mappings, plus the vDSO."""

    def __init__(self, modules: list[ModuleInfo]) -> None:
        self.modules = sorted(modules, key=lambda m: m.base)
        self._bases = [m.base for m in self.modules]

    @classmethod
    def from_core(cls, core: CoreFile) -> ModuleMap:
        by_path: dict[str, list[tuple[int, int, int]]] = {}
        for fm in core.notes.files:
            by_path.setdefault(fm.path, []).append((fm.start, fm.end, fm.page_offset))
        modules: list[ModuleInfo] = []
        for path, ranges in by_path.items():
            ranges.sort()
            # A file mapped twice (dlopen'd again, or mmap'd as data) starts a new module at each page 0.
            groups: list[list[tuple[int, int, int]]] = []
            for r in ranges:
                if r[2] == 0 or not groups:
                    groups.append([r])
                else:
                    groups[-1].append(r)
            for group in groups:
                base = group[0][0] - group[0][2] * core.notes.page_size
                if base < 0:  # a damaged page offset: the module starts where its first mapping does
                    base = group[0][0]
                page = core.read(base, 4096) if group[0][2] == 0 else None
                head = parse_elf_head(page) if page else ElfHead()
                end = group[-1][1]
                # Executable ranges from the ELF's own program headers: gdb's gcore leaves
                # unmodified text out of the core entirely, so PT_LOAD flags are not enough.
                rel = [(s - head.link_vaddr + base, e - head.link_vaddr + base) for s, e in head.exec_loads]
                ranges = tuple((max(s, base), min(e, end)) for s, e in rel if s < end)
                modules.append(ModuleInfo(path, module_name(path), base, end, head.build_id, head.link_vaddr, ranges))
        vdso = core.notes.auxv.get(33)
        if vdso:
            seg = core.segment_at(vdso)
            page = core.read(vdso, 4096)
            head = parse_elf_head(page) if page else ElfHead()
            end = seg.end if seg else vdso + 0x2000
            modules.append(ModuleInfo("[vdso]", "[vdso]", vdso, end, head.build_id, head.link_vaddr, ((vdso, end),)))
        return cls(modules)

    def exec_ranges(self) -> list[tuple[int, int]]:
        """Every module's executable range, sorted (for the stack scanner)."""
        return sorted(r for m in self.modules for r in m.exec_ranges)

    def is_executable(self, addr: int) -> bool:
        mod = self.find(addr)
        return mod is not None and any(s <= addr < e for s, e in mod.exec_ranges)

    def find(self, addr: int) -> ModuleInfo | None:
        i = bisect.bisect_right(self._bases, addr) - 1
        while i >= 0:
            m = self.modules[i]
            if addr < m.end:
                return m
            if m.base + (1 << 32) < addr:  # modules do not span 4 GiB; stop looking back
                return None
            i -= 1
        return None


__all__ = ["ElfHead", "ModuleInfo", "ModuleMap", "module_name", "parse_elf_head"]
