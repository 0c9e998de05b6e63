"""The fuzzers of ``bench/robustness.py`` with a small budget: CI's guard that no entry point regressed.

Run by hand with a large one (``FLEETEPI_FUZZ_BUDGET=200000 pytest -m fuzz tests/test_robustness.py``)
or through the bench itself (``bench/robustness.py --budget 1000000``). Each
entry point must show 0 tracebacks, 0 inputs over 5 s, 0 events that fail the
contract's JSON Schemas and 0 inputs neither accepted nor counted as rejected.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("fleetepi_bench_robustness", Path(__file__).resolve().parents[1] / "bench" / "robustness.py")
assert _spec is not None and _spec.loader is not None
robustness = importlib.util.module_from_spec(_spec)
sys.modules["fleetepi_bench_robustness"] = robustness
_spec.loader.exec_module(robustness)

BUDGET = int(os.environ.get("FLEETEPI_FUZZ_BUDGET", "1500"))
SEED = int(os.environ.get("FLEETEPI_FUZZ_SEED", "10"))

pytestmark = pytest.mark.fuzz


@pytest.fixture(scope="module")
def contract():  # type: ignore[no-untyped-def]
    return robustness.Contract()


def _check(tally) -> None:  # type: ignore[no-untyped-def]
    problems = [tb for tb, _ in tally.crashes[:2]] + [f"hang {s:.1f} s on {x!r}" for s, x in tally.hangs[:2]]
    problems += tally.invalid_events[:2]
    assert tally.tried > 0
    assert not problems, "\n".join(problems)
    assert tally.lost == 0
    assert tally.accepted + sum(tally.rejected.values()) == tally.tried


@pytest.mark.parametrize("name", ["replay_lines", "kafka_messages", "kernel_log", "configs", "hook_http"])
def test_in_process_entry_points(contract, name):  # type: ignore[no-untyped-def]
    _check(robustness.FUZZERS[name](BUDGET, SEED, contract))


def test_cores(contract):  # type: ignore[no-untyped-def]
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (scripts/install-services.sh installs it)")
    _check(robustness.fuzz_cores(max(12, BUDGET // 100), SEED, contract))


@pytest.mark.integration
def test_big_inputs_stay_under_300_mib(contract):  # type: ignore[no-untyped-def]
    if not Path("/usr/bin/time").exists():
        pytest.skip("GNU time is not installed")
    tally = robustness.fuzz_big_inputs(5, SEED, contract)
    _check(tally)
    assert tally.peak_rss_mb < 300, tally.notes


def test_the_mutator_is_seeded():
    a = robustness.Mutator(3, [b'{"a": 1}', b"xyz"])
    b = robustness.Mutator(3, [b'{"a": 1}', b"xyz"])
    assert [a.mutate() for _ in range(50)] == [b.mutate() for _ in range(50)]
