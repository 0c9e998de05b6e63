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

A forwarded record is framed as ``b"<src partition>:<src offset>\\n" +
original bytes``: the source position lets the consumer drop the duplicates
that a re-processed input batch forwards again (after a crash or a
rebalance), so forwarding is effectively exactly-once for the state.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    :param framed: records carry the ``partition:offset`` source frame (internal topics).
    :param forward_topic: where accepted events are forwarded, if anywhere.
    """

    name: str
    topic: str
    event_type: type
    detectors: tuple[str, ...]
    framed: bool = False
    forward_topic: str | None = None

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
        Stage("signature", n.by_signature, Crash, detectors_for("signature"), framed=True),
        Stage("cohort", n.by_cohort, Telemetry, detectors_for("telemetry"), framed=True),
    )


def frame(partition: int, offset: int, raw: bytes) -> bytes:
    """Prefix ``raw`` with its source position."""
    return b"%d:%d\n" % (partition, offset) + raw


def unframe(value: bytes) -> tuple[int, int, bytes]:
    """``(src partition, src offset, original bytes)`` of a forwarded record.

    :raises ValueError: not a framed record (only this worker writes these topics).
    """
    nl = value.index(b"\n")
    head = value[:nl]
    colon = head.index(b":")
    return int(head[:colon]), int(head[colon + 1 :]), value[nl + 1 :]


__all__ = ["Stage", "cohort_key", "detectors_for", "frame", "signature_key", "stages", "unframe"]
