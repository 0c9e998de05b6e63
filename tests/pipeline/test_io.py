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

from .conftest import DATA, FLEETEPI, crash_line, host_line, spawn

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


def test_metrics_port_serves_while_replaying_from_stdin(free_port: int) -> None:
    import time

    import httpx

    with spawn("replay", "-i", "-", "-o", "-", "--metrics-port", str(free_port),
               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdin is not None
        proc.stdin.write(host_line("h1", 0) + b"\n" + crash_line("h1", 1) + b"\n" + b"{bad\n")
        proc.stdin.flush()
        url = f"http://127.0.0.1:{free_port}/metrics"
        deadline = time.monotonic() + 30
        body = ""
        while time.monotonic() < deadline:  # the input stays open: the replay is live
            try:
                body = httpx.get(url, timeout=5).text
            except httpx.TransportError:
                body = ""
            if 'fleetepi_events_total{kind="crash"} 1.0' in body:
                break
            time.sleep(0.1)
        assert 'fleetepi_events_total{kind="crash"} 1.0' in body
        assert 'fleetepi_events_invalid_total{reason="malformed_json"} 1.0' in body
        while "fleetepi_hosts 1.0" not in body and time.monotonic() < deadline:  # refreshed once a second
            time.sleep(0.2)
            body = httpx.get(url, timeout=5).text
        assert "fleetepi_hosts 1.0" in body
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


def test_truncated_gzip_keeps_what_was_read_and_fails_clearly(tmp_path) -> None:
    lines = [host_line("h1", 0)] + [crash_line("h1", 1 + i * 0.01) for i in range(3000)]
    blob = gzip.compress(b"".join(line + b"\n" for line in lines))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) // 2])  # a recorder killed mid-write
    result = CliRunner().invoke(replay_command, ["-i", str(path), "-o", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 1
    assert "unreadable after line" in result.stderr
    read = int(result.stderr.split("unreadable after line ")[1].split(":")[0])
    assert 0 < read < len(lines)
    assert "events: crash" in result.stderr  # the summary of what was read is still printed
    assert (tmp_path / "a.jsonl").exists()  # and the alerts of the part that was read are kept


def test_concatenated_gzip_members_and_cut_last_line(tmp_path) -> None:
    from fleetepi.jsonl import DamagedInput, gunzip_lines

    a = gzip.compress(b"".join(line + b"\n" for line in LINES[:2]))
    b = gzip.compress(b"".join(line + b"\n" for line in LINES[2:]))
    path = tmp_path / "cat.jsonl.gz"
    path.write_bytes(a + b)  # cat a.gz b.gz > cat.gz
    with open_input(path) as src:
        assert list(src) == LINES
    with open(path, "wb") as fh:  # cut in the middle of the last member's stream
        fh.write(a + b[: len(b) // 2])
    got = []
    with open(path, "rb") as fh, pytest.raises(DamagedInput, match="truncated"):
        for line in gunzip_lines(fh, chunk_bytes=7):
            got.append(line)
    assert got[:2] == LINES[:2]


def test_reader_going_away_stops_quietly() -> None:
    """``fleetepi replay -i X -o - | head -1``: no traceback, no error after the reader left."""
    proc = subprocess.Popen([FLEETEPI, "replay", "-i", str(DATA / "recorded.jsonl.gz"), "-o", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert first.startswith(b'{"schema":"fleetepi.alert/v1"')
    assert "Traceback" not in err and "Error" not in err
