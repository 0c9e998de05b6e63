"""The detectors run together: admission, inventory, dispatch, event-time clock.

``Engine`` is what both runners drive: the embedded pipeline
(``fleetepi replay``/``demo``) feeds it every event; each stream worker feeds
its own Engine the events of the partitions it owns, built with only the
detectors of that partition's key. Same code, same alerts.

Admission is part of the engine (not of a runner) so both modes reject the
same events for the same reasons: too late beyond the allowed lateness,
too far in the future, crashes of hosts never announced (counted, still used
by the detectors that do not need attributes).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetepi.contract import Alert, Crash, Event, Host, Telemetry
from fleetepi.detectors.base import Detector
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.lifecycle import Lifecycle
from fleetepi.detectors.registry import build_detectors

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_KIND_OF: dict[type, str] = {Host: "host", Crash: "crash", Telemetry: "telemetry"}

def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


#: Bumped when the layout of ``Engine.snapshot`` changes.
ENGINE_STATE_VERSION = "engine/2"


#: Most step boundaries evaluated to cross one gap in event time (30 days of 5-minute steps).
MAX_CATCH_UP_TICKS = 8640


class Engine:
    """Run a set of detectors over a stream of contract events.

    :param config: thresholds and windows (defaults documented in ``DetectorConfig``).
    :param detectors: registry names to run; all of them by default.
    :param clock_ms: wall clock in epoch ms (tests pin it); see the admission comment in ``process``.
    """

    def __init__(self, config: DetectorConfig | None = None, detectors: Sequence[str] | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.config = config or DetectorConfig()
        #: Wall clock, consulted only to tell a far-future timestamp from a gap in event time.
        self._clock_ms = clock_ms or _wall_clock_ms
        self.inventory = Inventory(max_history=self.config.inventory_history)
        self._dispatch: dict[type, list[Detector]] = {}
        self.detectors = build_detectors(self.config, detectors)
        self.watermark_ms: int | None = None
        self._next_tick_ms: int | None = None
        self._step_ms = int(self.config.step_s * 1000)
        self._lateness_ms = int(self.config.allowed_lateness_s * 1000)
        self._future_ms = int(self.config.max_future_s * 1000)
        #: events accepted per schema kind ("host", "crash", "telemetry").
        self.events: Counter[str] = Counter()
        #: events rejected or flagged, per reason (see fleetepi.contract.codec.REASONS).
        self.invalid: Counter[str] = Counter()
        self.alerts: Counter[str] = Counter()
        #: Hook ``on_invalid(reason, event, ts_ms)``, called after each admission drop or
        #: flag is counted, so a runner can log it, keep its line number or dead-letter it
        #: without re-checking admission itself (zero cost on accepted events).
        self.on_invalid: Callable[[str, Event, int], None] | None = None
        #: Hook ``feed_inventory(ts_ms)``: bring the inventory up to ``ts_ms`` before an event
        #: or a tick at that time is judged. The embedded run needs none (announcements are
        #: events in the same stream); a stream worker's partitions read them from another
        #: topic and fold them in event time through this (``fleetepi.stream.state``).
        self.feed_inventory: Callable[[int], None] | None = None

    @property
    def detectors(self) -> list[Detector]:
        return self._detectors

    @detectors.setter
    def detectors(self, value: list[Detector]) -> None:
        self._detectors = value
        self._dispatch.clear()

    def _detectors_for(self, event_type: type) -> list[Detector]:
        """Detectors that can want events of this type, in order.

        A detector may declare ``event_types`` (a ClassVar tuple, e.g.
        ``(Crash,)``) so that the engine does not call its ``route`` for
        events it never wants; without it, it sees every crash and telemetry.
        """
        dets = self._dispatch.get(event_type)
        if dets is None:
            dets = self._dispatch[event_type] = [
                d for d in self._detectors if event_type in getattr(d, "event_types", (Crash, Telemetry))]
        return dets

    # ------------------------------------------------------------------ processing
    def process(self, event: Event) -> list[Alert]:
        """Feed one decoded event; return the alerts it (and the time it moved) caused."""
        # Hot path (bench/replay.py): admission (too late, too far ahead) is inlined,
        # the event kind is one dict lookup, and the inventory is probed directly.
        ts_ms = (event.ts - _EPOCH) // _MS
        wm = self.watermark_ms
        out: list[Alert] = []
        if wm is None or ts_ms > wm:
            # "Far in the future" means beyond both the watermark and the wall clock by
            # more than max_future_s: the watermark alone would stall a replay after a
            # quiet day, the wall clock alone would refuse simulated future fleets. The
            # clock is read only past the watermark's limit, so replays of recordings not
            # themselves dated in the future stay deterministic.
            if (wm is None or ts_ms > wm + self._future_ms) and ts_ms > self._clock_ms() + self._future_ms:
                return self._reject("future_timestamp", event, ts_ms)
            self.watermark_ms = ts_ms
            if self._next_tick_ms is None:
                self._next_tick_ms = ts_ms - ts_ms % self._step_ms + self._step_ms
            elif ts_ms >= self._next_tick_ms:
                out.extend(self._tick(ts_ms))
        elif ts_ms < wm - self._lateness_ms:
            return self._reject("out_of_order", event, ts_ms)
        kind = _KIND_OF[type(event)]
        self.events[kind] += 1
        inv = self.inventory
        if kind == "host":
            inv.announce(event.host, ts_ms, event.attributes)  # type: ignore[union-attr]
            return out
        feed = self.feed_inventory
        if feed is not None:
            feed(ts_ms)
        if event.host not in inv._hosts:
            self.invalid["unknown_host"] += 1
            if self.on_invalid is not None:
                self.on_invalid("unknown_host", event, ts_ms)
        for det in self._dispatch.get(type(event)) or self._detectors_for(type(event)):
            if det.route(event) is not None:  # type: ignore[arg-type]
                out.extend(det.update(event, ts_ms, inv))  # type: ignore[arg-type]
        if out:
            alerts = self.alerts
            for a in out:
                alerts[a.kind] += 1
        return out

    def _reject(self, reason: str, event: Event, ts_ms: int) -> list[Alert]:
        self.invalid[reason] += 1
        if self.on_invalid is not None:
            self.on_invalid(reason, event, ts_ms)
        return []

    def _tick(self, watermark_ms: int) -> list[Alert]:
        """Evaluate at every step boundary from the next one up to ``watermark_ms``.

        Why every boundary, and at the boundary rather than at the time of
        the event that crossed it: a stream worker's partition also moves
        its clock when its sources' watermarks pass (``Engine.advance``),
        in jumps that depend on how its input happened to be batched. If
        ticks followed those jumps, TTL sweeps and expiries would fall at
        different instants in two runs over the same events, and a key
        swept in one would keep counting in the other. Ticking at each
        boundary B, with exactly the events dated before B folded in, makes
        every run evaluate the same instants on the same state. A gap of
        more than ``MAX_CATCH_UP_TICKS`` steps (a month of silence) is
        jumped over: nothing is left to expire by then.
        """
        step = self._step_ms
        last = watermark_ms - watermark_ms % step
        at = self._next_tick_ms if self._next_tick_ms is not None else last
        if last - at > MAX_CATCH_UP_TICKS * step:
            at = last - MAX_CATCH_UP_TICKS * step
        out: list[Alert] = []
        inv, feed = self.inventory, self.feed_inventory
        while at <= last:
            if feed is not None:
                feed(at - 1)  # announcements dated before the boundary, as an embedded run has read them
            for det in self.detectors:
                out.extend(det.advance(at, inv))
            at += step
        self._next_tick_ms = last + step
        return out

    def begin(self, start_ms: int) -> None:
        """Date the stream's start for every detector that has not started yet.

        Detectors count warm-up and a new key's silent history from the
        stream's start. One process sees the fleet's first announcement; a
        stream worker's engine for a sparse internal partition may see its
        first event hours later, and would fire later than the embedded run.
        The workers call this with the start of the whole stream.
        """
        for det in self._detectors:
            for part in (det, *vars(det).values()):
                if isinstance(part, Lifecycle) and part.start_ms is None:
                    part.start(start_ms)

    def advance(self, watermark_ms: int) -> list[Alert]:
        """Let event time pass to ``watermark_ms`` without events (idle partitions, end of input).

        Evaluates only if a step boundary was crossed (see ``_tick``).
        """
        if self.watermark_ms is None or watermark_ms > self.watermark_ms:
            self.watermark_ms = watermark_ms
        if self._next_tick_ms is not None and self.watermark_ms < self._next_tick_ms:
            return []
        out = self._tick(self.watermark_ms)
        for a in out:
            self.alerts[a.kind] += 1
        return out

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Whole state as plain data: checkpoint it with the input offsets."""
        return {
            "version": ENGINE_STATE_VERSION,
            "config": self.config.fingerprint(),
            "watermark_ms": self.watermark_ms,
            "next_tick_ms": self._next_tick_ms,
            "inventory": self.inventory.snapshot(),
            "detectors": {d.name: {"version": d.state_version, "state": d.snapshot()} for d in self.detectors},
            "events": dict(self.events),
            "invalid": dict(self.invalid),
            "alerts": dict(self.alerts),
        }

    def restore(self, state: dict[str, Any]) -> bool:
        """Load a snapshot; returns False (and keeps a fresh state) if it is of another version or config."""
        if state.get("version") != ENGINE_STATE_VERSION or state.get("config") != self.config.fingerprint():
            return False
        dets = state["detectors"]
        for d in self.detectors:
            saved = dets.get(d.name)
            if saved is None or saved["version"] != d.state_version:
                return False
        self.watermark_ms = state["watermark_ms"]
        self._next_tick_ms = state["next_tick_ms"]
        self.inventory.restore(state["inventory"])
        for d in self.detectors:
            d.restore(dets[d.name]["state"])
        self.events = Counter(state["events"])
        self.invalid = Counter(state["invalid"])
        self.alerts = Counter(state["alerts"])
        return True

    def counts(self) -> dict[str, dict[str, float]]:
        """Per-detector, per-key incidence (what recovery tests compare)."""
        return {d.name: d.counts() for d in self.detectors}


__all__ = ["ENGINE_STATE_VERSION", "Engine"]
