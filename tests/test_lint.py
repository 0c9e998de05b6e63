"""The lint gate, enforced in CI: `make test` runs pytest, so a lint finding fails the build.

The same checks as scripts/check (`make lint`); the rules live in pyproject.toml's
[tool.ruff] and [tool.mypy]. The tools run as subprocesses of this interpreter, so the
venv's pinned versions are the ones that judge.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (it comes with `pip install -e '.[dev]'`)")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)


def test_ruff_finds_nothing() -> None:
    proc = _run("ruff", "check", "--output-format", "concise", ".")
    assert proc.returncode == 0, f"ruff check . failed (fix, or `ruff check --fix .`):\n{proc.stdout}{proc.stderr}"


def test_mypy_passes_on_the_pure_packages() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with `pip install -e '.[dev]'`)")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "typecheck")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"mypy failed:\n{proc.stdout}{proc.stderr}"
