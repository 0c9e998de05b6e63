"""Fixtures of the core dump tests: programs compiled once per session, cores made on demand.

Every core here is real: gcc builds ``programs/crashy.c`` in four variants
(PIE or not, symbols or stripped, frame pointers or not), the kernel (or gdb,
where core_pattern is a pipe) writes the cores. Cores are cached per
(variant, mode, run) for the session so that tests asserting different
things on the same crash do not crash the program again.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("agents_core_cores", _HERE / "cores.py")
assert _spec is not None and _spec.loader is not None
cores = importlib.util.module_from_spec(_spec)
sys.modules["agents_core_cores"] = cores
_spec.loader.exec_module(cores)


@pytest.fixture(scope="session")
def core_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agents_core")


@pytest.fixture(scope="session")
def programs(core_tmp: Path) -> dict[str, Path]:
    """variant name -> built executable; plus "pie_fp_g@2", the same build in another directory."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (scripts/install-services.sh installs it)")
    built = {name: cores.compile_program(v, core_tmp / "build" / name) for name, v in cores.VARIANTS.items()}
    built["pie_fp_g@2"] = cores.compile_program(cores.VARIANTS["pie_fp_g"], core_tmp / "elsewhere" / "build2")
    return built


@pytest.fixture(scope="session")
def core_factory(programs: dict[str, Path], core_tmp: Path) -> Callable[..., Path]:
    """``core_factory(variant, mode, run=0)`` -> path of a real core of that crash."""
    made: dict[tuple[str, str, int], Path] = {}

    def make(variant: str, mode: str, run: int = 0) -> Path:
        key = (variant, mode, run)
        if key not in made:
            workdir = core_tmp / "cores" / variant.replace("@", "_") / f"{mode}-{run}"
            made[key] = cores.make_core([str(programs[variant]), mode], workdir)
        return made[key]

    return make


@pytest.fixture(scope="session")
def analyzer():  # type: ignore[no-untyped-def]
    from fleetepi.agents.core.signature import CoreAnalyzer

    a = CoreAnalyzer()
    yield a
    a.close()


@pytest.fixture(scope="session")
def python_core_factory(core_tmp: Path) -> Callable[..., Path]:
    """``python_core_factory(snippet_name, run=0)`` -> core of this interpreter crashing in that way."""
    snippets = {
        "ctypes": (
            "import ctypes\n"
            "def inner():\n"
            "    return ctypes.string_at(0)\n"
            "def outer():\n"
            "    return inner()\n"
            "outer()\n"
        ),
        "abort": (
            "import os\n"
            "def give_up():\n"
            "    os.abort()\n"
            "def step():\n"
            "    give_up()\n"
            "step()\n"
        ),
    }
    made: dict[tuple[str, int], Path] = {}

    def make(name: str, run: int = 0) -> Path:
        if (name, run) not in made:
            workdir = core_tmp / "pycores" / f"{name}-{run}"
            workdir.mkdir(parents=True, exist_ok=True)
            script = workdir / f"crash_{name}.py"
            script.write_text(snippets[name])
            made[(name, run)] = cores.make_core([sys.executable, str(script)], workdir)
        return made[(name, run)]

    return make
