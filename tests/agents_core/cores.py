"""Real core dumps for the tests (and the benchmark): compile, crash, collect.

The kernel writes ``core`` (or ``core.PID``) into the child's working
directory when ``core_pattern`` is the default; the child raises its own
``RLIMIT_CORE``. Where ``core_pattern`` is a pipe (systemd-coredump, apport)
no file appears, and the helper reruns the program under gdb and writes the
core with ``generate-core-file`` at the signal. The system's core_pattern is
never changed.
"""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"


@dataclass(frozen=True)
class Variant:
    """One way to build the crashing program."""

    name: str
    flags: tuple[str, ...]
    strip: bool = False


VARIANTS = {
    "pie_fp_g": Variant("pie_fp_g", ("-O1", "-g", "-fno-omit-frame-pointer", "-fPIE", "-pie")),
    "nopie_nofp": Variant("nopie_nofp", ("-O1", "-fomit-frame-pointer", "-fno-PIE", "-no-pie")),
    "pie_nofp_stripped": Variant("pie_nofp_stripped", ("-O2", "-fomit-frame-pointer", "-fPIE", "-pie"), strip=True),
    "nopie_fp_stripped": Variant("nopie_fp_stripped", ("-O1", "-fno-omit-frame-pointer", "-fno-PIE", "-no-pie"), strip=True),
}


def compile_program(variant: Variant, out_dir: Path, name: str = "crashy") -> Path:
    """Build ``programs/crashy.c`` as ``out_dir/name`` (the basename is what signatures show)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / name
    subprocess.run(["gcc", *variant.flags, "-o", str(exe), str(PROGRAMS / "crashy.c")], check=True, capture_output=True)
    if variant.strip:
        subprocess.run(["strip", "--strip-all", str(exe)], check=True, capture_output=True)
    return exe


def _unlimited_core() -> None:
    """Raise RLIMIT_CORE as far as allowed (a container may cap the hard limit; then gdb makes the core)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    except (ValueError, OSError):
        pass


def make_core(cmd: list[str], workdir: Path, timeout_s: float = 120) -> Path:
    """Run ``cmd`` until it dies of a signal and return its core file.

    :raises RuntimeError: the program did not crash, or no core could be made.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("core*"):
        old.unlink()
    proc = subprocess.Popen(cmd, cwd=workdir, preexec_fn=_unlimited_core,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rc = proc.wait(timeout=timeout_s)
    if rc >= 0:
        raise RuntimeError(f"{cmd} exited with {rc} instead of crashing")
    for name in ("core", f"core.{proc.pid}"):
        if (workdir / name).is_file():
            return workdir / name
    found = sorted(workdir.glob("core*"))
    if found:
        return found[0]
    return _core_under_gdb(cmd, workdir, timeout_s)


def _core_under_gdb(cmd: list[str], workdir: Path, timeout_s: float) -> Path:
    gdb = shutil.which("gdb")
    if gdb is None:
        raise RuntimeError("the kernel wrote no core (core_pattern is a pipe?) and gdb is not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "core.gdb"
    subprocess.run(
        [gdb, "-batch", "-nx", "-ex", "set pagination off", "-ex", "run", "-ex", f"generate-core-file {out}",
         "--args", *cmd],
        cwd=workdir, capture_output=True, timeout=timeout_s, check=False,
    )
    if not out.is_file():
        raise RuntimeError(f"no core from the kernel nor from gdb for {cmd}")
    return out


def gcore_live(cmd: list[str], workdir: Path, timeout_s: float = 60) -> Path:
    """Core of a *live* process with gdb's ``gcore`` (the process keeps running, then is killed)."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # "waiting": the program is inside wait_top
        out = workdir / "core.live"
        subprocess.run(["gdb", "-batch", "-nx", "-p", str(proc.pid), "-ex", f"gcore {out}"],
                       capture_output=True, timeout=timeout_s, check=False)
        if not out.is_file():
            raise RuntimeError("gdb could not attach (ptrace not permitted here?)")
        return out
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


__all__ = ["VARIANTS", "Variant", "compile_program", "gcore_live", "make_core"]
