"""Fixtures of the archive's tests: a simulated fleet replayed into an archive, event-line builders.

``fleet_archive`` is built once per session (a 300-host, 4-day fleet with
every outbreak template: ~90,000 events, a few seconds) and must be treated
as read-only; a test that damages or compacts an archive copies it first
(``archive_copy``).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from fleetepi.contract import format_ts

FLEETEPI = str(Path(sys.executable).with_name("fleetepi"))
SIM = {"hosts": 400, "days": 4.0, "seed": 11}
T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def ts(minute: float) -> str:
    return format_ts(T0 + timedelta(minutes=minute))


def host_line(name: str, minute: float = 0, **attributes: str) -> bytes:
    return orjson.dumps({"schema": "fleetepi.host/v1", "ts": ts(minute), "host": name,
                         "attributes": attributes or {"rack": "r1", "gpu_model": "H100"}})


def crash_line(host: str, minute: float, signature: str = "libc.so.6!abort | trainer!main", **extra: Any) -> bytes:
    return orjson.dumps({"schema": "fleetepi.crash/v1", "ts": ts(minute), "host": host, "signature": signature,
                         **extra})


def telemetry_line(host: str, minute: float, kind: str = "xid", code: int | None = 79) -> bytes:
    d: dict[str, Any] = {"schema": "fleetepi.telemetry/v1", "ts": ts(minute), "host": host, "kind": kind}
    if code is not None:
        d["code"] = code
    return orjson.dumps(d)


@dataclass
class FleetArchive:
    path: Path
    events: Path
    truth: list[Any]
    counts: dict[str, int]
    alerts: int


@pytest.fixture(scope="session")
def fleet_archive(tmp_path_factory: pytest.TempPathFactory) -> FleetArchive:
    """A simulated fleet (every outbreak template) replayed with ``--archive``: read-only."""
    from fleetepi.archive import ArchiveWriter
    from fleetepi.jsonl import open_input
    from fleetepi.pipeline import Pipeline
    from fleetepi.simulate import SimConfig, simulate, write_jsonl

    base = tmp_path_factory.mktemp("fleet-archive")
    sim = simulate(SimConfig(**SIM))
    events = base / "events.jsonl"
    write_jsonl(sim, events)
    path = base / "archive"
    with ArchiveWriter(path, fsync=False) as writer, open_input(events) as source:
        pipe = Pipeline(archive=writer)
        pipe.run(source)
        pipe.finish()
    return FleetArchive(path, events, sim.truth, dict(pipe.summary.events), sum(pipe.summary.fired.values()))


@pytest.fixture
def archive_copy(fleet_archive: FleetArchive, tmp_path: Path) -> Path:
    dest = tmp_path / "archive"
    shutil.copytree(fleet_archive.path, dest)
    return dest
