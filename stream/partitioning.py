"""Which state lives on which partition: the three stages of a worker.

The input stages validate (dead letters) and forward every event,
unchanged, to one internal topic of one partition, whose consumer runs
every detector on the merged stream of all input partitions, in event time::

    fleetepi.crashes   (key host) ─ stage "crashes"   (validate) ─┐
    fleetepi.telemetry (key host) ─ stage "telemetry" (validate) ─┴▶ fleetepi.events.fleet ─ stage "fleet"
                                                                      (1 partition: every detector)

Why one partition for the detectors: their decisions are about the fleet —
a host against every announced host and its peer groups, a cohort's share
of the fleet's host-time, one false-discovery family across all signatures
and attributes. Partitioning them by host or by signature made a worker's
peers and families partition-local, and its alerts differ from a replay's
(issue 9). The input stages still scale out by partition (decoding,
validation, dead letters: the per-message work); the fleet stage is one
Engine, which folds ~10^5 events/s, far above what the agents of a
32,000-host fleet send (docs/stream.md, "One fleet partition").

Forwarded events travel in *bundles* (:func:`bundle`): one internal record
per input batch, each event with its source partition and offset. The
source position lets the consumer drop the duplicates that a re-processed
input batch forwards again (after a crash or a rebalance), so forwarding is
effectively exactly-once for the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from fleetepi.contract import Crash, Telemetry
from fleetepi.detectors.registry import NAMES
from fleetepi.stream.topics import TopicNames


def fleet_key(event: Crash | Telemetry) -> bytes:
    """Repartition key of every event: the fleet topic has one partition."""
    return b"fleet"


#: Source ids of forwarded events: input partition + this base (crashes 0, telemetry 1 << 16).
SOURCE_BASE = {"crashes": 0, "telemetry": 1 << 16}

_KEYS: dict[str, Callable[[Any], bytes]] = {"fleet": fleet_key}


@dataclass(frozen=True)
class Stage:
    """One consumer stage of the worker.

    :param name: short name (metrics, checkpoints, the counts endpoint).
    :param topic: topic it consumes.
    :param event_type: the contract type the topic carries (others are dead-lettered).
    :param detectors: detectors of the Engine kept per partition (none on input stages).
    :param framed: records are bundles of forwarded events (internal topics).
    :param forwards: input stages: ``(internal topic, key name)`` pairs every event goes to.
    :param source_topics: framed stages: the input topics whose partitions feed it.
    """

    name: str
    topic: str
    event_type: type
    detectors: tuple[str, ...] = ()
    framed: bool = False
    forwards: tuple[tuple[str, str], ...] = ()
    source_topics: tuple[str, ...] = ()

    @property
    def source_base(self) -> int:
        return SOURCE_BASE.get(self.name, 0)

    @staticmethod
    def key_of(key_name: str, event: Crash | Telemetry) -> bytes:
        return _KEYS[key_name](event)


def stages(names: TopicNames | None = None) -> tuple[Stage, ...]:
    """The three stages, input stages first."""
    n = names or TopicNames()
    return (
        Stage("crashes", n.crashes, Crash, forwards=((n.fleet, "fleet"),)),
        Stage("telemetry", n.telemetry, Telemetry, forwards=((n.fleet, "fleet"),)),
        Stage("fleet", n.fleet, Crash, NAMES, framed=True, source_topics=(n.crashes, n.telemetry)),
    )


#: One forwarded event in a bundle: (source offset, event time ms, original bytes).
Forwarded = tuple[int, int, bytes]


class Bundle(msgspec.Struct, array_like=True, frozen=True):
    """A decoded bundle; ``caught_up`` is absent (False) in the bundles of older workers.

    :param caught_up: the source partition was read to its end when this was sent:
        the event-time merge need not wait for it (``fleetepi.stream.state``).
    """

    source: int
    watermark_ms: int | None
    first_ms: int | None
    records: list[Forwarded]
    caught_up: bool = False


_bundle_enc = msgspec.msgpack.Encoder()
_bundle_dec = msgspec.msgpack.Decoder(Bundle)


def bundle(partition: int, watermark_ms: int | None, first_ms: int | None, records: list[Forwarded],
           caught_up: bool = False) -> bytes:
    """One internal record: ``(src partition, src watermark, src first ts, [(src offset, ts_ms, raw), ...])``.

    Why bundles: every record costs a worker its consumer path (fetch,
    conductor, queue, ack; ~100 µs a record through a stock faust stream,
    ~25 µs through ``fleetepi.stream.batches``); forwarding one record per event
    would pay it twice per event.
    A bundle holds the events of one input batch bound for one internal
    partition, so the second stage pays it once per bundle. Every input
    batch sends a bundle to *every* internal partition, empty or not: it
    carries the source partition's watermark, which the consumer needs to
    merge its sources in event-time order (``fleetepi.stream.state``), and the time of
    the first event it ever forwarded (the stream's start is the earliest).
    ``caught_up``: the source was read to its end (the merge need not wait
    for it); only written when true, so the bytes of other bundles are
    those of older workers.
    """
    if caught_up:
        return _bundle_enc.encode((partition, watermark_ms, first_ms, records, True))
    return _bundle_enc.encode((partition, watermark_ms, first_ms, records))


#: Most forwarded events in one bundle (keeps an internal record well under 1 MiB).
BUNDLE_MAX = 500


def split_bundles(partition: int, watermark_ms: int | None, first_ms: int | None, records: list[Forwarded],
                  caught_up: bool = False, max_records: int = BUNDLE_MAX) -> list[bytes]:
    """One input batch's records for one internal partition, as bundles of at most ``max_records``.

    Always at least one bundle (an empty one still carries the watermark).
    A bundle's watermark promises that nothing older follows from its
    source, so only the last bundle carries the batch's own; an earlier
    one carries one less than the oldest event still to come. Giving them
    all the batch's watermark let the merge run ahead of the later bundles
    and fold their events as late ones: counts then depended on how the
    input happened to be batched (seen in the kill -9 tests).
    """
    starts = range(0, max(len(records), 1), max_records)
    out = []
    later: int | None = None  # oldest event time in the parts after this one
    for j in reversed(starts):
        part = records[j:j + max_records]
        wm = watermark_ms if later is None or watermark_ms is None else min(watermark_ms, later - 1)
        out.append(bundle(partition, wm, first_ms, part, caught_up and later is None))
        if part:
            oldest = min(r[1] for r in part)
            later = oldest if later is None else min(later, oldest)
    out.reverse()
    return out


def read_bundle(value: bytes) -> Bundle:
    """Inverse of :func:`bundle`.

    :raises msgspec.DecodeError: not a bundle (only workers write these topics).
    """
    return _bundle_dec.decode(value)


def unbundle(value: bytes) -> tuple[int, int | None, int | None, list[Forwarded]]:
    """:func:`read_bundle` as a plain tuple, without the caught-up flag."""
    b = _bundle_dec.decode(value)
    return b.source, b.watermark_ms, b.first_ms, b.records


__all__ = ["BUNDLE_MAX", "SOURCE_BASE", "Bundle", "Forwarded", "Stage", "bundle", "fleet_key", "read_bundle",
           "split_bundles", "stages", "unbundle"]
