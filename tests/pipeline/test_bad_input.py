"""Every bad input of issue 2 gets its own reason, is counted with its line number, and the run goes on."""

from __future__ import annotations

import subprocess

import orjson
import pytest
from click.testing import CliRunner

from fleetepi.pipeline import Pipeline, StrictModeError
from fleetepi.replay import replay_command

from .conftest import FLEETEPI, crash_line, host_line, telemetry_line, ts

# One bad line, placed as line 3 of a stream whose other lines are good, and its reason.
BAD_LINES = [
    # truncated JSON, as a half-written spool file leaves it
    (b'{"schema":"fleetepi.crash/v1","ts":"2026-11-22T10:01:00Z","host":"h1","signa', "malformed_json"),
    # not JSON at all (a log line in the wrong file)
    (b"Nov 22 10:01:00 h1 kernel: NVRM: Xid 79", "malformed_json"),
    # not UTF-8: must be counted, not crash a text decoder
    (b'{"schema":"fleetepi.crash/v1","host":"\xff\xfe"}', "malformed_json"),
    # valid JSON but not an object
    (b"[1, 2, 3]", "not_an_object"),
    # a schema version this build does not know
    (orjson.dumps({"schema": "fleetepi.crash/v2", "ts": ts(1), "host": "h1", "signature": "x"}), "unknown_schema"),
    # no schema tag at all
    (orjson.dumps({"ts": ts(1), "host": "h1", "signature": "x"}), "unknown_schema"),
    # a crash without its signature
    (orjson.dumps({"schema": "fleetepi.crash/v1", "ts": ts(1), "host": "h1"}), "missing_field"),
    # a telemetry event without a timestamp
    (orjson.dumps({"schema": "fleetepi.telemetry/v1", "host": "h1", "kind": "xid"}), "missing_field"),
    # a field of the wrong type
    (orjson.dumps({"schema": "fleetepi.telemetry/v1", "ts": ts(1), "host": "h1", "kind": "xid", "code": "79"}),
     "invalid_field"),
    # a timestamp without a time zone (event time must be absolute)
    (orjson.dumps({"schema": "fleetepi.crash/v1", "ts": "2026-11-22T10:01:00", "host": "h1", "signature": "x"}),
     "invalid_field"),
    # 40 minutes behind the watermark (allowed lateness is 10 minutes)
    (crash_line("h1", -35), "out_of_order"),
    # a host whose clock says 2099: ahead of the watermark and of the wall clock by over a day
    (orjson.dumps({"schema": "fleetepi.crash/v1", "ts": "2099-01-01T00:00:00Z", "host": "h1", "signature": "x"}),
     "future_timestamp"),
    # a crash from a host that was never announced: flagged, but still used
    (crash_line("ghost", 5), "unknown_host"),
    (telemetry_line("ghost", 5), "unknown_host"),
]


def _stream(bad: bytes) -> list[bytes]:
    return [host_line("h1", 0), crash_line("h1", 5), bad, crash_line("h1", 6), telemetry_line("h1", 7)]


@pytest.mark.parametrize(("bad", "reason"), BAD_LINES)
def test_bad_line_is_counted_under_its_reason_and_the_run_goes_on(bad: bytes, reason: str) -> None:
    pipe = Pipeline()
    pipe.run(_stream(bad))
    pipe.finish()
    s = pipe.summary
    assert {r: v.count for r, v in s.invalid.items()} == {reason: 1}
    sample = s.invalid[reason]
    assert sample.first_line == 3 and sample.detail
    # the good lines after the bad one were all processed
    flagged_but_used = 1 if reason == "unknown_host" else 0
    assert s.events["crash"] + s.events["telemetry"] == 3 + flagged_but_used
    assert s.lines == 5
    # admission reasons are the engine's own count; decoding reasons never reach the engine
    admission = reason in ("out_of_order", "future_timestamp", "unknown_host")
    assert dict(pipe.engine.invalid) == ({reason: 1} if admission else {})


