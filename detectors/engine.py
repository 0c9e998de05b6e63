"""The detectors run together: admission, inventory, a buffer, and decisions on a step grid.

``Engine`` is what both runners drive: the embedded pipeline (``fleetepi
replay``/``demo``) feeds it every event, a stream worker's fleet partition
feeds it the merged stream of all input partitions. Same code, same alerts.

Why events are buffered and folded at step boundaries rather than one by
one: a decision at boundary T sees exactly the events dated before
``T - settle_s``, folded in a canonical order (``cases.canonical``), so it
does not depend on how the events were interleaved in transit (two Kafka
partitions, an agent that resent its spool), a job-wide abort is seen whole
before anything is decided about it, and the per-event cost is an append.

Admission is part of the engine (not of a runner) so both modes reject the
same events for the same reasons: too late beyond the allowed lateness, too
far beyond the wall clock, crashes of hosts never announced (counted, and
the host joins the fleet with no attributes). And one host's wrong clock
must not cost the fleet its detection: an event more than ``max_jump_s``
ahead of the fleet's event time is *held aside* (counted as
``clock_skew_held``) until ``jump_quorum_hosts`` distinct hosts are ahead
too (a real jump: a replay after a quiet night, a recovered broker), or the
fleet's time catches up with it. A host whose clock runs days ahead keeps
its own events held; everyone else's time goes on. The fleet's event time
(the watermark) is the newest time of any host *but the one that leads*: a
host whose clock is minutes ahead (within the jump) is admitted, yet cannot
make every other host's events late, nor walk the fleet's time forward an
hour at a time with its own events (``tests/pipeline/test_clock_skew.py``:
one host off by -7 days to +7 days, every other alert unchanged). The cost:
the watermark trails the newest event by the leading host's own run of
events, and a fleet where one host alone reports for over ``max_jump_s``
holds that host's events until another host reports (released in order,
not lost) -- except at the end of input, where they are dropped as
``clock_skew``, counted.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetepi.contract import Alert, Crash, Event, Host, Telemetry, decode_event, encode
from fleetepi.detectors.base import Context, Detector
from fleetepi.detectors.cases import CaseMaker, canonical
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.incidents import Escalation
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.maintenance import Maintenance, Window
from fleetepi.detectors.registry import build_detectors, clock_scales
from fleetepi.detectors.windows import HOUR_MS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _by_time(x: tuple[int, int, Event]) -> int:
    return x[0]


def _canonical_ties(ready: list[tuple[int, int, Crash | Telemetry]]) -> None:
    """Within runs of equal timestamps (already sorted by time), order events canonically, in place."""
    i, n = 0, len(ready)
    while i < n:
        j = i + 1
        t = ready[i][0]
        while j < n and ready[j][0] == t:
            j += 1
        if j - i > 1:
            ready[i:j] = sorted(ready[i:j], key=lambda x: canonical(x[2], x[0]))
        i = j


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


_NONE: list[Alert] = []  # returned, never mutated: the common "no alerts" answer

#: Bumped when the layout of ``Engine.snapshot`` changes.
ENGINE_STATE_VERSION = "engine/4"
#: How often idle state is forgotten (event time): a few times a day is plenty for month-long kernels.
SWEEP_MS = 6 * HOUR_MS
#: Most step boundaries evaluated to cross one gap in event time (30 days of 5-minute steps).
MAX_CATCH_UP_TICKS = 8640


class Engine:
    """Run a set of detectors over a stream of contract events.

    :param config: thresholds and windows (defaults documented in ``DetectorConfig``).
    :param detectors: registry names to run; all of them by default.
    :param clock_ms: wall clock in epoch ms (tests pin it); only far-future admission reads it.
    """

    def __init__(self, config: DetectorConfig | None = None, detectors: Sequence[str] | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.config = c = config or DetectorConfig()
        self._clock_ms = clock_ms or _wall_clock_ms
        self.clock = DecayClock(clock_scales(c))
        self.inventory = Inventory(max_history=c.inventory_history, clock=self.clock)
        self.ctx = Context(c, self.inventory, self.clock)
        self.detectors: list[Detector] = build_detectors(c, self.clock, detectors)
        self.cases = CaseMaker.new(c)
        #: planned work: windows from a file or Alertmanager's silences (``set_maintenance``)
        self.maintenance = Maintenance()
        #: rack escalation and incident ids, over every step's alerts
        self.escalation = Escalation(int(c.escalate_window_s * 1000), c.escalate_share, c.escalate_min_hosts)
        self.watermark_ms: int | None = None
        self._next_tick_ms: int | None = None
        self._step_ms = c.step_ms
        self._settle_ms = int(c.settle_s * 1000)
        self._lateness_ms = int(c.allowed_lateness_s * 1000)
        self._future_ms = int(c.max_future_s * 1000)
        self._jump_ms = int(c.max_jump_s * 1000)
        self._thermal_c = c.thermal_threshold_c
        #: hosts with a hot thermal reading admitted but not folded yet (their cool readings re-arm)
        self._hot_buffered: set[str] = set()
        #: admitted crashes and telemetry not folded yet: (ts_ms, seq, event)
        self._buffer: list[tuple[int, int, Crash | Telemetry]] = []
        #: events held aside for clock skew: a heap of (ts_ms, seq, event)
        self._held: list[tuple[int, int, Event]] = []
        #: host -> its earliest held event (the quorum is counted in hosts, not events)
        self._held_first: dict[str, int] = {}
        #: the host with the newest admitted event, its time, and the newest time of any other host:
        #: how far ahead an event may be is judged against the *other* hosts' time, so one host's
        #: clock cannot walk the fleet's time forward an hour at a time (each of its events within
        #: the jump of the watermark its previous one set)
        self._lead_host: str | None = None
        self._lead_ms: int | None = None
        self._second_ms: int | None = None
        self._seq = 0
        #: where folding has reached: events dated before it are folded
        self._folded_ms = 0
        self._next_sweep_ms = 0
        #: events accepted per schema kind ("host", "crash", "telemetry").
        self.events: Counter[str] = Counter()
        #: events rejected or flagged, per reason (see fleetepi.contract.codec.REASONS).
        self.invalid: Counter[str] = Counter()
        self.alerts: Counter[str] = Counter()
        #: other counts: events held for clock skew, folded late, in maintenance.
        self.flags: Counter[str] = Counter()
        #: Hook ``on_invalid(reason, event, ts_ms)``, called after each admission drop or flag is
        #: counted, so a runner can log it, keep its line number or dead-letter it.
        self.on_invalid: Callable[[str, Event, int], None] | None = None
        #: Hook ``feed_inventory(ts_ms)``: bring every announcement dated up to ``ts_ms`` into force
        #: before the events dated before ``ts_ms + 1`` are folded. The embedded run needs none
        #: (announcements are events of the same stream, folded with the others); a stream worker
        #: reads them from the hosts topic and brings them into force through this
        #: (``fleetepi.stream.state``): either way, at a step boundary the inventory holds exactly
        #: the announcements dated before the fold horizon.
        self.feed_inventory: Callable[[int], None] | None = None
        #: host -> its first announcement's time, as admitted (or, in a stream worker, as read from
        #: the hosts topic): an event before it is flagged ``unknown_host`` (and still used).
        self.announced: dict[str, int] = {}

    # ------------------------------------------------------------------ processing
    def process(self, event: Event) -> list[Alert]:
        """Feed one decoded event; return the alerts the step boundaries it passed caused."""
        ts_ms = (event.ts - _EPOCH) // _MS
        wm = self.watermark_ms
        ref = self._second_ms if event.host == self._lead_host else self._lead_ms
        if ref is None:
            ref = wm
        if ref is not None and ts_ms > ref + self._jump_ms:
            if ts_ms > self._clock_ms() + self._future_ms:
                return self._reject("future_timestamp", event, ts_ms)
            return self._hold(event, ts_ms)
        if wm is None and ts_ms > self._clock_ms() + self._future_ms:
            return self._reject("future_timestamp", event, ts_ms)
        return self._admit(event, ts_ms)

    def _admit(self, event: Event, ts_ms: int) -> list[Alert]:
        # Hot path (bench/replay.py): the commonest event, a cool thermal reading while no device
        # is hot (or about to be), is counted and dropped here: no detector would count it.
        wm = self.watermark_ms
        if wm is not None and ts_ms < wm - self._lateness_ms:
            return self._reject("out_of_order", event, ts_ms)
        host = event.host
        if host == self._lead_host:
            if ts_ms > self._lead_ms:  # type: ignore[operator]
                self._lead_ms = ts_ms
        elif self._lead_ms is None or ts_ms > self._lead_ms:
            self._second_ms, self._lead_host, self._lead_ms = self._lead_ms, host, ts_ms
        elif self._second_ms is None or ts_ms > self._second_ms:
            self._second_ms = ts_ms
        etype = type(event)
        events = self.events
        if etype is Host:
            events["host"] += 1
            first = self.announced.get(event.host)
            if first is None or ts_ms < first:
                self.announced[event.host] = ts_ms
            buffer = True
        else:
            first = self.announced.get(host)
            if first is None or first > ts_ms:
                self.invalid["unknown_host"] += 1
                if self.on_invalid is not None:
                    self.on_invalid("unknown_host", event, ts_ms)
            if etype is Telemetry:
                events["telemetry"] += 1
                buffer = self._wanted(event)  # type: ignore[arg-type]
            else:
                events["crash"] += 1
                buffer = True
        if buffer and self.detectors:  # an input stage's engine only admits and counts
            if ts_ms < self._folded_ms:
                self.flags["folded_late"] += 1
            self._seq += 1
            self._buffer.append((ts_ms, self._seq, event))  # type: ignore[arg-type]
        # the fleet's time follows the newest event of any host but the leading one: a host whose
        # clock is fast (by less than the jump) is admitted, but does not make every other host's
        # events late (with a single host, it follows that host)
        second = self._second_ms
        now = ts_ms if host != self._lead_host or second is None else min(ts_ms, second)
        if wm is not None and now <= wm:
            return _NONE
        out: list[Alert] = []
        # held events now within reach go in first, before time moves past them: a boundary is
        # decided with every event dated before it, whether it was held on the way or not
        if self._held and self._held[0][0] <= now + self._jump_ms:
            out.extend(self._release(now + self._jump_ms))
            if self.watermark_ms is not None and now <= self.watermark_ms:
                return out
        self.watermark_ms = now
        if wm is None:
            self.clock.ref_ms = now - now % self._step_ms  # decayed counts inflate from here
        if self._next_tick_ms is None:
            self._next_tick_ms = now - now % self._step_ms + self._step_ms
        elif self.watermark_ms >= self._next_tick_ms:
            out.extend(self._tick(self.watermark_ms))
        return out

    def _wanted(self, tel: Telemetry) -> bool:
        """Does a detector count this reading? A cool thermal reading does not, unless a device of its
        host is hot or may be (a hot reading of the host is still buffered): then it re-arms it."""
        kind = tel.kind
        if kind == "thermal":
            value = tel.value
            if value is not None and value < self._thermal_c:
                return bool(self.cases.thermal.hot) or tel.host in self._hot_buffered
            self._hot_buffered.add(tel.host)
            return True
        if kind == "power":  # a reading is context; the agent's crossing and brake notices count
            return tel.count is not None and tel.count > 0 or tel.value is None
        return tel.count != 0

    def _reject(self, reason: str, event: Event, ts_ms: int) -> list[Alert]:
        self.invalid[reason] += 1
        if self.on_invalid is not None:
            self.on_invalid(reason, event, ts_ms)
        return []

    # ------------------------------------------------------------------ clock skew
    def _hold(self, event: Event, ts_ms: int) -> list[Alert]:
        """Hold an event far ahead of the fleet's time until a quorum of hosts is there too."""
        if len(self._held) >= self.config.max_held_events:
            return self._reject("clock_skew", event, ts_ms)  # bounded: the newest beyond it is dropped, counted
        self._seq += 1
        heapq.heappush(self._held, (ts_ms, self._seq, event))
        self.flags["clock_skew_held"] += 1
        host = event.host  # type: ignore[union-attr]
        first = self._held_first
        if host not in first or ts_ms < first[host]:
            first[host] = ts_ms
        # hosts known so far: announcements read (admitted), not only those folded yet, so that one
        # wrong clock early in a stream is no quorum of a fleet not folded yet
        known = max(len(self.inventory), len(self.announced))
        quorum = min(self.config.jump_quorum_hosts, max(1, known // 2))
        if len(first) < quorum:
            return []
        # the fleet moved: event time may jump to where the quorum-th host is
        to = sorted(first.values())[quorum - 1]
        return self._release(to + self._jump_ms)

    def _release(self, upto_ms: int) -> list[Alert]:
        """Admit held events dated up to ``upto_ms``, oldest first."""
        out: list[Alert] = []
        held = self._held
        if not held or held[0][0] > upto_ms:
            return out
        while held and held[0][0] <= upto_ms:
            ts_ms, _, event = heapq.heappop(held)
            self.flags["clock_skew_released"] += 1
            out.extend(self._admit(event, ts_ms))
        first: dict[str, int] = {}
        for t, _, ev in held:
            h = ev.host  # type: ignore[union-attr]
            if h not in first or t < first[h]:
                first[h] = t
        self._held_first = first
        return out

    # ------------------------------------------------------------------ decisions
    def _tick(self, watermark_ms: int) -> list[Alert]:
        """Fold and decide at every step boundary from the next one up to ``watermark_ms``.

        Why every boundary, at the boundary: a stream worker's partition also
        moves its clock when its sources' watermarks pass (``advance``), in
        jumps that depend on how its input happened to be batched; ticking
        at each boundary B, with exactly the events dated before
        ``B - settle_s`` folded, makes every run decide at the same instants
        on the same state. A gap of more than ``MAX_CATCH_UP_TICKS`` steps (a
        month of silence) is jumped over.
        """
        step = self._step_ms
        last = watermark_ms - watermark_ms % step
        at = self._next_tick_ms if self._next_tick_ms is not None else last
        if last - at > MAX_CATCH_UP_TICKS * step:
            at = last - MAX_CATCH_UP_TICKS * step
        out: list[Alert] = []
        while at <= last:
            out.extend(self._decide_at(at))
            at += step
        self._next_tick_ms = last + step
        for a in out:
            self.alerts[a.kind] += 1
        return out

    def _decide_at(self, at_ms: int) -> list[Alert]:
        ctx = self.ctx
        horizon = at_ms - self._settle_ms
        if self.feed_inventory is not None:
            self.feed_inventory(horizon - 1)  # announcements dated before the fold horizon are in force
        self._fold(horizon)
        first = self.inventory.first_ms
        if first is not None and (ctx.start_ms is None or first < ctx.start_ms):
            ctx.start_ms = first  # the stream starts at its first announcement (or first event, see begin)
        clock = self.clock
        if clock.due(at_ms):
            factors = clock.rebase(at_ms)
            self.inventory.rebase(factors)
            for det in self.detectors:
                det.rebase(factors)
        out: list[Alert] = []
        for det in self.detectors:
            out.extend(det.decide(at_ms, horizon, ctx))
        if out or self.escalation.pages or self.escalation.escalated:
            out = self.escalation.process(out, at_ms, self.inventory)
        if at_ms >= self._next_sweep_ms:
            self._next_sweep_ms = at_ms + SWEEP_MS
            for det in self.detectors:
                det.sweep(at_ms, ctx)
            self.cases.sweep(at_ms, int(self.config.key_ttl_s * 1000))
        return out

    def _fold(self, horizon_ms: int) -> None:
        """Fold every buffered event dated before ``horizon_ms``, in canonical order."""
        buf = self._buffer
        if self._folded_ms < horizon_ms:
            self._folded_ms = horizon_ms
        if not buf:
            return
        ready = [x for x in buf if x[0] < horizon_ms]
        if not ready:
            return
        self._buffer = [x for x in buf if x[0] >= horizon_ms] if len(ready) < len(buf) else []
        ready.sort(key=_by_time)
        _canonical_ties(ready)
        self._hot_buffered = {x[2].host for x in self._buffer
                              if type(x[2]) is Telemetry and x[2].kind == "thermal"} if self._hot_buffered else set()
        inv = self.inventory
        # announcements first: the inventory at a boundary holds those dated before its horizon,
        # whenever they arrived (the stream workers bring theirs in the same way)
        for ts_ms, _, event in ready:
            if type(event) is Host:
                inv.announce(event.host, ts_ms, event.attributes)
        keys_at, ctx, make, dets = inv.keys_at, self.ctx, self.cases.case, self.detectors
        quiet, maintenance = self.cases.quiet_reading, self.maintenance
        for ts_ms, _, event in ready:
            if type(event) is Host:
                continue
            inv.seen(event.host, ts_ms)  # a host that was never announced joins the fleet, attribute-less
            if quiet(event):
                continue  # a reading below its threshold on a device that was not hot: nothing to count
            keys = keys_at(event.host, ts_ms)
            if keys is None or (maintenance.windows and maintenance.covers(event.host, keys, ts_ms)):
                self.flags["in_maintenance"] += 1  # planned work: neither a case nor a baseline
                continue
            case = make(event, ts_ms, keys)
            if not case.is_crash and case.errors <= 0:
                continue  # a reading below its threshold: nothing any detector counts
            for det in dets:
                det.fold(case, ctx)

    def set_maintenance(self, windows: list[Window]) -> None:
        """Replace the maintenance windows (besides hosts announced with a ``maintenance`` attribute)."""
        self.maintenance.set(windows)

    @property
    def newest_ms(self) -> int | None:
        """The newest event time admitted (what a freshness metric shows; the watermark may trail it)."""
        wm, lead = self.watermark_ms, self._lead_ms
        return lead if wm is None or (lead is not None and lead > wm) else wm

    @property
    def decided_ms(self) -> int | None:
        """The last step boundary decided (None before the first)."""
        return None if self._next_tick_ms is None else self._next_tick_ms - self._step_ms

    def begin(self, start_ms: int) -> None:
        """Date the stream's start (warm-up counts from it) when a runner knows it better than the inventory."""
        if self.ctx.start_ms is None or start_ms < self.ctx.start_ms:
            self.ctx.start_ms = start_ms

    def advance(self, watermark_ms: int) -> list[Alert]:
        """Let event time pass to ``watermark_ms`` without events (idle partitions, end of input)."""
        out: list[Alert] = []
        if self._held:
            out.extend(self._release(watermark_ms + self._jump_ms))  # admitted as events: they tick
        if self.watermark_ms is None or watermark_ms > self.watermark_ms:
            self.watermark_ms = watermark_ms
        if self._next_tick_ms is None:
            self._next_tick_ms = watermark_ms - watermark_ms % self._step_ms + self._step_ms
            self.clock.ref_ms = watermark_ms - watermark_ms % self._step_ms
            return out
        if self.watermark_ms >= self._next_tick_ms:
            out.extend(self._tick(self.watermark_ms))
        return out

    def flush(self) -> list[Alert]:
        """End of input: decide enough boundaries for every buffered event to be folded.

        The watermark stays at the last event: event time did not pass, the
        input ended (a replay's metrics and summary report the data's time).
        """
        # events still held for clock skew never had their time confirmed by other hosts: dropped, counted
        while self._held:
            ts_ms, _, event = heapq.heappop(self._held)
            self._reject("clock_skew", event, ts_ms)
        self._held_first = {}
        if self.watermark_ms is None or self._next_tick_ms is None:
            return []
        last = max((x[0] for x in self._buffer), default=self.watermark_ms)
        target = max(self.watermark_ms, last + self._settle_ms + self._step_ms)
        if target < self._next_tick_ms:
            return []
        return self._tick(target)

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, Any]:
        """Whole state as plain data: checkpoint it with the input offsets."""
        return {
            "version": ENGINE_STATE_VERSION,
            "config": self.config.fingerprint(),
            "watermark_ms": self.watermark_ms,
            "next_tick_ms": self._next_tick_ms,
            "folded_ms": self._folded_ms,
            "next_sweep_ms": self._next_sweep_ms,
            "clock_ref_ms": self.clock.ref_ms,
            "start_ms": self.ctx.start_ms,
            "seq": self._seq,
            "buffer": [[t, s, encode(e).decode()] for t, s, e in self._buffer],
            "held": [[t, s, encode(e).decode()] for t, s, e in self._held],
            "lead": [self._lead_host, self._lead_ms, self._second_ms],
            "inventory": self.inventory.snapshot(),
            "cases": self._to_builtins(self.cases),
            "maintenance": self._to_builtins(self.maintenance.windows),
            "escalation": self._to_builtins(self.escalation),
            "detectors": {d.name: {"version": d.state_version, "state": d.snapshot()} for d in self.detectors},
            "announced": dict(self.announced),
            "events": dict(self.events),
            "invalid": dict(self.invalid),
            "alerts": dict(self.alerts),
            "flags": dict(self.flags),
        }

    @staticmethod
    def _to_builtins(obj: Any) -> Any:
        import msgspec

        return msgspec.to_builtins(obj)

    def restore(self, state: dict[str, Any]) -> bool:
        """Load a snapshot; returns False (and keeps a fresh state) if it is of another version or config."""
        import msgspec

        if state.get("version") != ENGINE_STATE_VERSION or state.get("config") != self.config.fingerprint():
            return False
        dets = state["detectors"]
        for d in self.detectors:
            saved = dets.get(d.name)
            if saved is None or saved["version"] != d.state_version:
                return False
        self.watermark_ms = state["watermark_ms"]
        self._next_tick_ms = state["next_tick_ms"]
        self._folded_ms = state["folded_ms"]
        self._next_sweep_ms = state["next_sweep_ms"]
        self.clock.ref_ms = state["clock_ref_ms"]
        self.clock.rebase(self.clock.ref_ms)  # clear the factor cache
        self.ctx.start_ms = state["start_ms"]
        self._seq = state["seq"]
        self._buffer = [(int(t), int(s), decode_event(e)) for t, s, e in state["buffer"]]  # type: ignore[misc]
        self._held = [(int(t), int(s), decode_event(e)) for t, s, e in state["held"]]
        self._lead_host, self._lead_ms, self._second_ms = state.get("lead") or (None, None, None)
        heapq.heapify(self._held)
        self._held_first = {}
        for t, _, ev in self._held:
            h = ev.host  # type: ignore[union-attr]
            self._held_first[h] = min(t, self._held_first.get(h, t))
        self.inventory.restore(state["inventory"])
        self.cases = msgspec.convert(state["cases"], CaseMaker)
        self.maintenance.set(msgspec.convert(state["maintenance"], list[Window]))
        self.escalation = msgspec.convert(state["escalation"], Escalation)
        for d in self.detectors:
            d.restore(dets[d.name]["state"])
        self.announced = {str(h): int(t) for h, t in state.get("announced", {}).items()}
        self.events = Counter(state["events"])
        self.invalid = Counter(state["invalid"])
        self.alerts = Counter(state["alerts"])
        self.flags = Counter(state["flags"])
        return True

    def counts(self) -> dict[str, dict[str, float]]:
        """Per-detector, per-key incidence (what recovery tests compare)."""
        return {d.name: d.counts() for d in self.detectors}


__all__ = ["ENGINE_STATE_VERSION", "Engine"]
