"""What every detector is: a reducer over folded cases that decides at step boundaries.

The engine buffers admitted events and, at each boundary of the step grid,
folds those old enough (``settle_s``) in canonical order as :class:`Case`s
(``detectors.cases``), then asks every detector to ``decide``. A detector's
state is typed (msgspec Structs), snapshots as plain data and restores by
type, so a stream worker's checkpoint resumes exactly.

Decisions use the inventory and the decayed-count clock shared by the
engine (:class:`Context`): every announced host is a peer and a
denominator, and every count decays on one reference time.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from fleetepi.contract import Alert
from fleetepi.detectors.cases import Case
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.inventory import Inventory


@dataclass
class Context:
    """What the engine shares with its detectors."""

    config: DetectorConfig
    inventory: Inventory
    clock: DecayClock
    #: Where the stream starts (the first host announcement): warm-up counts from it.
    start_ms: int | None = None
    #: Keys whose fleet-wide rate is above its baseline now (signature_spike's firing signatures,
    #: set as it decides, before hardware_correlation): where such a key lives is asked with more
    #: of the false-discovery budget (``CohortCorrelation.decide``).
    spiking: AbstractSet[str] = frozenset()
    #: Keys rising fleet-wide, short of firing (signature_spike's watch, ``corr_watch_alpha``): their
    #: cohorts get a smaller share of the budget than the spiking keys'.
    watched: AbstractSet[str] = frozenset()
    #: Is (channel, host) ticketed as a chronic reporter (telemetry_host's live state, set as it folds)?
    #: Its units then leave the cohort tests of the channel, as they left its peers' sums.
    chronic: Callable[[str, str], bool] = field(default=lambda channel, host: False)
    #: (channel, host) pairs ticketed chronic at this step: the cohort tests forget what they counted of them.
    chronic_new: list[tuple[str, str]] = field(default_factory=list)
    #: Is the host ticketed chronic on any channel (telemetry_host's live state; it decides before
    #: host_spike)? host_spike then leaves a chronic crash count that is mostly hardware errors to it.
    chronic_host: Callable[[str], bool] = field(default=lambda host: False)


class Detector(Protocol):
    #: Registry name (``Engine(detectors=[...])``, metrics, state keys).
    name: ClassVar[str]
    #: Changes whenever the meaning of the state changes, so old checkpoints are not read.
    state_version: ClassVar[str]

    def fold(self, case: Case, ctx: Context) -> None:
        """Take one case into the state (no decision yet)."""

    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        """Decide at step boundary ``now_ms``, every case dated before ``horizon_ms`` folded."""

    def rebase(self, factors: tuple[float, ...]) -> None:
        """The clock's reference moved: multiply every decayed count by its scale's factor."""

    def sweep(self, now_ms: int, ctx: Context) -> None:
        """Forget what is idle past its time (called hourly)."""

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data (JSON/msgpack-able)."""

    def restore(self, state: dict[str, Any]) -> None:
        """Replace the state by a snapshot of the same ``state_version``."""

    def counts(self) -> dict[str, float]:
        """Total incidence per key seen so far (recovery tests compare these)."""
