"""Kafka output: kafka-python producer behind the on-disk spool.

``publish`` only appends to the spool (fsync'd) and returns; ``flush``
sends the spool's head in order and moves the cursor past what the broker
acknowledged (``acks=all``). While the broker is away, sends fail, the
spool grows up to its cap, and flush retries with exponential backoff
(1 s .. 30 s) so the agent loop is never stuck on a dead broker for more
than ``max_block_ms`` per attempt. One in-flight request per connection
keeps the order of retried batches.

Keys are the host name, so one host's events stay in one partition, in
order. kafka-python's exceptions are translated to ``PublishError`` here
and nowhere else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry

from fleetepi.agents.exceptions import PublishError
from fleetepi.agents.metrics import AgentMetrics
from fleetepi.agents.publish.conform import conforming_bytes
from fleetepi.agents.publish.spool import Spool
from fleetepi.brokers import parse_brokers
from fleetepi.contract import TOPIC_FOR_SCHEMA, Event

log = logging.getLogger(__name__)

#: Producer settings that the user may set (TLS and SASL included).
SECURITY_OPTIONS = (
    "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname",
    "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "client_id",
)


class _Route(msgspec.Struct):
    schema: str
    host: str = ""


_route = msgspec.json.Decoder(_Route)


def default_compression() -> str:
    """lz4 when the lz4 module is there (fast, small), else gzip (stdlib)."""
    try:
        import lz4.frame  # noqa: F401
    except ImportError:
        return "gzip"
    return "lz4"



class KafkaPublisher:
    """Spool-first Kafka publisher.

    :param bootstrap: ``host:port`` list (or a ``kafka://`` URL).
    :param spool_dir: directory of the on-disk spool.
    :param spool_max_bytes: spool cap; beyond it new events are dropped, loudly.
    :param producer: a producer object or a zero-argument factory (default: kafka-python's KafkaProducer).
    :param topics: schema id -> topic (default: the contract's topics).
    :param compression: "lz4", "gzip", "zstd", "snappy" or None (default: lz4 if available).
    :param batch: records sent per round before waiting for acks.
    :param max_block_ms: longest one send may wait for metadata while the broker is away.
    :param registry: Prometheus registry for spool and delivery metrics.
    :param options: TLS/SASL settings, see :data:`SECURITY_OPTIONS`.
    """

    def __init__(self, bootstrap: str | Sequence[str], spool_dir: str | Path, spool_max_bytes: int = 256 << 20,
                 producer: Any = None, topics: Mapping[str, str] | None = None, compression: str | None = "auto",
                 batch: int = 500, max_block_ms: int = 2000, fsync: bool = True,
                 registry: CollectorRegistry | None = None, **options: Any) -> None:
        unknown = sorted(set(options) - set(SECURITY_OPTIONS))
        if unknown:
            raise ValueError(f"unknown Kafka option(s): {', '.join(unknown)}")
        self.bootstrap = parse_brokers(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self.topics = dict(topics or TOPIC_FOR_SCHEMA)
        self.compression = default_compression() if compression == "auto" else compression
        self.batch = batch
        self.max_block_ms = max_block_ms
        self.options = options
        self.metrics = AgentMetrics.of(registry)
        self.spool = Spool(spool_dir, max_bytes=spool_max_bytes, fsync=fsync, registry=registry)
        for topic in self.topics.values():  # series exist at 0 before the first delivery
            self.metrics.published.labels(topic=topic)
        self._factory: Callable[[], Any] | None
        if producer is None:
            self._factory, self._producer = self._kafka_producer, None
        elif callable(producer) and not hasattr(producer, "send"):
            self._factory, self._producer = producer, None
        else:
            self._factory, self._producer = None, producer
        self._backoff_s = 0.0
        self._next_try = 0.0
        self.delivered = 0
        if self.spool.pending:
            log.info("spool: %d events (%d bytes) from before the restart will be resent", self.spool.pending, self.spool.pending_bytes)

    def _kafka_producer(self) -> Any:
        from kafka import KafkaProducer

        # The producer probes the broker in its constructor; bound that wait
        # too, under whichever name this kafka-python version uses.
        probe = {k: self.max_block_ms for k in ("bootstrap_timeout_ms", "api_version_auto_timeout_ms")
                 if k in KafkaProducer.DEFAULT_CONFIG}
        return KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", compression_type=self.compression,
            max_in_flight_requests_per_connection=1, max_block_ms=self.max_block_ms,
            request_timeout_ms=max(5000, self.max_block_ms), linger_ms=20, retries=3,
            **probe, **self.options,
        )

    def publish(self, event: Event) -> None:
        """Durable on return (spooled); sent by the next :meth:`flush`.

        :raises SpoolFull: the spool cap is hit (the event is dropped and counted).
        """
        self.spool.append(conforming_bytes(event))

    def _fail(self, why: str) -> None:
        self._backoff_s = min(30.0, max(1.0, self._backoff_s * 2))
        self._next_try = time.monotonic() + self._backoff_s
        log.warning("kafka %s: %s; %d events spooled, retry in %.0f s", ",".join(self.bootstrap), why,
                    self.spool.pending, self._backoff_s)

    def _ensure_producer(self) -> Any:
        if self._producer is None and self._factory is not None:
            try:
                self._producer = self._factory()
            except Exception as exc:  # kafka-python raises several types here  # noqa: BLE001
                self._fail(f"cannot connect ({type(exc).__name__}: {exc})")
                return None
        return self._producer

    def flush(self, timeout_s: float | None = None) -> None:
        """Send spooled events in order until the spool is empty, the broker fails or ``timeout_s`` passes."""
        if not self.spool.pending or time.monotonic() < self._next_try:
            return
        producer = self._ensure_producer()
        if producer is None:
            return
        from kafka.errors import KafkaError

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.spool.pending and (deadline is None or time.monotonic() < deadline):
            records = self.spool.read_batch(self.batch)
            if not records:
                break
            sent: list[tuple[Any, str, Any]] = []
            error: str | None = None
            for data, pos in records:
                try:
                    route = _route.decode(data)
                    topic = self.topics[route.schema]
                except (msgspec.DecodeError, KeyError):
                    log.error("spool: record is not a contract event; skipping it: %r", data[:200])
                    sent.append((None, "", pos))
                    continue
                try:
                    fut = producer.send(topic, value=data, key=route.host.encode())
                except KafkaError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    break
                sent.append((fut, topic, pos))
            try:
                producer.flush(timeout=None if deadline is None else max(0.1, deadline - time.monotonic()))
            except KafkaError as exc:
                error = error or f"{type(exc).__name__}: {exc}"
            done, last = 0, None
            for fut, topic, pos in sent:
                if fut is not None:
                    ok = fut.is_done() if callable(fut.is_done) else fut.is_done
                    if not ok or fut.failed():
                        error = error or f"delivery failed: {fut.exception}"
                        break
                    self.metrics.published.labels(topic=topic).inc()
                    self.delivered += 1
                done += 1
                last = pos
            if last is not None:
                self.spool.commit(last, done)
            if error is not None:
                self._fail(error)
                self._drop_producer()
                return
            self._backoff_s = 0.0

    def _drop_producer(self) -> None:
        """Discard a producer after a failed round so that none of its queued
        records can arrive later, behind the resent ones (we own it only when
        we made it from the factory)."""
        if self._factory is None or self._producer is None:
            return
        producer, self._producer = self._producer, None
        try:
            producer.close(timeout=0)
        except Exception:  # noqa: BLE001
            # kafka-python 3.0 flushes first in close() and raises when records are still queued (the broker is
            # away), leaving its sender thread alive, retrying, and able to deliver them later, behind the resent
            # ones; its __del__ then prints that traceback. Stop the sender without sending, mark it closed.
            sender = getattr(producer, "_sender", None)
            if sender is not None and hasattr(sender, "force_close"):
                sender.force_close()
            if hasattr(producer, "_closed"):
                producer._closed = True

    def close(self) -> None:
        try:
            self.flush(timeout_s=5.0)
        except PublishError:
            pass
        if self._producer is not None:
            try:
                self._producer.close(timeout=5)
            except Exception:  # a producer that cannot close must not block shutdown  # noqa: BLE001
                pass
        self.spool.close()


__all__ = ["KafkaPublisher", "SECURITY_OPTIONS", "default_compression"]
