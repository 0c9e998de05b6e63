"""C++ symbol names for humans: ``_ZN3svc12parse_headerEi`` -> ``svc::parse_header(int)``.

Uses libstdc++'s own ``__cxa_demangle`` through ctypes: every host that runs
C++ (every GPU training host) has it, it is the demangler the compiler's ABI
defines, and it needs no new dependency. Where libstdc++ cannot be loaded,
names stay mangled (still stable, just less readable) and
:func:`available` says so, so the event can carry a note.
"""

from __future__ import annotations

import ctypes
import functools

_MAX_NAME = 4096


@functools.cache
def _demangler() -> tuple[object, object] | None:
    try:
        lib = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return fn, free


def available() -> bool:
    """Whether C++ names can be demangled on this host."""
    return _demangler() is not None


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of an Itanium-ABI C++ name; anything else unchanged."""
    if not name.startswith("_Z") or len(name) > _MAX_NAME:
        return name
    tools = _demangler()
    if tools is None:
        return name
    fn, free = tools
    status = ctypes.c_int(-1)
    ptr = fn(name.encode("utf-8", "replace"), None, None, ctypes.byref(status))  # type: ignore[operator]
    if not ptr:
        return name
    try:
        out = ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else name
    finally:
        free(ptr)  # type: ignore[operator]
    return out


__all__ = ["available", "demangle"]
