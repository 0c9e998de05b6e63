"""The stream archiver on a real broker: every valid record archived once, attributes joined, duplicates compacted.

Runs ``StreamArchiver`` (what ``fleetepi archive --broker`` runs) in this
process against the session's Kafka broker, on topics of its own prefix.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from fleetepi.archive.consumer import StreamArchiver
from fleetepi.archive.maintenance import compact
from fleetepi.archive.reader import Archive
from fleetepi.stream.publish import publish_file
from fleetepi.stream.topics import TopicNames, ensure_topics, topic_specs

from .conftest import FLEETEPI

pytestmark = pytest.mark.integration


@pytest.fixture
def stream_events(tmp_path: Path) -> Path:
    from fleetepi.simulate import SimConfig, simulate, write_jsonl

    path = tmp_path / "events.jsonl"
    write_jsonl(simulate(SimConfig(hosts=100, days=1.0, seed=4)), path)
    return path


def _archive_until(bootstrap: str, root: Path, names: TopicNames, group: str, expected: int,
                   timeout_s: float = 90.0) -> StreamArchiver:
    arch = StreamArchiver(bootstrap, root, topics=(names.hosts, names.crashes, names.telemetry, names.alerts),
                          group=group, flush_every_s=0.5, compact_every_s=0, fsync=False)

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(arch.run(stop))
        deadline = time.monotonic() + timeout_s
        while arch.stats.total + sum(arch.stats.invalid.values()) < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            if task.done():
                break
        stop.set()
        await task

    asyncio.run(go())
    return arch


def test_archiver_keeps_every_record_once_with_attributes(kafka_broker: str, stream_events: Path,
                                                          tmp_path: Path) -> None:
    names = TopicNames(f"a{uuid.uuid4().hex[:8]}.")
    ensure_topics(kafka_broker, topic_specs(names, 4))
    sent = publish_file(stream_events, kafka_broker, names)
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=kafka_broker)
    prod.send(names.crashes, key=b"h", value=b'{"schema": "fleetepi.crash/v1", "ts": "not a time"}')
    prod.flush()
    prod.close()
    root = tmp_path / "arch"
    arch = _archive_until(kafka_broker, root, names, "g1", sent.total + 1)
    assert arch.stats.total == sent.total
    assert sum(arch.stats.invalid.values()) == 1
    assert arch.stats.hosts_preloaded == sent.sent[names.hosts]
    with Archive(root) as arc:
        n = {t: arc.query(f"SELECT count(*) FROM {t}")[0][0] for t in ("host", "crash", "telemetry")}
        unjoined = arc.query('SELECT count(*) FROM crash WHERE "attr.rack" IS NULL')[0][0]
        keyed = arc.query("SELECT count(*) FROM telemetry WHERE src_offset IS NOT NULL")[0][0]
    assert n == {"host": sent.sent[names.hosts], "crash": sent.sent[names.crashes],
                 "telemetry": sent.sent[names.telemetry]}
    assert unjoined == 0 and keyed == n["telemetry"]

    # A restart of the same group reads nothing again (offsets were committed after the flush) ...
    again = _archive_until(kafka_broker, root, names, "g1", 1, timeout_s=3)
    assert again.stats.total == 0
    # ... a second group re-delivers everything into the same archive; compaction keeps one copy of each.
    _archive_until(kafka_broker, root, names, "g2", sent.total + 1)
    with Archive(root) as arc:
        assert arc.query("SELECT count(*) FROM telemetry")[0][0] == 2 * n["telemetry"]
    rep = compact(root, fsync=False)
    assert rep.duplicates_dropped >= n["crash"] + n["telemetry"]
    with Archive(root) as arc:
        assert arc.query("SELECT count(*) FROM crash")[0][0] == n["crash"]
        assert arc.query("SELECT count(*) FROM telemetry")[0][0] == n["telemetry"]


def test_archive_command_runs_until_sigterm(kafka_broker: str, stream_events: Path, tmp_path: Path) -> None:
    names = TopicNames(f"c{uuid.uuid4().hex[:8]}.")
    ensure_topics(kafka_broker, topic_specs(names, 2))
    sent = publish_file(stream_events, kafka_broker, names)
    root = tmp_path / "arch"
    proc = subprocess.Popen([FLEETEPI, "archive", "--archive", str(root), "--broker", f"kafka://{kafka_broker}",
                             "--topic-prefix", names.prefix, "--flush-every", "0.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    n = 0
    while time.monotonic() < deadline and n < sent.sent[names.crashes]:
        time.sleep(0.5)
        if (root / "schema=crash").exists():
            with Archive(root) as arc:
                n = arc.query("SELECT count(*) FROM crash")[0][0]
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert n == sent.sent[names.crashes]
    assert f"archived {sent.total:,} records" in err
