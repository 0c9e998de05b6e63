"""hardware_correlation: a crash signature concentrated in hosts with one attribute value.

Keyed by signature, on ``detectors.cohorts``: the signature's units by the
attribute values of their hosts at the crash's time (never a hard-coded
attribute name), at scales from an hour to a month, against each value's
share of the fleet's host-time; Benjamini-Hochberg across every signature and
attribute at once; nested cohorts reduced to the one that explains the
excess, confounded ones reported once with the alias in the notes. A new
association pages; one the signature has always had is a ticket
(``static_association``), and pages later only if it rises.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.detectors.base import Context
from fleetepi.detectors.cases import Case
from fleetepi.detectors.cohorts import CohortCorrelation, CohortVerdict, cohort_correlation_from_config
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.findings import incident_signature, short, span
from fleetepi.detectors.stats import score_of


def cohort_summary(what: str, v: CohortVerdict, tail: str) -> str:
    """``<what> on a=v: ~k units vs ~e expected (risk, CI), n hosts, over <scale>: <tail>``."""
    return (f"{what} on {v.attribute}={v.value}: {v.observed:.3g} cases vs {v.expected:.2g} expected from {v.basis} "
            f"(risk x{v.relative_risk or 0:.1f}, 95% CI {v.lower_ci or 0:.1f}-{v.upper_ci or 0:.1f}), "
            f"{v.hosts} hosts, over ~{span(v.window_s)}: {tail}")


def cohort_fields(v: CohortVerdict) -> dict[str, Any]:
    """The numeric and grading fields of a cohort alert (hardware_correlation and telemetry_cohort)."""
    return {"score": score_of(v.p_value) if v.p_value is not None else 0.0, "p_value": v.p_value,
            "observed": round(v.observed, 6), "expected": round(v.expected, 6), "relative_risk": v.relative_risk,
            "lower_ci": v.lower_ci, "upper_ci": v.upper_ci, "window_s": v.window_s or None,
            "attribute": v.attribute, "value": v.value, "state": v.state, "severity": v.severity,
            "finding": v.finding if v.state == "firing" else None, "notes": list(v.notes)}


class HardwareCorrelation:
    """Fires once per (signature, attribute, value) episode; a ticket once for a static association."""

    name: ClassVar[str] = "hardware_correlation"
    state_version: ClassVar[str] = "hardware_correlation/2"

    def __init__(self, config: DetectorConfig, clock: DecayClock) -> None:
        self.config = config
        self.core = cohort_correlation_from_config(config, clock, config.corr_rate_max_s)

    def fold(self, case: Case, ctx: Context) -> None:
        if case.is_crash and case.unit and case.keys:
            self.core.observe(case.channel, case.host, case.unit, case.ts_ms, case.keys, ctx.clock)

    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        if self.core.start_ms is None or (ctx.start_ms is not None and ctx.start_ms < self.core.start_ms):
            self.core.start_ms = ctx.start_ms
        return [self._alert(v) for v in self.core.decide(now_ms, ctx.inventory, ctx.clock, ctx.spiking, ctx.watched)]

    def _alert(self, v: CohortVerdict) -> Alert:
        sig = v.key
        if v.state == "firing":
            what = "crash lives" if v.severity == "page" else "crash has always been more frequent"
            summary = cohort_summary(what, v, short(sig))
        else:
            summary = f"crash no longer concentrated on {v.attribute}={v.value}: {short(sig)}"
        return Alert(ts=ts_from_ms(v.ts_ms), kind="hardware_correlation", signature=sig, summary=summary,
                     incident=incident_signature(sig), **cohort_fields(v))

    def rebase(self, factors: tuple[float, ...]) -> None:
        self.core.rebase(factors)

    def sweep(self, now_ms: int, ctx: Context) -> None:
        self.core.sweep(now_ms, ctx.clock.g(now_ms))

    def snapshot(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.core)  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.core = msgspec.convert(state, CohortCorrelation)
        self.core.restored()

    def counts(self) -> dict[str, float]:
        return self.core.counts()


__all__ = ["HardwareCorrelation", "cohort_fields", "cohort_summary"]
