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

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from fleetepi.contract import ALERT_SCHEMA, CRASH_SCHEMA, HOST_SCHEMA, TELEMETRY_SCHEMA
from fleetepi.jsonl import open_input
from stream.exceptions import StreamError
from stream.topics import TopicNames


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


def make_producer(bootstrap: str, **overrides: Any) -> Any:
    """A kafka-python producer tuned for bulk: large batches, short linger, acks from the leader."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    opts: dict[str, Any] = {"bootstrap_servers": bootstrap, "linger_ms": 5, "batch_size": 512 << 10,
                            "max_request_size": 16 << 20, "acks": 1,
                            "client_id": "fleetepi-publish"}
    opts.update(overrides)
    try:
        return KafkaProducer(**opts)
    except (KafkaError, OSError, ValueError) as exc:
        raise StreamError(f"cannot reach the broker at {bootstrap}: {exc}") from None


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


def publish_file(path: str | Path, producer: Any, names: TopicNames | None = None, rate: float | None = None,
                 timestamps: bool = False) -> PublishStats:
    """Send every event of ``path``; hosts first. Returns the counts once the broker acknowledged all.

    :param producer: a kafka-python ``KafkaProducer`` (or anything with ``send``/``flush``).
    :param rate: events per second (None: as fast as possible); paced in 10 ms slices.
    :param timestamps: stamp each record with the wall time of its send (the latency benchmark).
    """
    names = names or TopicNames()
    stats = PublishStats()
    t0 = time.perf_counter()
    send = producer.send
    for topic, key, value in routed_lines(path, names, True, stats):
        send(topic, key=key, value=value)
        stats.sent[topic] += 1
    producer.flush()
    n = 0
    start = time.perf_counter()
    for topic, key, value in routed_lines(path, names, False, stats):
        if rate:
            n += 1
            ahead = n / rate - (time.perf_counter() - start)
            if ahead > 0.01:
                time.sleep(ahead)
        if timestamps:
            send(topic, key=key, value=value, timestamp_ms=int(time.time() * 1000))
        else:
            send(topic, key=key, value=value)
        stats.sent[topic] += 1
    producer.flush()
    stats.elapsed_s = time.perf_counter() - t0
    return stats


__all__ = ["PublishStats", "make_producer", "publish_file", "routed_lines"]
