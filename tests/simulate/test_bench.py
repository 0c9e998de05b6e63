"""bench/detection.py: held-out vs tuning sets, and one end-to-end run on a tiny fleet."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from fleetepi.simulate import PRESETS

BENCH = Path(__file__).resolve().parents[2] / "bench" / "detection.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_detection", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_detection"] = mod  # importable by name: worker processes pickle run_seed by reference
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_detection", None)


def test_held_out_never_overlaps_tuning(bench) -> None:
    assert set(bench.TUNING) | set(bench.HELD_OUT) <= set(PRESETS)
    for name, seeds in bench.HELD_OUT.items():
        assert not set(seeds) & set(bench.TUNING.get(name, ()))
    assert {"large", "tiny", "longhaul", "deploy"} <= set(bench.HELD_OUT) - set(bench.TUNING)
    assert set(bench.DEFAULT_PRESETS) == {"quiet", "noisy", "large"}


def test_plan_defaults_to_held_out_and_flags_tuning_seeds(bench) -> None:
    args = bench.argparse.Namespace(preset=None, seeds=None, tuning=False, quick=False)
    seeds, what = bench.plan(args)
    assert seeds == {"quiet": (101, 102, 103), "noisy": (101, 102, 103), "large": (101, 102, 103)}
    assert what == "held-out seeds"
    args = bench.argparse.Namespace(preset="quiet", seeds="2,101", tuning=False, quick=False)
    _, what = bench.plan(args)
    assert "NOT held out" in what and "quiet 2" in what
    args = bench.argparse.Namespace(preset=None, seeds=None, tuning=True, quick=True)
    seeds, what = bench.plan(args)
    assert seeds == {"quiet": (1,), "noisy": (1,), "classic": (1,), "hot": (1,), "steady": (1,), "swinging": (1,)} \
        and "NOT for reporting" in what


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("Rscript") is None, reason="Rscript not installed (scripts/install-services.sh)")
def test_detection_bench_runs_and_scores_every_method(bench, tmp_path) -> None:
    out, md = tmp_path / "figures.json", tmp_path / "detection.md"
    assert bench.main(["--preset", "tiny", "--seeds", "101,102", "--quick", "--jobs", "2", "--md", str(md),
                       "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["held_out"]["tiny"] == [101, 102, 103] and "tiny" not in figures["tuning"]
    tiny = figures["presets"]["tiny"]
    assert tiny["seeds"] == [101, 102]  # two seeds, streamed in two worker processes
    methods = tiny["methods"]
    assert {"thresholds", "C1", "C2", "C3", "farrington", "glrpois"} <= set(methods)
    assert tiny["outbreak_records"] == 2 * 18
    for name, m in methods.items():
        o = m["overall"]
        assert o["outbreaks"] > 0 and 0.0 <= (o["recall"] or 0.0) <= 1.0, name
        assert o["pages"] >= o["false_pages"] >= sum(o["benign_false_pages"].values())
        assert set(o["ticket_classes"]) == {"expected", "repeat", "outbreak", "unexpected"}
    # the R baselines cannot name hosts or cohorts: reported as not covered, not as misses
    assert methods["glrpois"]["per_kind"]["host_spike"]["covered"] is False
    text = md.read_text()
    assert "## tiny" in text and "| method | recall |" in text and "Tuning vs held out" in text
    assert "quiet seeds 1,2,3" in text  # says what the detectors may be tuned on
