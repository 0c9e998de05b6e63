"""``fleetepi simulate`` end to end (through the real CLI entry point)."""

from __future__ import annotations

import gzip
import json

from click.testing import CliRunner

from fleetepi.cli import main
from fleetepi.contract import decode_event


def test_writes_events_and_truth(tmp_path):
    out, truth = tmp_path / "ev.jsonl.gz", tmp_path / "truth.json"
    r = CliRunner().invoke(main, ["simulate", "--hosts", "40", "--days", "0.5", "--seed", "3", "-o", str(out),
                                  "--truth", str(truth)])
    assert r.exit_code == 0, r.output
    lines = gzip.open(out).read().splitlines()
    assert len(lines) > 1000
    assert all(decode_event(x) for x in lines[:200])
    doc = json.loads(truth.read_text())
    assert len(doc["outbreaks"]) == 8 and doc["config"]["seed"] == 3
    assert "events" in r.output and "outbreaks" in r.output  # the summary


def test_stdout_and_no_outbreaks(tmp_path):
    truth = tmp_path / "t.json"
    r = CliRunner().invoke(main, ["simulate", "--hosts", "30", "--days", "0.2", "-o", "-",
                                                  "--outbreaks", "none", "--truth", str(truth)])
    assert r.exit_code == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert json.loads(first)["schema"] == "fleetepi.host/v1"
    assert json.loads(truth.read_text())["outbreaks"] == []


def test_help_teaches_and_bad_values_are_usage_errors():
    r = CliRunner().invoke(main, ["simulate", "--help"])
    assert r.exit_code == 0 and "Examples:" in r.output and "--outbreaks" in r.output
    r = CliRunner().invoke(main, ["simulate", "-o", "x.jsonl", "--outbreaks", "lots"])
    assert r.exit_code == 2 and "not a number of outbreaks" in r.output


def test_public_api_is_exported_and_sorted():
    import fleetepi.simulate as api

    assert api.__all__ == sorted(api.__all__)
    assert all(hasattr(api, n) for n in api.__all__)
    assert {"SimConfig", "simulate", "Simulation", "Outbreak", "write_jsonl", "write_truth"} <= set(api.__all__)
