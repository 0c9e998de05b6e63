"""signature_spike: a crash signature's fleet-wide incidence rose above its baseline.

Keyed by signature. It counts *units* (``detectors.units``: a job once, a
host once an hour, bursts capped), so a job-wide abort is one incident and a
crash-looping pod one unit an hour, in windows of an hour, four hours and a
day, against the signature's own learned hour-of-day rate and dispersion
(``detectors.rate``), and over three and seven days (a host once a day
there), where a deploy that tripled a signature for good shows when no
single day does. A signature never seen before gets the learned prior of
new signatures. All numbers are in ``DetectorConfig`` (``sig_*``).

A signature rising short of firing (a window at ``corr_watch_alpha``) is
on watch: hardware_correlation, which decides next, asks where it lives
with more of its false-discovery budget (``Context.watched``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.detectors.base import Context
from fleetepi.detectors.cases import Case
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.findings import PAGE, incident_signature, short, span
from fleetepi.detectors.rate import RateSpike, RateVerdict, rate_spike_from_config
from fleetepi.detectors.stats import score_of


class SignatureSpike:
    """Fires once per episode when a signature's windowed units exceed its learned baseline."""

    name: ClassVar[str] = "signature_spike"
    state_version: ClassVar[str] = "signature_spike/3"

    def __init__(self, config: DetectorConfig) -> None:
        self.config = config
        # on watch: a signature rising fleet-wide, short of firing, whose cohorts hardware_correlation asks
        # with more of its budget
        self.core = rate_spike_from_config(config, watch_alpha=config.corr_watch_alpha if config.corr_watch_share else 0.0)

    def fold(self, case: Case, ctx: Context) -> None:
        if case.is_crash and case.unit:
            self.core.observe(case.channel, case.unit, case.ts_ms, case.host)

    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        if self.core.start_ms is None or (ctx.start_ms is not None and ctx.start_ms < self.core.start_ms):
            self.core.start_ms = ctx.start_ms
        out = [self._alert(v) for v in self.core.decide(horizon_ms, now_ms)]
        ctx.spiking = self.core.firing  # hardware_correlation decides next, on this step's firing set
        ctx.watched = self.core.watched
        return out

    def _alert(self, v: RateVerdict) -> Alert:
        sig = v.key
        if v.state == "firing":
            ratio = v.observed / v.expected if v.expected > 0 else float("inf")
            finding = "new_signature" if v.new_key else "signature_spike"
            what = "new crash signature arriving" if v.new_key else "crash signature spiking"
            summary = (f"{what}: {v.observed:g} incidents (distinct jobs/hosts) in the last {span(v.window_s)} vs "
                       f"{v.expected:.2g} expected ({ratio:.1f}x): {short(sig)}")
        else:
            finding, summary = "signature_spike", f"crash signature back to baseline: {short(sig)}"
        return Alert(ts=ts_from_ms(v.ts_ms), kind="signature_spike", state=v.state, signature=sig,
                     score=score_of(v.p_value) if v.p_value is not None else 0.0, p_value=v.p_value,
                     observed=v.observed, expected=round(v.expected, 6),
                     relative_risk=(v.observed / v.expected if v.expected > 0 else None), window_s=v.window_s,
                     summary=summary, notes=list(v.notes), severity=PAGE, finding=finding,
                     incident=incident_signature(sig))

    def rebase(self, factors: tuple[float, ...]) -> None:
        pass  # windows, not decayed counts

    def sweep(self, now_ms: int, ctx: Context) -> None:
        self.core.sweep(now_ms)

    def snapshot(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.core)  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.core = msgspec.convert(state, RateSpike)

    def counts(self) -> dict[str, float]:
        return self.core.counts()


__all__ = ["SignatureSpike"]
