"""Glue shared by the detector classes: the delegation to their counting engine, and alert numbers.

A detector class is a thin adapter (what it routes, what it counts, how its
alert reads); these helpers keep the adapters from repeating each other.
"""

from __future__ import annotations

from typing import Any

from fleetepi.contract import Alert
from fleetepi.detectors.inventory import Inventory, stream_start
from fleetepi.detectors.stats import score_of


class CoreDetector:
    """A detector whose whole state is one engine in ``self.core``."""

    core: Any

    def begin(self, inventory: Inventory, ts_ms: int) -> None:
        """Start the engine's clock at the stream's start, the first time it sees an event."""
        if self.core.start_ms is None:
            self.core.start(stream_start(inventory, ts_ms))

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Alert]:
        return self.core.advance(watermark_ms, inventory)  # type: ignore[no-any-return]

    def snapshot(self) -> dict[str, Any]:
        return self.core.dump()  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.core.load(state)

    def counts(self) -> dict[str, float]:
        return self.core.counts()  # type: ignore[no-any-return]


def cohort_numbers(p: float | None, k: int, d: int, n1: int, n_all: int, rr: float | None, lo: float | None,
                   hi: float | None) -> dict[str, Any]:
    """The numeric fields of a cohort alert (hardware_correlation and telemetry_cohort)."""
    return {"score": score_of(p) if p is not None else 0.0, "p_value": p, "observed": float(k),
            "expected": round(d * n1 / n_all, 6) if n_all else None, "relative_risk": rr, "lower_ci": lo,
            "upper_ci": hi}


def cohort_summary(what: str, a: str, v: str, k: int, d: int, n1: int, n_all: int, rr: float | None,
                   lo: float | None, hi: float | None, tail: str) -> str:
    """``<what> on a=v: k of d affected hosts vs share of the fleet (risk, CI): <tail>``."""
    share = n1 / n_all if n_all else 0.0
    return (f"{what} on {a}={v}: {k} of {d} affected hosts vs {share:.0%} of the fleet "
            f"(risk x{rr or 0:.1f}, 95% CI {lo or 0:.1f}-{hi or 0:.1f}): {tail}")


__all__ = ["CoreDetector", "cohort_numbers", "cohort_summary"]
