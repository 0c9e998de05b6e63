"""``fleetepi demo`` end to end: a real subprocess, a real HTTP scrape of /metrics."""

from __future__ import annotations

import signal
import subprocess
import time

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from fleetepi.demo import demo_command, paced, parse_speed
from fleetepi.simulate import SimConfig, simulate

from .conftest import spawn

PIPELINE_SERIES = {
    "fleetepi_events", "fleetepi_events_invalid", "fleetepi_alerts", "fleetepi_alerts_resolved",
    "fleetepi_alert_active", "fleetepi_alert_score", "fleetepi_alert_p_value", "fleetepi_alert_relative_risk",
    "fleetepi_watermark_timestamp_seconds", "fleetepi_hosts", "fleetepi_signature_crashes",
    "fleetepi_host_crashes", "fleetepi_telemetry_events",
}


def test_demo_serves_metrics_until_interrupted(free_port: int) -> None:
    with spawn("demo", "--hosts", "100", "--days", "1", "--speed", "max", "--port", str(free_port),
               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        output = []
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        for line in proc.stdout:  # the summary, then "serving ... until Ctrl-C"
            output.append(line)
            if line.startswith("serving ") or time.monotonic() > deadline:
                break
        text = "".join(output)
        assert "serving http://localhost:" in text, text + (proc.stderr.read() if proc.poll() is not None else "")
        assert "injected outbreaks" in text and "caught" in text
        body = httpx.get(f"http://127.0.0.1:{free_port}/metrics", timeout=10).text
        families = {f.name: f for f in text_string_to_metric_families(body)}
        assert set(families) >= PIPELINE_SERIES
        events = {s.labels["kind"]: s.value for s in families["fleetepi_events"].samples if s.name.endswith("_total")}
        assert events["host"] >= 100 and events["crash"] > 0 and events["telemetry"] > 0
        assert families["fleetepi_hosts"].samples[0].value == 100
        # every alert the demo printed as firing and not resolved is an active series
        fired = sum(s.value for s in families["fleetepi_alerts"].samples if s.name.endswith("_total"))
        resolved = sum(s.value for s in families["fleetepi_alerts_resolved"].samples if s.name.endswith("_total"))
        assert len(families["fleetepi_alert_active"].samples) <= fired - resolved + 0.5
        assert fired == text.count(" FIRING ")
        assert len(families["fleetepi_host_crashes"].samples) <= 20
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_demo_exit_flag_and_plain_alert_lines(free_port: int) -> None:
    result = CliRunner().invoke(demo_command, ["--hosts", "60", "--days", "1", "--speed", "max", "--exit",
                                               "--port", str(free_port), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.output  # not a TTY: no colour codes, no progress bar
    firing = [line for line in result.output.splitlines() if " FIRING " in line]
    assert all(line[:4].isdigit() and "score=" in line for line in firing)


def test_demo_takes_a_maintenance_file(free_port: int, tmp_path) -> None:
    """A window over the whole run for every rack r01 host: their events are left out, counted in the summary."""
    mfile = tmp_path / "m.csv"
    mfile.write_text("target,start,end,reason\nrack=r01,2000-01-01T00:00:00Z,2100-01-01T00:00:00Z,test\n")
    result = CliRunner().invoke(demo_command, ["--hosts", "60", "--days", "0.5", "--speed", "max", "--exit",
                                               "--no-metrics", "--no-archive", "--maintenance", str(mfile)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "in maintenance" in x)
    assert "1 window(s) from file/silences" in line
    assert int(line.split("│")[2].strip()) > 0


def test_port_in_use_is_a_clear_error(free_port: int) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port))
        s.listen()
        result = CliRunner().invoke(demo_command, ["--hosts", "20", "--days", "0.1", "--speed", "max", "--exit",
                                                   "--port", str(free_port)])
    assert result.exit_code != 0
    assert f"cannot serve metrics on 127.0.0.1:{free_port}" in result.output


def test_help_teaches() -> None:
    result = CliRunner().invoke(demo_command, ["--help"])
    assert result.exit_code == 0
    for word in ("--speed", "--hosts", "--days", "--exit", "/metrics", "Examples"):
        assert word in result.output


@pytest.mark.parametrize(("value", "expected"), [
    ("max", None),            # no pacing
    ("auto", 86400 / 60),     # one day in about a minute
    ("3600", 3600.0),         # one simulated hour per second
    ("100x", 100.0),
])
def test_parse_speed(value: str, expected: float | None) -> None:
    assert parse_speed(value, span_s=86400) == expected


def test_pacing_follows_event_time() -> None:
    class FakeClock:
        def __init__(self) -> None:
            self.now = 0.0
            self.slept = 0.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, s: float) -> None:
            self.now += s
            self.slept += s

    events = list(simulate(SimConfig(hosts=20, days=0.1, seed=1)).events())
    clock = FakeClock()
    assert len(list(paced(events, speed=864.0, clock=clock))) == len(events)
    span_s = (events[-1].ts_ms - events[0].ts_ms) / 1000
    assert clock.slept == pytest.approx(span_s / 864.0, rel=0.1)
