"""Feed a recorded stream (JSON lines, plain or gzip) into the contract's topics.

Lines are routed by their ``schema`` tag and keyed by ``host``, exactly as
a node agent publishes them, and sent as the original bytes (no
re-encoding: what was recorded is what the workers see). Host
announcements go first, in a pass of their own, so that the inventory is
complete before the first crash is judged (as in ``fleetepi replay``,
where a recording starts with its hosts).

Only the tag and the host are decoded (a two-field msgspec struct, ~0.3
µs a line); a line whose head does not decode is counted and skipped here,
because the publisher is for recordings. To test the workers' dead-letter
path, send bad bytes to the topics directly.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from fleetepi.contract import ALERT_SCHEMA, CRASH_SCHEMA, HOST_SCHEMA, TELEMETRY_SCHEMA
from fleetepi.jsonl import open_input
from fleetepi.stream.exceptions import StreamError
from fleetepi.stream.topics import TopicNames


class _Head(msgspec.Struct):
    schema: str
    host: str | None = None


_head = msgspec.json.Decoder(_Head)


@dataclass
class PublishStats:
    """What a publish did: messages per topic, lines skipped, seconds."""

    sent: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    @property
    def rate(self) -> float:
        return self.total / self.elapsed_s if self.elapsed_s > 0 else 0.0


def routed_lines(path: str | Path, names: TopicNames, hosts: bool, stats: PublishStats
                 ) -> Iterator[tuple[str, bytes | None, bytes]]:
    """``(topic, key, value)`` of the host lines (``hosts=True``) or of the other lines."""
    topic_of = {CRASH_SCHEMA: names.crashes, TELEMETRY_SCHEMA: names.telemetry}
    with open_input(path) as src:
        for line in src:
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                head = _head.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError):
                if not hosts:
                    stats.skipped["undecodable"] += 1
                continue
            if head.schema == HOST_SCHEMA:
                if hosts:
                    yield names.hosts, None if head.host is None else head.host.encode(), line
                continue
            if hosts:
                continue
            topic = topic_of.get(head.schema)
            if topic is None:
                stats.skipped["alert" if head.schema == ALERT_SCHEMA else "unknown_schema"] += 1
                continue
            yield topic, None if head.host is None else head.host.encode(), line


class Publisher:
    """Batches records per partition with aiokafka's ``BatchBuilder`` and sends whole batches.

    Why not ``producer.send`` per record: that costs a future, a lock and a
    pure-Python murmur2 per message (~6,000 messages/s with kafka-python on
    this machine, too slow to drive a benchmark at 20,000/s). Here the key ->
    partition map is cached (keys are hosts: few and repeating) and a batch is
    one future.

    :param bootstrap: ``host:port`` of the broker.
    :param linger_s: longest a record waits in a half-full batch (paced publishing).
    """

    def __init__(self, bootstrap: str, linger_s: float = 0.01) -> None:
        self.bootstrap = bootstrap
        self.linger_s = linger_s
        self._producer: Any = None
        self._parts: dict[str, list[int]] = {}
        self._key_part: dict[tuple[str, bytes | None], int] = {}
        self._open: dict[tuple[str, int], Any] = {}
        self._pending: list[Any] = []
        self._rr = 0

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks=1, max_request_size=16 << 20,
                                          max_batch_size=1 << 20, linger_ms=5, client_id="fleetepi-publish")
        try:
            await self._producer.start()
        except (KafkaError, OSError) as exc:
            await self._producer.stop()
            raise StreamError(f"cannot reach the broker at {self.bootstrap}: {exc}") from None

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()

    async def _partition(self, topic: str, key: bytes | None) -> int:
        cached = self._key_part.get((topic, key))
        if cached is not None:
            return cached
        from aiokafka.partitioner import murmur2

        parts = self._parts.get(topic)
        if parts is None:
            parts = self._parts[topic] = sorted(await self._producer.partitions_for(topic))
        if key is None:
            self._rr += 1
            return parts[self._rr % len(parts)]
        p = parts[(murmur2(key) & 0x7FFFFFFF) % len(parts)]
        if len(self._key_part) < 1_000_000:
            self._key_part[(topic, key)] = p
        return p

    async def add(self, topic: str, key: bytes | None, value: bytes, timestamp_ms: int | None = None) -> None:
        """Queue one record (sent when its batch fills or on :meth:`flush`)."""
        p = await self._partition(topic, key)
        tp = (topic, p)
        batch = self._open.get(tp)
        if batch is None:
            batch = self._open[tp] = self._producer.create_batch()
        if batch.append(timestamp=timestamp_ms, key=key, value=value) is None:
            del self._open[tp]
            if batch.record_count():
                self._pending.append(await self._producer.send_batch(batch, topic, partition=p))
            batch = self._open[tp] = self._producer.create_batch()
            if batch.append(timestamp=timestamp_ms, key=key, value=value) is None:  # larger than a batch
                del self._open[tp]
                self._pending.append(await self._producer.send(topic, value, key=key, partition=p,
                                                               timestamp_ms=timestamp_ms))

    async def send_open(self) -> None:
        """Send every half-full batch now."""
        opened, self._open = self._open, {}
        for (topic, p), batch in opened.items():
            if batch.record_count():
                self._pending.append(await self._producer.send_batch(batch, topic, partition=p))

    async def flush(self) -> None:
        """Send everything and wait until the broker acknowledged it."""
        await self.send_open()
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)


async def publish_async(path: str | Path, bootstrap: str, names: TopicNames | None = None,
                        rate: float | None = None, timestamps: bool = False,
                        on_sent: Callable[[int], None] | None = None) -> PublishStats:
    """Send every event of ``path``; hosts first. Returns once the broker acknowledged all.

    :param rate: events per second (None: as fast as possible), paced in 10 ms slices.
    :param timestamps: stamp each record with the wall time of its send (the latency benchmark).
    :param on_sent: called with the running count after each paced slice (progress, benchmarks).
    """
    names = names or TopicNames()
    stats = PublishStats()
    pub = Publisher(bootstrap)
    await pub.start()
    try:
        t0 = time.perf_counter()
        for topic, key, value in routed_lines(path, names, True, stats):
            await pub.add(topic, key, value)
            stats.sent[topic] += 1
        await pub.flush()
        n = 0
        start = time.perf_counter()
        for topic, key, value in routed_lines(path, names, False, stats):
            n += 1  # noqa: SIM113 - paces by records sent, read by the rate check below
            if rate and n % 16 == 0:
                ahead = n / rate - (time.perf_counter() - start)
                if ahead > 0.01:
                    await pub.send_open()
                    if on_sent is not None:
                        on_sent(n)
                    await asyncio.sleep(ahead)
            await pub.add(topic, key, value, int(time.time() * 1000) if timestamps else None)
            stats.sent[topic] += 1
        await pub.flush()
        stats.elapsed_s = time.perf_counter() - t0
    finally:
        await pub.stop()
    return stats


def publish_file(path: str | Path, bootstrap: str, names: TopicNames | None = None, rate: float | None = None,
                 timestamps: bool = False) -> PublishStats:
    """Synchronous :func:`publish_async` (the CLI, tests)."""
    return asyncio.run(publish_async(path, bootstrap, names, rate=rate, timestamps=timestamps))


__all__ = ["PublishStats", "Publisher", "publish_async", "publish_file", "routed_lines"]
