"""hardware_correlation: a crash signature concentrated in hosts with one attribute value.

Keyed by signature (partition key ``signature``), on the machinery of
``fleetepi.detectors.cohorts``: distinct hosts (a job counts once), every attribute of
the announcements (never a hard-coded name), the value in force at the
crash's time, binomial test against the cohort's share of the fleet,
Benjamini-Hochberg over the signature's attribute values, relative risk with
its interval, nested cohorts reduced to the most specific one that explains
the excess, confounded ones reported once with the alias in the notes.
"""

from __future__ import annotations

from typing import ClassVar

from fleetepi.contract import Alert, Crash, Telemetry, ts_from_ms
from fleetepi.detectors.cohorts import Pair, cohort_correlation_from_config
from fleetepi.detectors.common import CoreDetector, cohort_numbers, cohort_summary
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.signature_spike import _short


class HardwareCorrelation(CoreDetector):
    """Fires once per (signature, attribute, value) episode."""

    name: ClassVar[str] = "hardware_correlation"
    state_version: ClassVar[str] = "hardware_correlation/1"
    event_types: ClassVar[tuple[type, ...]] = (Crash,)

    def __init__(self, config: DetectorConfig) -> None:
        self.config = config
        self.core = cohort_correlation_from_config(config, self._alert)

    def route(self, event: Crash | Telemetry) -> str | None:
        return event.signature if type(event) is Crash else None

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        self.begin(inventory, ts_ms)
        return self.core.observe(event.signature, event.host, event.job, ts_ms, inventory)  # type: ignore[union-attr]

    def _alert(self, key: str, kv: Pair, state: str, ts_ms: int, p: float | None, k: int, d: int, n1: int,
               n_all: int, rr: float | None, lo: float | None, hi: float | None, notes: list[str]) -> Alert:
        a, v = kv
        if state == "firing":
            summary = cohort_summary("crash lives", a, v, k, d, n1, n_all, rr, lo, hi, _short(key))
        else:
            summary = f"crash no longer concentrated on {a}={v}: {_short(key)}"
        return Alert(ts=ts_from_ms(ts_ms), kind="hardware_correlation", state=state,  # type: ignore[arg-type]
                     signature=key, attribute=a, value=v, window_s=self.core.window_s, summary=summary,
                     notes=notes, **cohort_numbers(p, k, d, n1, n_all, rr, lo, hi))


__all__ = ["HardwareCorrelation"]
