"""The bench scripts under test, loaded from bench/ (a folder of scripts, not a package), and the
Titan conversion the tests share (~1.5 s, once per session).

Data: /work/shared/data/real/titan/ from olcf/TitanGPULife (Ostrouchov et al., "GPU Lifetimes on
Titan Supercomputer: Survival Analysis and Reliability", SC '20).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TITAN_DATA = Path("/work/shared/data/real/titan")


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as module ``name`` (bench/titan.py imports titan_data by that name too)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def td() -> ModuleType:
    """bench/titan_data.py, the converter."""
    return load_bench("titan_data")


@pytest.fixture(scope="session")
def bench() -> ModuleType:
    """bench/titan.py, the benchmark's scoring."""
    return load_bench("titan")


@pytest.fixture(scope="session")
def titan_conversion(td: ModuleType) -> Any:
    if not (TITAN_DATA / "gc_full.csv.gz").exists():
        pytest.skip("Titan data not on this machine")
    return td.convert()
