"""One decision step as the detectors' tests see it."""

from __future__ import annotations

from msgspec import Struct

from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.inventory import Inventory


class Look(Struct, frozen=True):
    """A step's time, the clock's inflation factors at it, the inventory and the clock.

    Every test, explanation and classification of a step reads the same
    four; one argument instead of four keeps each signature to what the
    function is about (a key, a cohort, a host, a test).
    """

    now_ms: int
    g: tuple[float, ...]
    inventory: Inventory
    clock: DecayClock


__all__ = ["Look"]
