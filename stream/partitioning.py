"""Which state lives on which partition: the four stages of a worker.

``detectors.registry.ROUTE_OF`` says under which key each detector keeps
its state. Crashes and telemetry arrive keyed by host, so host-keyed
detectors run where the input partitions are consumed (no network hop).
Signature-keyed detectors need every crash of a signature on one partition
owner, and cohort telemetry every event of one ``kind:code``: the input
stages forward those events, unchanged, to two internal topics keyed that
way (repartitioning), whose consumers run the remaining detectors::

    fleetepi.crashes   (key host) ─ stage "crashes"   [host detectors]      ─┐ forward by signature
    fleetepi.telemetry (key host) ─ stage "telemetry" [host detectors]      ─┤ forward by kind:code
    fleetepi.crashes.by-signature ─ stage "signature" [signature detectors]  │
    fleetepi.telemetry.by-cohort  ─ stage "cohort"    [telemetry detectors] ◄┘

Forwarded events travel in *bundles* (:func:`bundle`): one internal record
per input batch and target partition, each event with its source partition
and offset. The source position lets the consumer drop the duplicates that
a re-processed input batch forwards again (after a crash or a rebalance),
so forwarding is effectively exactly-once for the state.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from detectors.registry import ROUTE_OF
from fleetepi.contract import Crash, Telemetry
from stream.topics import TopicNames


def detectors_for(route: str) -> tuple[str, ...]:
    """Registry names of the detectors whose state is keyed by ``route``."""
    return tuple(name for name, r in ROUTE_OF.items() if r == route)


def signature_key(event: Crash) -> bytes:
    """Repartition key of a crash: its signature."""
    return event.signature.encode()


def cohort_key(event: Telemetry) -> bytes:
    """Repartition key of a telemetry event: ``kind:code`` (the telemetry_cohort state key)."""
    return f"{event.kind}:{'' if event.code is None else event.code}".encode()


@dataclass(frozen=True)
class Stage:
    """One consumer stage of the worker.

    :param name: short name (metrics, checkpoints, the counts endpoint).
    :param topic: topic it consumes.
    :param event_type: the contract type the topic carries (others are dead-lettered).
    :param detectors: detectors of the Engine kept per partition.
    :param framed: records are bundles of forwarded events (internal topics).
    :param source_topic: the input topic whose partitions feed a framed stage.
    :param forward_topic: where accepted events are forwarded, if anywhere.
    """

    name: str
    topic: str
    event_type: type
    detectors: tuple[str, ...]
    framed: bool = False
    forward_topic: str | None = None
    source_topic: str | None = None

    def forward_key(self, event: Crash | Telemetry) -> bytes:
        if isinstance(event, Crash):
            return signature_key(event)
        return cohort_key(event)


def stages(names: TopicNames | None = None) -> tuple[Stage, ...]:
    """The four stages, input stages first."""
    n = names or TopicNames()
    host = detectors_for("host")
    return (
        Stage("crashes", n.crashes, Crash, host, forward_topic=n.by_signature),
        Stage("telemetry", n.telemetry, Telemetry, host, forward_topic=n.by_cohort),
        Stage("signature", n.by_signature, Crash, detectors_for("signature"), framed=True, source_topic=n.crashes),
        Stage("cohort", n.by_cohort, Telemetry, detectors_for("telemetry"), framed=True, source_topic=n.telemetry),
    )


_bundle_enc = msgspec.msgpack.Encoder()
_bundle_dec = msgspec.msgpack.Decoder(tuple[int, int | None, int | None, list[tuple[int, int, bytes]]])

#: One forwarded event in a bundle: (source offset, event time ms, original bytes).
Forwarded = tuple[int, int, bytes]


def bundle(partition: int, watermark_ms: int | None, first_ms: int | None, records: list[Forwarded]) -> bytes:
    """One internal record: ``(src partition, src watermark, src first ts, [(src offset, ts_ms, raw), ...])``.

    Why bundles: faust's per-record cost (~100 µs here) is the bottleneck of
    a worker; forwarding one record per event would pay it twice per event.
    A bundle holds the events of one input batch bound for one internal
    partition, so the second stage pays it once per bundle. Every input
    batch sends a bundle to *every* internal partition, empty or not: it
    carries the source partition's watermark, which the consumer needs to
    merge its sources in event-time order (``stream.state``), and the time of
    the first event it ever forwarded (the stream's start is the earliest).
    """
    return _bundle_enc.encode((partition, watermark_ms, first_ms, records))


def unbundle(value: bytes) -> tuple[int, int | None, int | None, list[Forwarded]]:
    """Inverse of :func:`bundle`.

    :raises msgspec.DecodeError: not a bundle (only workers write these topics).
    """
    return _bundle_dec.decode(value)


__all__ = ["Forwarded", "Stage", "bundle", "cohort_key", "detectors_for", "signature_key", "stages", "unbundle"]
