"""The stream archiver: the contract topics, read by a consumer group of their own, into the archive.

Separate from the workers (``fleetepi archive --broker``), so that archiving
never slows detection and a worker rebalance never touches the archive. It
reads ``fleetepi.hosts``, ``fleetepi.crashes``, ``fleetepi.telemetry`` and
``fleetepi.alerts`` with aiokafka (the project's asyncio client, whose record
batches are decoded in C), validates each record with the contract's
decoder (what fails is counted, not archived: the workers dead-letter it),
and hands the raw bytes to :class:`fleetepi.archive.ArchiveWriter`, whose
thread turns them into Parquet.

Attributes are joined in event time, so the archiver reads the whole
hosts topic into the writer's history before its first event; after that,
host records flow through the group like the rest.

Delivery: offsets are committed only after a flush has made everything
consumed so far visible in files, so a killed archiver re-reads at most
one flush interval; the rows it writes twice carry the same
``(src_partition, src_offset)`` and compaction keeps one of them. Every
``compact_every_s`` the days before yesterday are compacted and the
retention limits applied.

One archiver per archive folder (it needs every host announcement, which a
second group member would share with it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fleetepi.archive.maintenance import MaintenanceReport, compact, retain
from fleetepi.archive.writer import ArchiveWriter
from fleetepi.contract import Host, decode_alert, decode_event
from fleetepi.exceptions import InvalidMessage

log = logging.getLogger(__name__)



@dataclass
class ArchiverStats:
    records: Counter[str] = field(default_factory=Counter)  # archived, per topic
    invalid: Counter[str] = field(default_factory=Counter)  # per reason
    flushes: int = 0
    commits: int = 0
    hosts_preloaded: int = 0
    maintenance: list[MaintenanceReport] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return sum(self.records.values())


class StreamArchiver:
    """Consume the contract topics into the archive at ``root``.

    :param bootstrap: ``host:port`` of the broker.
    :param topics: the four topic names (hosts, crashes, telemetry, alerts); the contract's by default.
    :param group: consumer group id (its own: the workers' offsets are not touched).
    :param flush_every_s: how often staged rows become files and offsets are committed.
    :param compact_every_s: how often finished days are compacted and retention applied (0: never).
    """

    def __init__(self, bootstrap: str, root: str | Path, *, topics: tuple[str, str, str, str] | None = None,
                 group: str = "fleetepi-archive", flush_every_s: float = 60.0, compact_every_s: float = 3600.0,
                 max_age_days: float | None = None, max_bytes: int | None = None, batch_events: int = 65_536,
                 fsync: bool = True) -> None:
        from fleetepi.contract import TOPIC_ALERTS, TOPIC_CRASHES, TOPIC_HOSTS, TOPIC_TELEMETRY

        self.bootstrap = bootstrap
        self.root = Path(root)
        self.topics = topics or (TOPIC_HOSTS, TOPIC_CRASHES, TOPIC_TELEMETRY, TOPIC_ALERTS)
        self.group = group
        self.flush_every_s = flush_every_s
        self.compact_every_s = compact_every_s
        self.max_age_days = max_age_days
        self.max_bytes = max_bytes
        self.writer = ArchiveWriter(self.root, batch_events=batch_events, fsync=fsync)
        self.stats = ArchiverStats()
        self.consumer: Any = None

    async def preload_hosts(self) -> int:
        """Read every announcement on the hosts topic into the writer's history (not archived: the group does)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        topic = self.topics[0]
        reader = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                  auto_offset_reset="earliest", client_id="fleetepi-archive-hosts")
        await reader.start()
        n = 0
        try:
            parts = reader.partitions_for_topic(topic)
            if not parts:
                await reader._client.force_metadata_update()
                parts = reader.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            if not tps:
                return 0
            reader.assign(tps)
            await reader.seek_to_beginning(*tps)
            end = await reader.end_offsets(tps)
            history = self.writer.history
            while any([await reader.position(tp) < end[tp] for tp in tps]):
                batches = await reader.getmany(timeout_ms=500, max_records=20_000)
                for records in batches.values():
                    for rec in records:
                        try:
                            ev = decode_event(rec.value) if rec.value is not None else None
                        except InvalidMessage:
                            continue
                        if isinstance(ev, Host):
                            history.announce(ev.host, ev.ts_ms, ev.attributes)
                            n += 1
        finally:
            await reader.stop()
        self.stats.hosts_preloaded = n
        return n

    async def run(self, stop: asyncio.Event | None = None) -> ArchiverStats:
        """Consume until ``stop`` is set (or cancelled); flushes and commits on the way out."""
        from aiokafka import AIOKafkaConsumer

        stop = stop or asyncio.Event()
        await self.preload_hosts()
        self.consumer = consumer = AIOKafkaConsumer(
            *self.topics, bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
            auto_offset_reset="earliest", client_id="fleetepi-archive", max_partition_fetch_bytes=8 << 20,
            fetch_max_bytes=64 << 20)
        await consumer.start()
        topic_alerts = self.topics[3]
        add = self.writer.add_record
        records = self.stats.records
        invalid = self.stats.invalid
        last_flush = last_compact = time.monotonic()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200, max_records=20_000)
                for tp, recs in batches.items():
                    decode = decode_alert if tp.topic == topic_alerts else decode_event
                    kept = 0
                    for rec in recs:
                        raw = rec.value
                        if raw is None:
                            continue
                        try:
                            ev = decode(raw)
                        except InvalidMessage as exc:
                            invalid[exc.reason] += 1
                            continue
                        add(ev, raw, rec.partition, rec.offset)
                        kept += 1
                    records[tp.topic] += kept
                now = time.monotonic()
                if now - last_flush >= self.flush_every_s:
                    await self._flush_commit()
                    last_flush = time.monotonic()
                if self.compact_every_s and now - last_compact >= self.compact_every_s:
                    await asyncio.to_thread(self._maintain)
                    last_compact = time.monotonic()
        finally:
            try:
                await self._flush_commit()
            finally:
                await consumer.stop()
                await asyncio.to_thread(self.writer.close)
        return self.stats

    async def _flush_commit(self) -> None:
        await asyncio.to_thread(self.writer.flush)
        self.stats.flushes += 1
        await self.consumer.commit()
        self.stats.commits += 1

    def _maintain(self) -> None:
        """Compact every day but the last two (still being written), then apply retention."""
        today = datetime.now(UTC).date()
        recent = {(today - timedelta(days=i)).isoformat() for i in range(2)}
        rep = compact(self.root, skip_days=recent)
        self.stats.maintenance.append(rep)
        if self.max_age_days is not None or self.max_bytes is not None:
            self.stats.maintenance.append(retain(self.root, max_age_days=self.max_age_days, max_bytes=self.max_bytes,
                                                 today=today))

    async def lag(self) -> int:
        """Records on the topics not yet consumed by this archiver (end offsets - positions)."""
        c = self.consumer
        if c is None:
            return 0
        tps = list(c.assignment())
        if not tps:
            return 0
        end = await c.end_offsets(tps)
        return sum([max(end[tp] - await c.position(tp), 0) for tp in tps])


__all__ = ["ArchiverStats", "StreamArchiver"]
