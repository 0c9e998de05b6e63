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
  the retained log (``stream.recovery``) and fold it first, without emitting;
* equal: fold and emit.

No wall-clock timer, no faust table and no changelog is involved, so a
partition can move between workers, and a worker can be killed at any
instruction, without changing what the detectors count.

The one input outside the log is the host inventory (every worker reads
all of ``fleetepi.hosts``); its history per host is kept in event time, so
the attributes in force for an event do not depend on when they were read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from detectors import DetectorConfig, Engine, Inventory
from fleetepi.contract import Alert, Event, decode_event
from fleetepi.exceptions import InvalidMessage
from stream.partitioning import Stage, unframe

#: Bumped when the layout of :meth:`PartitionState.snapshot` changes.
STATE_VERSION = "partition/1"


class PartitionState:
    """Engine + fold position + duplicate filter of one (stage, partition).

    :param stage: what the partition's records are and which detectors run.
    :param partition: the partition number.
    :param config: detector settings.
    :param inventory: the worker's shared host inventory (read-only here).
    :param on_invalid: admission hook of the Engine (out_of_order, unknown_host, ...).
    """

    def __init__(self, stage: Stage, partition: int, config: DetectorConfig, inventory: Inventory,
                 on_invalid: Callable[[str, Event, int], None] | None = None) -> None:
        self.stage = stage
        self.partition = partition
        self.engine = Engine(config, detectors=list(stage.detectors))
        self.engine.inventory = inventory
        self.engine.on_invalid = on_invalid
        #: First offset not yet folded in.
        self.next_offset = 0
        #: Framed stages: highest source offset folded, per source partition.
        self.seen: dict[int, int] = {}

    def apply(self, offset: int, value: bytes | None) -> tuple[list[Alert], Event | None, bytes | None,
                                                                InvalidMessage | None]:
        """Fold one record: ``(alerts, event, raw bytes, rejection)``.

        ``event`` is None for a duplicate or a rejected record; ``rejection``
        is set for records that break the contract (they advance the
        position too: a dead letter is not retried).
        """
        self.next_offset = offset + 1
        if value is None:
            return [], None, None, InvalidMessage("malformed_json", "empty record (no value)")
        raw = value
        if self.stage.framed:
            try:
                src_p, src_o, raw = unframe(value)
            except ValueError:
                return [], None, None, InvalidMessage("malformed_json", "internal record without source frame")
            if src_o <= self.seen.get(src_p, -1):
                return [], None, None, None
            self.seen[src_p] = src_o
        try:
            event = decode_event(raw)
        except InvalidMessage as exc:
            return [], None, raw, exc
        if type(event) is not self.stage.event_type:
            schema = type(event).__name__.lower()
            return [], None, raw, InvalidMessage(
                "unknown_schema", f"a {schema} message on {self.stage.topic}, which carries "
                                  f"{self.stage.event_type.__name__.lower()} messages only")
        return self.engine.process(event), event, raw, None

    def snapshot(self) -> dict[str, Any]:
        """Plain data (msgpack-able): position, duplicate filter and the Engine without inventory."""
        eng = self.engine.snapshot()
        eng["inventory"] = {}
        return {"version": STATE_VERSION, "stage": self.stage.name, "partition": self.partition,
                "next_offset": self.next_offset, "seen": {str(k): v for k, v in self.seen.items()}, "engine": eng}

    def restore(self, snap: dict[str, Any]) -> bool:
        """Load a :meth:`snapshot`; False (state untouched) if it is of another version, stage or config."""
        if (snap.get("version") != STATE_VERSION or snap.get("stage") != self.stage.name
                or snap.get("partition") != self.partition):
            return False
        shared = self.engine.inventory
        self.engine.inventory = Inventory(max_history=shared.max_history)  # restore() rewrites it
        try:
            ok = self.engine.restore(snap["engine"])
        finally:
            self.engine.inventory = shared
        if ok:
            self.next_offset = int(snap["next_offset"])
            self.seen = {int(k): int(v) for k, v in snap["seen"].items()}
        return ok


__all__ = ["STATE_VERSION", "PartitionState"]
