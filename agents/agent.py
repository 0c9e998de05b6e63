"""The agent loop: poll each source at its interval, publish, flush, repeat.

One thread, no asyncio: sources are non-blocking by contract, so a loop
that sleeps until the next source is due costs almost nothing when the
host is quiet (the idle target is < 1 % of a core and < 60 MB RSS, see
``bench/agent_idle.py``). A source that cannot run here is switched off
once, with one log line and ``fleetepi_agent_source_up{source}=0``; a
source that raises in ``poll`` is logged and counted, and polled again
next time; the loop itself never dies on input.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from fleetepi.agents.config import AgentConfig
from fleetepi.agents.exceptions import AgentConfigError, PublishError, SourceUnavailable, SpoolFull
from fleetepi.agents.metrics import AgentMetrics
from fleetepi.agents.publish.base import Publisher
from fleetepi.agents.sources import registry as source_registry
from fleetepi.agents.sources.base import Source
from fleetepi.agents.sources.registry import SourceContext
from fleetepi.contract import Event

log = logging.getLogger(__name__)

#: Longest sleep of the loop, so a stop request or a new due time is seen quickly.
MAX_SLEEP_S = 1.0


@dataclass
class SourceSlot:
    name: str
    kind: str
    interval_ms: int
    source: Source | None
    why_off: str | None = None
    next_due_ms: int = 0
    errors: int = 0
    events: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Agent:
    """Runs the configured sources into one publisher.

    :param config: the validated config.
    :param publisher: where events go.
    :param registry: Prometheus registry of the agent's metrics.
    :param sources: prebuilt sources by name (tests); default: built from ``config.sources``.
    :param clock_ms: wall clock in epoch milliseconds (event time of what sources find).
    :param nvml: NVML module for the nvml and inventory sources (default ``pynvml``; tests pass a FakeNvml).
    """

    def __init__(self, config: AgentConfig, publisher: Publisher, registry: CollectorRegistry | None = None,
                 sources: Mapping[str, Source] | None = None, clock_ms: Callable[[], int] | None = None,
                 nvml: object = None) -> None:
        self.config = config
        self.publisher = publisher
        self.metrics = AgentMetrics.of(registry)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.slots: list[SourceSlot] = []
        self.published = 0
        self._stop = threading.Event()
        self._next_flush_ms = 0
        if sources is not None:
            for name, src in sources.items():
                self.slots.append(SourceSlot(name, getattr(src, "kind", name), 1000, src))
                self.metrics.source_up.labels(source=name).set(1)
        else:
            self._build(registry, nvml)

    def _build(self, registry: CollectorRegistry | None, nvml: object) -> None:
        """Instantiate every configured source; config errors propagate (start-up), unavailability does not."""
        ctx = SourceContext(host=self.config.host, registry=registry, labels=dict(self.config.labels),
                            dedup_interval_s=self.config.dedup_interval_s, nvml=nvml)
        for i, sc in enumerate(self.config.sources):
            slot = SourceSlot(sc.name, sc.kind, int(sc.interval_s * 1000), None)
            try:
                slot.source = source_registry.create(sc.kind, sc.options, ctx)
            except SourceUnavailable as exc:
                self._off(slot, str(exc))
            except AgentConfigError as exc:  # the field path of the config, like every config error
                raise AgentConfigError(f"sources[{i}] ({sc.name}): {exc}") from None
            else:
                self.metrics.source_up.labels(source=sc.name).set(1)
                for outcome in getattr(slot.source, "known_outcomes", list)():
                    self.metrics.log_lines.labels(outcome=outcome)
                log.info("source %s (%s) on, every %.0f s", sc.name, sc.kind, sc.interval_s)
            self.slots.append(slot)

    def _off(self, slot: SourceSlot, why: str) -> None:
        if slot.source is not None:
            try:
                slot.source.close()
            except Exception:  # noqa: BLE001
                pass
        slot.source = None
        slot.why_off = why
        self.metrics.source_up.labels(source=slot.name).set(0)
        log.warning("source %s (%s) is off: %s", slot.name, slot.kind, why)

    # ---- one step ----
    def _publish(self, events: Iterable[Event]) -> int:
        n = 0
        for ev in events:
            try:
                self.publisher.publish(ev)
            except PublishError as exc:  # SpoolFull is already loud; others are logged here
                if not isinstance(exc, SpoolFull):
                    log.error("publish failed: %s", exc)
                continue
            self.metrics.events.labels(kind=getattr(ev, "kind", None) or type(ev).__name__.lower()).inc()
            n += 1
        self.published += n
        return n

    def poll_source(self, slot: SourceSlot, now_ms: int) -> int:
        if slot.source is None:
            return 0
        try:
            events = list(slot.source.poll(now_ms))
        except SourceUnavailable as exc:
            self._off(slot, str(exc))
            return 0
        except Exception as exc:  # a bug or an odd host must not stop the agent
            slot.errors += 1
            self.metrics.source_errors.labels(source=slot.name).inc()
            if slot.errors == 1 or slot.errors % 100 == 0:
                log.exception("source %s failed (%d times so far): %s", slot.name, slot.errors, exc)
            return 0
        outcomes = getattr(slot.source, "outcomes", None)
        if outcomes:
            for outcome, n in outcomes.items():
                self.metrics.log_lines.labels(outcome=outcome).inc(n)
            outcomes.clear()
        slot.events += len(events)
        return self._publish(events)

    def tick(self, now_ms: int) -> int:
        """Poll every due source, flush the publisher if due; returns events published."""
        n = 0
        for slot in self.slots:
            if slot.source is not None and now_ms >= slot.next_due_ms:
                slot.next_due_ms = now_ms + slot.interval_ms
                n += self.poll_source(slot, now_ms)
        if now_ms >= self._next_flush_ms:
            self._next_flush_ms = now_ms + int(self.config.flush_interval_s * 1000)
            self._flush(timeout_s=min(5.0, self.config.flush_interval_s * 5))
        return n

    def _flush(self, timeout_s: float) -> None:
        try:
            self.publisher.flush(timeout_s=timeout_s)
        except PublishError as exc:
            log.warning("flush: %s", exc)

    def drain(self, now_ms: int) -> int:
        """Publish counted repeats that sources still hold (shutdown, ``--once``)."""
        n = 0
        for slot in self.slots:
            drain = getattr(slot.source, "drain", None)
            if drain is not None:
                n += self._publish(drain(now_ms))
        return n

    # ---- loops ----
    def run_once(self, flush_timeout_s: float = 10.0) -> int:
        """Poll every source once, drain, flush: what ``fleetepi agent --once`` does."""
        now = self.clock_ms()
        n = sum(self.poll_source(slot, now) for slot in self.slots)
        n += self.drain(now)
        self._flush(flush_timeout_s)
        return n

    def run(self) -> None:
        """Until :meth:`stop`: poll what is due, then sleep until the next due time."""
        while not self._stop.is_set():
            now = self.clock_ms()
            self.tick(now)
            due = [s.next_due_ms for s in self.slots if s.source is not None] + [self._next_flush_ms]
            sleep_s = max(0.0, min(MAX_SLEEP_S, (min(due) - self.clock_ms()) / 1000.0))
            self._stop.wait(sleep_s)
        self.drain(self.clock_ms())
        self._flush(5.0)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        for slot in self.slots:
            if slot.source is not None:
                try:
                    slot.source.close()
                except Exception:  # noqa: BLE001
                    pass
        self.publisher.close()


__all__ = ["Agent", "SourceSlot"]
