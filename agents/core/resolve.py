"""Addresses of the crashed process -> modules, code bytes, symbols and CFI.

One :class:`AddressResolver` per core: it answers the questions the stack
walker, the shape and the symbolizer ask about an address, from the core
first and from build-id-verified files on this host second, and remembers
why a module could not be symbolized (the event's notes say so).
"""

from __future__ import annotations

import re

from fleetepi.agents.core.demangle import demangle
from fleetepi.agents.core.elfcore import CoreFile
from fleetepi.agents.core.mappings import ModuleInfo, ModuleMap
from fleetepi.agents.core.rules import SigFrame
from fleetepi.agents.core.stackwalk import RawFrame
from fleetepi.agents.core.symbols import SymbolCache, SymbolTable
from fleetepi.contract import Frame

_CLONE = re.compile(r"(\.(cold|part\.\d+|isra\.\d+|constprop\.\d+|lto_priv\.\d+|localalias))+$")


def clone_base(func: str | None) -> str | None:
    """``foo.cold``/``foo.isra.0``/``foo.part.3`` -> ``foo``: GCC's clones are parts of one
    function, and which clone a build has depends on flags, not on the bug."""
    return _CLONE.sub("", func) if func else func


class AddressResolver:
    """Answers for addresses of one core.

    :param core: the open core.
    :param modmap: its modules.
    :param symbols: the (shared) symbol cache.
    :param overrides: module path in the core -> file on this host (``--executable``).
    """

    def __init__(self, core: CoreFile, modmap: ModuleMap, symbols: SymbolCache, overrides: dict[str, str]) -> None:
        self.core = core
        self.modmap = modmap
        self.symbols = symbols
        self.overrides = overrides
        self.why_no_symbols: dict[str, str] = {}

    def table_for(self, mod: ModuleInfo) -> SymbolTable | None:
        table, why = self.symbols.get(mod, self.overrides.get(mod.path))
        if why:
            self.why_no_symbols.setdefault(mod.name, why)
        return table

    def _located(self, addr: int) -> tuple[ModuleInfo, SymbolTable, int] | None:
        """``(module, table, link-time address)`` or ``None`` without a verified file."""
        mod = self.modmap.find(addr)
        table = self.table_for(mod) if mod is not None else None
        if mod is None or table is None:
            return None
        return mod, table, addr - mod.base + mod.link_vaddr

    def code(self, addr: int, n: int) -> bytes | None:
        """Code bytes: dumped in the core (JIT, patched code), else from the module file."""
        data = self.core.read(addr, n)
        if data is not None:
            return data
        found = self._located(addr)
        return found[1].code(found[2], n) if found else None

    def function_start(self, addr: int) -> int | None:
        found = self._located(addr)
        sym = found[1].lookup(found[2]) if found else None
        if found is None or sym is None:
            return None
        mod = found[0]
        return sym.start - mod.link_vaddr + mod.base

    def cfi(self, addr: int) -> tuple[list[dict[str, object]], int] | None:
        found = self._located(addr)
        rows = found[1].unwind_rows(found[2]) if found else None
        return (rows, found[2]) if (rows and found) else None

    def is_mapped(self, addr: int) -> bool:
        return self.core.is_mapped(addr) or self.modmap.find(addr) is not None

    def is_executable(self, addr: int) -> bool:
        return self.core.is_executable(addr) or self.modmap.is_executable(addr)

    def exec_ranges(self) -> list[tuple[int, int]]:
        return [(s.vaddr, s.end) for s in self.core.segments if s.executable] + self.modmap.exec_ranges()

    def symbolize(self, raw: list[RawFrame]) -> tuple[list[Frame], list[SigFrame]]:
        """Contract frames (module, function, offset) and the rules' view of them."""
        frames: list[Frame] = []
        sig: list[SigFrame] = []
        for rf in raw:
            mod = self.modmap.find(rf.pc)
            if mod is None:
                name = "[null]" if rf.pc == 0 else "[unmapped]"
                frames.append(Frame(module=name, offset="0x0" if rf.pc == 0 else None, language="native"))
                sig.append(SigFrame(module=name, offset=0 if rf.pc == 0 else None, unmapped=True))
                continue
            offset = rf.pc - mod.base
            # A return address points after the call; the call itself is one byte back.
            found = self._located(rf.pc - (1 if rf.is_return else 0))
            sym = found[1].lookup(found[2]) if found else None
            func = sym.name if sym is not None else ("__restore_rt" if rf.sigreturn else None)
            frames.append(Frame(module=mod.name, function=func, offset=f"0x{offset:x}", language="native"))
            base = clone_base(func)
            shown = demangle(base) if base else None
            sig.append(SigFrame(module=mod.name, function=shown, offset=offset,
                                raw_function=base if shown != base else None))
        return frames, sig


__all__ = ["AddressResolver", "clone_base"]
