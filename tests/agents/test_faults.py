"""The agent's publisher under faults (issue 10): a full spool disk, skewed clocks; nothing lost but what is counted.

Real broker (the session's ``kafka_broker``), real file system: the spool
sits on a 512 KiB tmpfs that fills up while the broker is away.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta

import msgspec
import pytest

from fleetepi.agents.exceptions import SpoolFull
from fleetepi.agents.publish.kafka import KafkaPublisher
from fleetepi.contract import HOST_SCHEMA, TELEMETRY_SCHEMA, Host, Telemetry

from .test_kafka_integration import consume, create_topics, dead_address, flush_until_empty, make_events, split, topics

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path):  # type: ignore[no-untyped-def]
    """A 512 KiB tmpfs (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def test_a_full_spool_disk_drops_loudly_and_delivers_every_other_event_in_order(kafka_broker, small_disk):
    t = topics()
    create_topics(kafka_broker, list(t.values()))
    away = KafkaPublisher([dead_address()], small_disk / "spool", topics=t, max_block_ms=500, spool_max_bytes=1 << 30)
    kept, dropped = [], 0
    for ev in make_events(6000):  # ~900 KB of records for a 512 KiB disk
        try:
            away.publish(ev)
            kept.append(ev)
        except SpoolFull:
            dropped += 1
    assert dropped > 0 and len(kept) > 1000
    assert away.spool.dropped == dropped  # every loss counted (fleetepi_agent_spool_dropped_total)
    away.close()
    back = KafkaPublisher([kafka_broker], small_disk / "spool", topics=t, max_block_ms=2000)
    flush_until_empty(back)  # the restarted agent sends what the full disk held, in order
    more = make_events(50, start=10_000)
    for ev in more:  # delivered segments were deleted: there is room again
        back.publish(ev)
    flush_until_empty(back)
    back.close()
    for topic, want in split(kept + more, t).items():
        assert consume(kafka_broker, topic, len(want)) == want  # no torn record hid the ones after it


def test_events_of_hosts_with_skewed_clocks_are_delivered_unchanged(kafka_broker, tmp_path):
    """Agent side of a wrong clock: events hours or days off are spooled and sent like any other."""
    t = topics()
    create_topics(kafka_broker, list(t.values()))
    pub = KafkaPublisher([kafka_broker], tmp_path / "spool", topics=t, max_block_ms=2000)
    events = make_events(60)
    skewed = [msgspec.structs.replace(e, ts=e.ts + timedelta(hours=h))
              for e, h in zip(events, [0, 6, -6, 24 * 7, -24 * 7, 10_000] * 10)]
    for ev in skewed:
        pub.publish(ev)
    flush_until_empty(pub)
    pub.close()
    got = consume(kafka_broker, t[TELEMETRY_SCHEMA], sum(isinstance(e, Telemetry) for e in skewed))
    assert got == [e for e in skewed if isinstance(e, Telemetry)]
    assert consume(kafka_broker, t[HOST_SCHEMA], 6) == [e for e in skewed if isinstance(e, Host)]
