"""Inputs and outputs of ``fleetepi replay``: gzip, stdin/stdout, atomic output, alert schema."""

from __future__ import annotations

import gzip
import json
import subprocess

import jsonschema
import pytest
from click.testing import CliRunner

from fleetepi.contract import SCHEMA_DIR, decode_alert
from fleetepi.jsonl import open_input
from fleetepi.replay import replay_command

from .conftest import FLEETEPI, DATA, crash_line, host_line

ALERT_SCHEMA = json.loads((SCHEMA_DIR / "alert.schema.json").read_text())
LINES = [host_line("h1", 0), crash_line("h1", 1), b"{broken", crash_line("h1", 2)]


@pytest.mark.parametrize("name", ["events.jsonl", "events.jsonl.gz", "events-without-suffix"])
def test_plain_and_gzip_inputs_read_the_same(write_events, name: str) -> None:
    path = write_events(LINES, name)
    if name == "events-without-suffix":  # gzip recognised by its magic bytes, not the name
        path.write_bytes(gzip.compress(path.read_bytes()))
    with open_input(path) as src:
        assert [line.rstrip(b"\n") for line in src] == LINES
        assert src.total_bytes == path.stat().st_size
        assert src.position() == path.stat().st_size


def test_missing_input_is_a_clear_error(tmp_path) -> None:
    result = CliRunner().invoke(replay_command, ["-i", str(tmp_path / "nope.jsonl"), "-o", "-"])
    assert result.exit_code != 0
    assert "cannot read" in result.stderr and "nope.jsonl" in result.stderr


def test_stdin_to_stdout_with_gzip_on_stdin(write_events) -> None:
    path = write_events(LINES, "events.jsonl.gz")
    proc = subprocess.run([FLEETEPI, "replay", "-i", "-", "-o", "-"], input=path.read_bytes(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    err = proc.stderr.decode()
    assert "malformed_json" in err and "events: crash" in err
    assert "\x1b[" not in err  # no colour, no progress bar on a pipe
    # stdout carries nothing but alerts (none for three events)
    assert proc.stdout == b""


def test_recorded_stream_alerts_follow_the_schema(tmp_path) -> None:
    out = tmp_path / "alerts.jsonl"
    result = CliRunner().invoke(replay_command, ["-i", str(DATA / "recorded.jsonl.gz"), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.stderr
    lines = out.read_bytes().splitlines()
    assert lines, "the recorded stream has outbreaks; alerts expected"
    for line in lines:
        jsonschema.validate(json.loads(line), ALERT_SCHEMA)
        decode_alert(line)
    assert not list(tmp_path.glob(".*partial"))


def test_gzip_output(tmp_path) -> None:
    out = tmp_path / "alerts.jsonl.gz"
    result = CliRunner().invoke(replay_command, ["-i", str(DATA / "recorded.jsonl.gz"), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.stderr
    assert all(decode_alert(line) for line in gzip.decompress(out.read_bytes()).splitlines())
