"""Maintenance windows from a file and from silences, and the alerts held back for planned work.

The file goes through the project's config loader (one line naming file and
field per mistake); silences are parsed from the JSON Alertmanager's v2 API
answers (tests/ops/test_incidents_e2e.py reads them from a real one); the
gate is exercised on a real engine over explicit events.
"""

from __future__ import annotations

import json
import random
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetepi.config import ConfigFileError
from fleetepi.contract import Crash, Host, Telemetry, encode
from fleetepi.detectors.maintenance import Window
from fleetepi.maintenance import MaintenanceSources, load_windows, silences_to_windows
from fleetepi.pipeline import ListAlertSink, Pipeline

from .conftest import FLEETEPI

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


# ---------------------------------------------------------------------- the file
def test_yaml_file_of_hosts_and_cohorts(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("windows:\n"
                    "  - hosts: [gpu-017, gpu-018]\n    start: 2026-11-03T02:00:00Z\n    end: 2026-11-03T06:00:00Z\n"
                    "    reason: BIOS roll-out\n"
                    "  - cohort: rack=r07\n    start: '2026-11-04T08:00:00+01:00'\n    end: 2026-11-04T10:00:00Z\n")
    a, b = load_windows(path)
    assert a == Window(ms(datetime(2026, 11, 3, 2, tzinfo=UTC)), ms(datetime(2026, 11, 3, 6, tzinfo=UTC)),
                       hosts=("gpu-017", "gpu-018"), reason="BIOS roll-out")
    assert (b.attribute, b.value, b.hosts) == ("rack", "r07", ())
    assert b.start_ms == ms(datetime(2026, 11, 4, 7, tzinfo=UTC))  # the offset is honoured


def test_csv_file(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("target,start,end,reason\n"
                    "gpu-017,2026-11-03T02:00:00Z,2026-11-03T06:00:00Z,reboot\n"
                    "rack=r07,2026-11-04T08:00:00Z,2026-11-04T10:00:00Z,\"PDU swap, phase 2\"\n")
    a, b = load_windows(path)
    assert a.hosts == ("gpu-017",) and a.reason == "reboot"
    assert (b.attribute, b.value, b.reason) == ("rack", "r07", "PDU swap, phase 2")


@pytest.mark.parametrize(("name", "text", "message"), [
    # both a host list and a cohort: which one is meant?
    ("m.yaml", "windows:\n  - {hosts: [a], cohort: rack=r1, start: 2026-11-03T02:00:00Z, end: 2026-11-03T03:00:00Z}",
     "m.yaml: windows[0]: give hosts or cohort"),
    # the end before the start
    ("m.yaml", "windows:\n  - {hosts: [a], start: 2026-11-03T04:00:00Z, end: 2026-11-03T03:00:00Z}",
     "m.yaml: windows[0].end: 2026-11-03T03:00:00+00:00 is not after start"),
    # a local time without its offset is ambiguous across datacenters
    ("m.yaml", "windows:\n  - {hosts: [a], start: '2026-11-03T02:00:00', end: 2026-11-03T03:00:00Z}",
     "m.yaml: windows[0].start: expected datetime with a timezone component"),
    # a typo in a key
    ("m.yaml", "windows:\n  - {host: [a], start: 2026-11-03T02:00:00Z, end: 2026-11-03T03:00:00Z}",
     "m.yaml: windows[0].host: unknown key"),
    ("m.yaml", "windows:\n  - {cohort: r07, start: 2026-11-03T02:00:00Z, end: 2026-11-03T03:00:00Z}",
     "m.yaml: windows[0].cohort: 'r07' is not attribute=value"),
    ("m.csv", "host,start,end\n", "m.csv: line 1: header must be target,start,end,reason"),
    ("m.csv", "target,start,end\ngpu-1,2026-11-03T02:00:00Z,2026-11-03T03:00:00Z\ngpu-2,yesterday,2026-11-03T03:00:00Z\n",
     "m.csv: line 3: start: invalid RFC3339 encoded datetime"),
    ("m.csv", "target,start,end\ngpu-1,2026-11-03T04:00:00Z,2026-11-03T03:00:00Z\n", "m.csv: line 2: end: "),
])
def test_bad_files_are_one_line_naming_file_and_field(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigFileError) as err:
        load_windows(path)
    assert str(err.value).startswith(str(tmp_path / message)), str(err.value)
    assert "\n" not in str(err.value)


def test_replay_cli_refuses_a_bad_file_before_reading_events(tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text("windows:\n  - {hosts: [a], start: 2026-11-03T04:00:00Z}\n")
    run = subprocess.run([FLEETEPI, "replay", "-i", "/nonexistent.jsonl", "--maintenance", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert f"{bad}: windows[0].end: required key missing" in run.stderr


# ---------------------------------------------------------------------- silences
def silence(sid: str, *matchers: tuple[str, str, bool], state: str = "active", equal: bool = True) -> dict:
    return {"id": sid, "status": {"state": state}, "createdBy": "ops", "comment": "reboot",
            "startsAt": "2026-11-03T02:00:00.000Z", "endsAt": "2026-11-03T06:00:00.123Z",
            "updatedAt": "2026-11-03T01:59:00.000Z",
            "matchers": [{"name": n, "value": v, "isRegex": r, "isEqual": equal} for n, v, r in matchers]}


def test_silences_naming_a_place_are_windows_and_the_others_are_not() -> None:
    body = json.dumps([
        silence("s1", ("host", "gpu-017", False)),
        silence("s2", ("host", "gpu-017|gpu-018", True)),
        silence("s3", ("rack", "r07", False)),  # an inventory attribute
        silence("s4", ("escalation", "rack=r08", False)),
        silence("s5", ("attribute", "datacenter", False), ("value", "dc2", False), state="pending"),
        # not planned work:
        silence("n1", ("alertname", "FleetepiHostSick", False), ("host", "gpu-017", False)),  # mutes one alert
        silence("n2", ("host", "gpu-.*", True)),  # a pattern, not a list of hosts
        silence("n3", ("host", "gpu-017", False), equal=False),
        silence("n4", ("rack", "r07", False), ("datacenter", "dc1", False)),  # two cohorts
        silence("n5", ("host", "gpu-017", False), state="expired"),
    ]).encode()
    windows, skipped = silences_to_windows(body)
    start, end = ms(datetime(2026, 11, 3, 2, tzinfo=UTC)), ms(datetime(2026, 11, 3, 6, tzinfo=UTC)) + 123
    assert [(w.hosts, w.attribute, w.value) for w in windows] == [
        (("gpu-017",), None, None), (("gpu-017", "gpu-018"), None, None), ((), "rack", "r07"),
        ((), "rack", "r08"), ((), "datacenter", "dc2")]
    assert all((w.start_ms, w.end_ms) == (start, end) for w in windows)
    assert windows[0].reason == "silence s1 by ops: reboot"
    assert sorted(skipped) == ["n1", "n2", "n3", "n4"]  # expired ones are not worth a line
    assert "alert label alertname" in skipped["n1"]


def test_sources_keep_their_last_windows_when_alertmanager_is_away(tmp_path: Path) -> None:
    from fleetepi.maintenance import MaintenanceSourceError

    answers: list[list[Window] | Exception] = [[Window(0, 10, hosts=("a",))], MaintenanceSourceError("down")]

    def fetch(url: str) -> list[Window]:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    path = tmp_path / "m.yaml"
    path.write_text("windows:\n  - {hosts: [b], start: 2026-11-03T02:00:00Z, end: 2026-11-03T03:00:00Z}\n")
    src = MaintenanceSources(path, "http://am:9093", fetch=fetch)
    assert [w.hosts for w in src.load()] == [("b",), ("a",)]
    path.write_text("windows: [oops")  # a bad edit while running
    assert [w.hosts for w in src.refresh()] == [("b",), ("a",)]  # both kept
    assert src.silence_errors == 1


# ---------------------------------------------------------------------- alerts held back
def _fleet(announce: bool) -> list:
    """60 hosts, two days of background crashes, then h33 crashes 40 times in a minute with the shapes of bad
    silicon; with ``announce`` an operator takes it out of service (``maintenance=rma``) right after."""
    rng = random.Random(3)
    hosts = [Host(ts=T0, host=f"h{i:02d}", attributes={"rack": f"r{i // 10}", "gpu_model": "H100"})
             for i in range(60)]
    events: list = list(hosts)
    end = T0 + timedelta(days=2, hours=6)
    t = T0
    while t < end:
        t += timedelta(seconds=rng.expovariate(6 / 3600))
        events.append(Crash(ts=t, host=f"h{rng.randrange(60):02d}", signature=f"sig{rng.randrange(10)}",
                            job=f"j{rng.randrange(300)}"))
    for h in range(0, 54 * 3600, 3600):  # keeps event time moving
        events.append(Telemetry(ts=T0 + timedelta(seconds=h), host="h00", kind="thermal", value=50.0))
    at = T0 + timedelta(days=2, minutes=5, seconds=30)  # folded whole at the 00:10 boundary
    for k in range(40):
        events.append(Crash(ts=at + timedelta(seconds=1.5 * k), host="h33", signal="SIGSEGV",
                            signature=f"SIGSEGV | fn_{k} | libfoo.so", fault_address=f"0x{(1 << 40) + (1 << k):x}",
                            shape_flags=["misaligned_sp", "bit_flip_address"], bitflip_score=0.9))
    if announce:
        events.append(Host(ts=at + timedelta(seconds=61), host="h33",
                           attributes={**hosts[33].attributes, "maintenance": "rma"}))
    return sorted(events, key=lambda e: e.ts)


@pytest.mark.parametrize("announce", [False, True], ids=["in service", "taken out right after"])
def test_an_alert_decided_about_a_host_in_maintenance_is_suppressed(announce: bool) -> None:
    """The evidence came before the window, the decision after it opened: no page for planned work, counted."""
    sink = ListAlertSink()
    pipe = Pipeline(sink=sink)
    for ev in _fleet(announce):
        pipe.feed_event(ev)
    pipe.finish()
    mine = [(a.state, a.finding) for a in sink.alerts if a.host == "h33"]
    if announce:
        assert mine == []  # neither the page nor its resolution
        assert pipe.summary.suppressed == {"host_spike": 1}
    else:
        assert mine[0] == ("firing", "suspected_bad_silicon")
        assert not pipe.summary.suppressed


def test_replay_summary_has_the_maintenance_line(tmp_path: Path) -> None:
    events = tmp_path / "ev.jsonl"
    events.write_bytes(b"".join(encode(e) + b"\n" for e in _fleet(announce=True)))
    mfile = tmp_path / "m.yaml"
    mfile.write_text("windows:\n  - {cohort: rack=r1, start: 2026-11-01T00:00:00Z, end: 2026-11-04T00:00:00Z}\n")
    run = subprocess.run([FLEETEPI, "replay", "-i", str(events), "-o", str(tmp_path / "alerts.jsonl"),
                          "--maintenance", str(mfile)], capture_output=True, text=True, timeout=120,
                         env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stderr.splitlines() if "in maintenance" in x)
    # rack r1's crashes (hosts h10..h19) and h33's after its announcement are out; one alert held back
    assert "1 alert(s) suppressed" in line and "1 window(s) from file/silences" in line
    count = int(line.split("│")[2].strip())
    assert count > 50
