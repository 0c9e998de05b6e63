"""Detector state of one owned partition: a pure function of the partition's log prefix.

The invariant that makes recovery exact: a :class:`PartitionState` is the
result of folding records ``[log start, next_offset)`` of its partition, in
log order, into a fresh state. Folding is deterministic (event-time
detectors, no wall clock), so *any* two states with equal ``next_offset``
are equal, whoever built them. Hence:

* a record below ``next_offset`` is already in the state: skip it (redelivery
  after a rebalance or an uncommitted batch);
* a record above ``next_offset`` means someone else folded the gap (another
  worker owned the partition, or this is a fresh process): read the gap from
  the retained log (``fleetepi.stream.recovery``) and fold it first, without emitting;
* equal: fold and emit.

No wall-clock timer, no faust table and no changelog is involved, so a
partition can move between workers, and a worker can be killed at any
instruction, without changing what the detectors count.

Detector stages fold *bundles* of forwarded events from several input
partitions and release them in event-time order (:meth:`apply_bundle`), so
the fold does not depend on which worker forwarded first either.

The one input outside the log is the host inventory (every worker reads
all of ``fleetepi.hosts``). Each Engine folds the announcements into its own
inventory up to the event time it has reached, in event-time order whatever
order they were read in, so the attributes and cohort sizes in force for an
event do not depend on when they were read (the worker makes sure they *were*
read: ``HostFeed.sync`` before each batch).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec

from fleetepi.contract import Alert, Event, decode_event
from fleetepi.detectors import DetectorConfig, Engine
from fleetepi.exceptions import InvalidMessage
from fleetepi.stream.partitioning import Stage, read_bundle

log = logging.getLogger(__name__)

#: Source id of an idle mark: a bundle that raises every source's watermark to its own.
IDLE_MARK = -1

#: Bumped when the layout of :meth:`PartitionState.snapshot` changes.
STATE_VERSION = "partition/4"


class PartitionState:
    """Engine + fold position + duplicate filter of one (stage, partition).

    :param stage: what the partition's records are and which detectors run.
    :param partition: the partition number.
    :param config: detector settings.
    :param hosts: the worker's host announcements, ``(ts_ms, host, attributes)``, append-only
        (``HostFeed.entries``); folded into this Engine's own inventory up to each event's time.
    :param on_invalid: admission hook of the Engine (out_of_order, unknown_host, ...).
    """

    def __init__(self, stage: Stage, partition: int, config: DetectorConfig,
                 hosts: list[tuple[int, str, dict[str, str]]],
                 on_invalid: Callable[[str, Event, int], None] | None = None) -> None:
        self.stage = stage
        self.partition = partition
        self.engine = Engine(config, detectors=list(stage.detectors))
        self.engine.on_invalid = on_invalid
        self.engine.feed_inventory = self._sync_hosts
        self.hosts = hosts
        #: Announcements of ``hosts`` already taken into ``host_queue``.
        self.hosts_cursor = 0
        #: Announcements of ``hosts`` already entered in the Engine's ``announced``.
        self._known_cursor = 0
        #: Event time up to which announcements are in force (a restored state skips those again).
        self.hosts_fed_ms = -1
        self._skip_upto_ms = -1
        #: Announcements taken but not yet in force (dated after the event time reached),
        #: ``(ts_ms, host, arrival index, attributes)``: a heap, so that they come into force in
        #: event-time order even though the feed appends them in arrival order.
        self.host_queue: list[tuple[int, str, int, dict[str, str]]] = []
        #: First offset not yet folded in.
        self.next_offset = 0
        #: Held while folding: the stage's batch and the assignment-time rebuild never interleave.
        self.lock = asyncio.Lock()
        #: Framed stages: highest source offset folded, per source partition.
        self.seen: dict[int, int] = {}
        #: Framed stages: source ids of the input partitions feeding this one (set by the worker).
        self.source_ids: list[int] = []
        #: Framed stages: wall time (monotonic) of the last release; only decides idle marks.
        self.released_wall = time.monotonic()
        #: Framed stages: watermark of each source partition, and events waiting for the slowest source.
        self.src_wm: dict[int, int] = {}
        self.heap: list[tuple[int, int, int, bytes]] = []
        self.src_first: dict[int, int] = {}
        #: Framed stages: sources whose last bundle said "read to the end" (they hold nobody back).
        self.src_idle: set[int] = set()
        #: Framed stages: the detectors were told the stream's start (``Engine.begin``: a sparse
        #: internal partition would otherwise date warm-up from its own first event, hours late).
        self.begun = False
        #: Input stages: first event time forwarded (sent with every bundle).
        self.fwd_first: int | None = None
        #: Input stages: largest event time forwarded (the watermark sent with every bundle).
        self.fwd_wm: int | None = None
        #: Input stages: the last bundles sent said "read to the end" (``caught_up``).
        self.caught_up_sent = False
        #: events a detector raised on (logged; the event is skipped, the partition goes on).
        self.errors = 0

    def apply(self, offset: int, value: bytes | None) -> tuple[list[Alert], Event | None, bytes | None,
                                                                InvalidMessage | None]:
        """Fold one input record: ``(alerts, event, raw bytes, rejection)``.

        ``event`` is None for a rejected record; ``rejection`` is set for
        records that break the contract (they advance the position too: a
        dead letter is not retried).
        """
        self.next_offset = offset + 1
        if value is None:
            return [], None, None, InvalidMessage("malformed_json", "empty record (no value)")
        try:
            event = decode_event(value)
        except InvalidMessage as exc:
            return [], None, value, exc
        if type(event) is not self.stage.event_type:
            schema = type(event).__name__.lower()
            return [], None, value, InvalidMessage(
                "unknown_schema", f"a {schema} message on {self.stage.topic}, which carries "
                                  f"{self.stage.event_type.__name__.lower()} messages only")
        return self._process(event, offset, event.ts_ms), event, value, None

    def apply_bundle(self, offset: int, value: bytes | None) -> list[Alert]:
        """Fold one internal record (a bundle), then release what every source has passed.

        The internal partition is fed by all ``sources`` input partitions,
        each in event-time order, but interleaved by whoever forwarded
        first: a worker catching up on partition 0 may forward two days of
        crashes before partition 1's first. Folding in arrival order would
        drop most of them as ``out_of_order``. So events wait in a heap and
        are released in (ts, source partition, source offset) order up to
        the smallest source watermark: the merge the embedded engine sees,
        whatever the arrival order. Events newer than the slowest source
        wait for it (the tail of a finished recording waits for more input).
        """
        self.next_offset = offset + 1
        try:
            b = read_bundle(value or b"")
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # depth: an unknown nested field
            log.error("%s[%d]@%d: not a bundle, skipped", self.stage.name, self.partition, offset)
            return []
        src_p, wm, first, records = b.source, b.watermark_ms, b.first_ms, b.records
        if src_p == IDLE_MARK:
            # a worker saw this partition hold events for long, with sources silent: the
            # decision (wall clock) is in the log, so rebuilds release exactly the same
            if wm is not None:
                for s in self.source_ids:
                    if self.src_wm.get(s, wm - 1) < wm:
                        self.src_wm[s] = wm
            return self._release()
        seen = self.seen.get(src_p, -1)
        heap = self.heap
        for src_o, ts_ms, raw in records:
            if src_o <= seen:
                continue
            seen = src_o
            heapq.heappush(heap, (ts_ms, src_p, src_o, raw))
        self.seen[src_p] = seen
        if wm is not None and wm > self.src_wm.get(src_p, wm - 1):
            self.src_wm[src_p] = wm
        if first is not None and src_p not in self.src_first:
            self.src_first[src_p] = first
        if b.caught_up:
            self.src_idle.add(src_p)
        else:
            self.src_idle.discard(src_p)
        return self._release()

    def _horizon(self) -> int | None:
        """Event time up to which every source has passed (None: some source still holds all back).

        A source that was read to its end when it last sent (``caught_up``)
        holds nobody back: waiting for it would wait for its next event, which
        may come hours of event time later (a quiet crash partition). Its
        later events that are older than the horizon are folded as late
        events, as in the embedded run; the flag is in the log, so a rebuild
        releases exactly the same.
        """
        wms, idle = self.src_wm, self.src_idle
        waiting: list[int] = []
        for s in self.source_ids:
            if s in idle:
                continue
            wm = wms.get(s)
            if wm is None:
                return None
            waiting.append(wm)
        if waiting:
            return min(waiting)
        if wms:
            return max(wms.values())
        return self.heap[0][0] if self.heap else None

    def _release(self) -> list[Alert]:
        heap = self.heap
        if not heap:
            return []
        if not self.src_idle:
            if len(self.src_wm) < len(self.source_ids):
                return []
            horizon = min(self.src_wm.values()) if self.src_wm else heap[0][0]
        else:
            found = self._horizon()
            if found is None:
                return []
            horizon = found
        if not self.begun:
            self.begun = True
            self.engine.begin(min(self.src_first.values()) if self.src_first else heap[0][0])
        out: list[Alert] = []
        if heap[0][0] <= horizon:
            self.released_wall = time.monotonic()
        pop, process = heapq.heappop, self._process
        while heap and heap[0][0] <= horizon:
            ts_ms, _, src_o, raw = pop(heap)
            try:
                event = decode_event(raw)
            except InvalidMessage:
                continue  # validated by the input stage; only others writing this topic could cause it
            alerts = process(event, src_o, ts_ms)
            if alerts:
                out.extend(alerts)
        # Event time passed for every source: let the detectors' clock follow it, as the
        # embedded engine's does on every event (this partition may see one rare key only).
        eng = self.engine
        next_tick = eng._next_tick_ms
        if next_tick is not None and horizon >= next_tick:
            out.extend(eng.advance(horizon))
        return out

    def fold(self, offset: int, value: bytes | None) -> None:
        """Fold a record without emitting anything (rebuilding from the log)."""
        if self.stage.framed:
            self.apply_bundle(offset, value)
        else:
            self.apply(offset, value)

    def _sync_hosts(self, ts_ms: int) -> None:
        """Bring into force every announcement dated up to ``ts_ms`` (the Engine's ``feed_inventory``).

        The Engine calls it before each event and before each tick, so what
        is in force at an instant does not depend on when this partition got
        there (in one jump or event by event).
        """
        hosts, cur, queue = self.hosts, self.hosts_cursor, self.host_queue
        n = len(hosts)
        if cur < n:
            push, skip = heapq.heappush, self._skip_upto_ms
            while cur < n:
                t, host, attrs = hosts[cur]
                if t > skip:  # (a restored state has those in its snapshot's inventory already)
                    push(queue, (t, host, cur, attrs))
                cur += 1
            self.hosts_cursor = cur
        if queue and queue[0][0] <= ts_ms:
            announce, pop = self.engine.inventory.announce, heapq.heappop
            while queue and queue[0][0] <= ts_ms:
                t, host, _, attrs = pop(queue)
                announce(host, t, attrs)
                if t > self.hosts_fed_ms:
                    self.hosts_fed_ms = t

    def _process(self, event: Event, offset: int, ts_ms: int) -> list[Alert]:
        hosts, known = self.hosts, self.engine.announced
        while self._known_cursor < len(hosts):  # who is announced, for the unknown_host flag
            t, host, _ = hosts[self._known_cursor]
            if host not in known or t < known[host]:
                known[host] = t
            self._known_cursor += 1
        try:
            return self.engine.process(event)
        except Exception:  # a detector bug on one input must not stop the partition
            log.exception("%s[%d]@%d: detector failed on %r", self.stage.name, self.partition, offset, event)
            self.errors += 1
            return []

    def snapshot(self) -> dict[str, Any]:
        """Plain data (msgpack-able): position, duplicate filter and the Engine with its inventory.

        The inventory is part of it: its exposures (host-time per cohort)
        integrate every announcement at the time it came into force, which a
        compacted hosts topic read again could not reproduce.
        """
        eng = self.engine.snapshot()
        return {"hosts_fed_ms": self.hosts_fed_ms,"version": STATE_VERSION, "stage": self.stage.name, "partition": self.partition,
                "next_offset": self.next_offset, "seen": {str(k): v for k, v in self.seen.items()},
                "src_wm": {str(k): v for k, v in self.src_wm.items()}, "heap": [list(h) for h in self.heap],
                "fwd_wm": self.fwd_wm, "fwd_first": self.fwd_first, "begun": self.begun,
                "src_first": {str(k): v for k, v in self.src_first.items()}, "src_idle": sorted(self.src_idle),
                "engine": eng}

    def restore(self, snap: dict[str, Any]) -> bool:
        """Load a :meth:`snapshot`; False (state untouched) if it is of another version, stage or config."""
        if (snap.get("version") != STATE_VERSION or snap.get("stage") != self.stage.name
                or snap.get("partition") != self.partition):
            return False
        ok = self.engine.restore(snap["engine"])
        if ok:
            # announcements up to the snapshot's are in its inventory; later ones are fed again
            self.hosts_fed_ms = self._skip_upto_ms = int(snap.get("hosts_fed_ms", -1))
            self.hosts_cursor = 0
            self.host_queue = []
            self.next_offset = int(snap["next_offset"])
            self.seen = {int(k): int(v) for k, v in snap["seen"].items()}
            self.src_wm = {int(k): int(v) for k, v in snap["src_wm"].items()}
            self.heap = [tuple(h) for h in snap["heap"]]  # type: ignore[misc]
            heapq.heapify(self.heap)
            self.fwd_wm = snap["fwd_wm"]
            self.fwd_first = snap["fwd_first"]
            self.begun = bool(snap["begun"])
            self.src_first = {int(k): int(v) for k, v in snap["src_first"].items()}
            self.src_idle = {int(s) for s in snap.get("src_idle", ())}
        return ok


__all__ = ["IDLE_MARK", "STATE_VERSION", "PartitionState"]
