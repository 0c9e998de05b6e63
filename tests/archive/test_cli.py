"""The archive's hooks in the commands people run: replay --archive, demo, fleetepi archive (maintenance)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleetepi.archive.reader import Archive

from .conftest import FLEETEPI, FleetArchive, crash_line, host_line


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([FLEETEPI, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_replay_archive_keeps_accepted_events_and_alerts(fleet_archive: FleetArchive, tmp_path: Path) -> None:
    proc = _run("replay", "-i", str(fleet_archive.events), "-o", str(tmp_path / "alerts.jsonl"), "--archive",
                str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr
    assert "archived" in proc.stderr and str(tmp_path / "a") in proc.stderr
    with Archive(tmp_path / "a") as arc:
        assert arc.query("SELECT count(*) FROM crash")[0][0] == fleet_archive.counts["crash"]
        fired = arc.query("SELECT count(*) FROM alert WHERE state = 'firing'")[0][0]
    lines = (tmp_path / "alerts.jsonl").read_text().splitlines()
    assert fired == sum('"resolved"' not in line for line in lines) > 0


def test_demo_archives_by_default_and_replaces_its_own_folder(tmp_path: Path) -> None:
    counts = []
    for _ in range(2):
        proc = _run("demo", "--hosts", "40", "--days", "0.3", "--speed", "max", "--no-metrics", "--exit", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "fleetepi report --archive fleetepi-demo-archive" in proc.stdout
        with Archive(tmp_path / "fleetepi-demo-archive") as arc:
            counts.append(arc.query("SELECT count(*) FROM telemetry")[0][0])
    assert counts[0] == counts[1] > 0  # replaced, not appended to
    proc = _run("demo", "--hosts", "40", "--days", "0.3", "--speed", "max", "--no-metrics", "--exit", "--no-archive",
                cwd=tmp_path / "..")
    assert proc.returncode == 0 and "fleetepi report" not in proc.stdout


def test_archive_command_compacts_and_applies_retention(tmp_path: Path) -> None:
    events = tmp_path / "ev.jsonl"
    events.write_bytes(b"\n".join([host_line("h1"), crash_line("h1", 1), crash_line("h1", 60 * 24 + 1),
                                   crash_line("h1", 60 * 48 + 1)]) + b"\n")
    for _ in range(2):  # two replays: two files per partition
        assert _run("replay", "-i", str(events), "-o", "/dev/null", "--archive", str(tmp_path / "a"), "-q").returncode == 0
    proc = _run("archive", "--archive", str(tmp_path / "a"), "--compact", "--max-age", "1d")
    assert proc.returncode == 0, proc.stderr
    assert "compacted" in proc.stderr and "retention: removed 1 days" in proc.stderr
    assert "crash" in proc.stdout  # the summary table
    with Archive(tmp_path / "a") as arc:
        assert arc.query("SELECT count(*) FROM crash")[0][0] == 4  # two replays x the two days kept
    assert len(list((tmp_path / "a").glob("schema=crash/*/*.parquet"))) == 2
    assert _run("archive", "--archive", str(tmp_path / "a"), "--max-size", "lots").returncode == 2
