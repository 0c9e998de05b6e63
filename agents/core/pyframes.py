"""Python-level frames of a crashed CPython process, via ``py-spy dump --core``.

py-spy 0.4.3 reads the interpreter's thread and frame structures from the
core (measured here: 3.11-3.13 cores, < 0.1 s) as long as the interpreter
binary is at the same path on this host, which holds on the node that
crashed. We run it as a subprocess with a timeout rather than reimplement
CPython's frame layouts per version; if py-spy is missing, slow or fails,
the event keeps its native frames and says why in ``notes``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_THREAD = re.compile(r"^Thread (?P<tid>0x[0-9a-fA-F]+|\d+)(?P<rest>.*)$")
_FRAME = re.compile(r"^\s+(?P<func>.+?) \((?P<file>.+):(?P<line>\d+)\)\s*$")
_PYTHON_MODULE = re.compile(r"^(lib)?python\d+(\.\d+)*[a-z]?(\.so.*)?$|^python\d*$")


@dataclass(frozen=True, slots=True)
class PyFrame:
    function: str
    file: str
    line: int


@dataclass(frozen=True, slots=True)
class PyStack:
    frames: list[PyFrame]
    note: str | None


def is_cpython(module_names: list[str]) -> bool:
    """Whether a process with these mapped modules runs CPython (the binary or libpython)."""
    return any(_PYTHON_MODULE.match(name) for name in module_names)


def find_pyspy() -> str | None:
    """py-spy beside this interpreter (the venv) first, then on ``PATH``."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def parse_dump(text: str, tid: int | None) -> list[PyFrame]:
    """Frames of the crashing thread from ``py-spy dump`` output, innermost first.

    Picks the thread whose id is ``tid`` (the core's first ``NT_PRSTATUS``),
    else the one holding the GIL, else the first one listed.
    """
    threads: list[tuple[int | None, bool, list[PyFrame]]] = []
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            raw = m.group("tid")
            threads.append((int(raw, 0), "gil" in m.group("rest"), []))
            continue
        f = _FRAME.match(line)
        if f and threads:
            threads[-1][2].append(PyFrame(f.group("func"), f.group("file"), int(f.group("line"))))
    for want in (lambda t: tid is not None and t[0] == tid, lambda t: t[1], lambda t: True):
        for t in threads:
            if want(t) and t[2]:
                return t[2]
    return []


def python_stack(core_path: str, tid: int | None, *, timeout_s: float, pyspy: str | None = None) -> PyStack:
    """Run py-spy on a core; never raises (a failure is a note)."""
    exe = pyspy or find_pyspy()
    if exe is None:
        return PyStack([], "py-spy not installed: native frames only")
    try:
        proc = subprocess.run(
            [exe, "dump", "--core", core_path],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return PyStack([], f"py-spy timed out after {timeout_s:g} s: native frames only")
    except OSError as exc:
        return PyStack([], f"py-spy could not run ({exc.strerror}): native frames only")
    frames = parse_dump(proc.stdout, tid)
    if not frames:
        err = (proc.stderr.strip().splitlines() or ["no Python frames in its output"])[-1][:160]
        return PyStack([], f"py-spy found no Python frames (exit {proc.returncode}: {err}): native frames only")
    return PyStack(frames, None)


__all__ = ["PyFrame", "PyStack", "find_pyspy", "is_cpython", "parse_dump", "python_stack"]