@pytest.mark.parametrize(("bad", "reason"), BAD_LINES)
def test_strict_stops_at_the_bad_line(bad: bytes, reason: str) -> None:
    pipe = Pipeline(strict=True)
    with pytest.raises(StrictModeError) as info:
        pipe.run(_stream(bad))
    assert info.value.line == 3
    assert str(info.value).startswith(f"line 3: {reason}: ")


def test_blank_lines_are_skipped_not_counted() -> None:
    pipe = Pipeline()
    pipe.run([host_line("h1"), b"\n", b"   \r\n", crash_line("h1", 1)])
    assert pipe.summary.lines == 2 and not pipe.summary.invalid


def test_strict_cli_exits_nonzero_with_line_number(write_events) -> None:
    path = write_events(_stream(b"{oops"))
    proc = subprocess.run([FLEETEPI, "replay", "-i", str(path), "-o", "-", "--strict"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "line 3: malformed_json:" in proc.stderr


def test_summary_names_reason_count_and_first_line(write_events) -> None:
    lines = _stream(b"{oops") + [b"[]", crash_line("ghost", 9), crash_line("h1", -60)]
    path = write_events(lines)
    result = CliRunner().invoke(replay_command, ["-i", str(path), "-o", "-"])
    assert result.exit_code == 0, result.output
    summary = result.stderr
    for reason, line in [("malformed_json", 3), ("not_an_object", 6), ("unknown_host", 7), ("out_of_order", 8)]:
        row = next(r for r in summary.splitlines() if f"invalid: {reason}" in r)
        assert f"first at line {line}" in row


@pytest.mark.parametrize(("content", "message"), [
    ("step_s: [1, 2]\n", "step_s: expected float"),
    ("no_such_setting: 3\n", "no_such_setting: unknown key"),
    ("- a list\n", "expected a mapping"),
    ("key: [unclosed\n", "line 2, column 1: YAML syntax"),
])
def test_bad_config_fails_at_start_with_clear_message(tmp_path, write_events, content: str, message: str) -> None:
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text(content)
    path = write_events(_stream(crash_line("h1", 8)))
    result = CliRunner().invoke(replay_command, ["-i", str(path), "-o", str(tmp_path / "a.jsonl"), "-c", str(cfg)])
    assert result.exit_code == 2
    assert f"{cfg}: " in result.stderr and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "a.jsonl").exists()


def test_good_config_is_used(tmp_path, write_events) -> None:
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text("allowed_lateness_s: 3600\n")  # 35 minutes late is now acceptable
    path = write_events(_stream(crash_line("h1", -35)))
    result = CliRunner().invoke(replay_command, ["-i", str(path), "-o", "-", "-c", str(cfg)])
    assert result.exit_code == 0, result.stderr
    assert "out_of_order" not in result.stderr


def test_a_quiet_day_in_event_time_does_not_stall_the_replay() -> None:
    # Two days without events (a recording with an outage) is a gap, not a future
    # timestamp: every event after it is used, none is flagged.
    day = 24 * 60
    pipe = Pipeline()
    pipe.run([host_line("h1", -10 * day), crash_line("h1", -10 * day + 5), crash_line("h1", -8 * day),
              crash_line("h1", -8 * day + 1)])
    pipe.finish()
    assert pipe.summary.invalid == {}
    assert pipe.summary.events["crash"] == 3


def test_future_is_judged_against_the_wall_clock_too() -> None:
    from fleetepi.contract import decode_event
    from fleetepi.detectors import Engine

    # With the wall clock pinned before the stream, an event two days past the
    # watermark is beyond both and is refused; pinned after it, the same event is a gap.
    for now_ms, expected in ((0, "future_timestamp"), (2**62, None)):
        eng = Engine(clock_ms=lambda now_ms=now_ms: now_ms)
        eng.process(decode_event(host_line("h1", 0)))
        eng.process(decode_event(crash_line("h1", 5)))
        eng.process(decode_event(crash_line("h1", 2 * 24 * 60)))
        assert (next(iter(eng.invalid), None)) == expected
