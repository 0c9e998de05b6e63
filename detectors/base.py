"""What every detector is: a keyed, event-time reducer with plain-data state.

A detector sees the events it ``wants``, updates its state in ``update``
(amortized O(1): counters in event-time ring buffers, a precomputed firing
threshold per key) and returns the alerts that event caused. ``advance`` lets
event time pass without events (to resolve alerts and expire state).
``snapshot``/``restore`` round-trip the whole state as plain data, so the
stream workers can checkpoint it with their offsets and recover exactly.

Every decision about a key depends only on that key's events, the inventory
and the configuration, so a detector can be split by its ``route`` key across
Kafka partitions and still give the alerts of the single-process run.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from fleetepi.contract import Alert, Crash, Telemetry
from fleetepi.detectors.inventory import Inventory


class Detector(Protocol):
    #: Registry name (``Engine(detectors=[...])``, metrics, state keys).
    name: ClassVar[str]
    #: Changes whenever the meaning of the state changes, so old checkpoints are not read.
    state_version: ClassVar[str]

    def route(self, event: Crash | Telemetry) -> str | None:
        """Partition key of this event for this detector, or None if it does not want it."""

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        """Fold one event in; return alerts it made fire."""

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Alert]:
        """Event time reached ``watermark_ms``: resolve and expire."""

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data (JSON/msgpack-able)."""

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the state by a snapshot of the same ``state_version``."""

    def counts(self) -> dict[str, float]:
        """Total incidence per key seen so far (recovery tests compare these)."""
