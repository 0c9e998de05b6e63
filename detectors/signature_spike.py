"""signature_spike: a crash signature's fleet-wide incidence rose above its baseline.

Keyed by signature (partition key ``signature``). A unit is a *source*: the
crash's job if it has one, else its host, counted once per window, so a job
burst (one job dying on 64 hosts at once, the commonest noise of training
clusters) weighs like one incident. The baseline is the signature's own
hour-of-day rate, learned from the stream (``DailyBaseline``); the count test
is a negative binomial (see ``fleetepi.detectors.stats``). All numbers are in
``DetectorConfig`` (``sig_*`` and the shared settings).
"""

from __future__ import annotations

from typing import ClassVar

from fleetepi.contract import Alert, Crash, Telemetry, ts_from_ms
from fleetepi.detectors.common import CoreDetector
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.rate import rate_spike_from_config
from fleetepi.detectors.stats import score_of


def _short(sig: str, n: int = 90) -> str:
    return sig if len(sig) <= n else sig[: n - 1] + "…"


class SignatureSpike(CoreDetector):
    """Fires once per episode when a signature's windowed units exceed its learned baseline."""

    name: ClassVar[str] = "signature_spike"
    state_version: ClassVar[str] = "signature_spike/1"
    #: The engine calls ``route`` only for these event types.
    event_types: ClassVar[tuple[type, ...]] = (Crash,)

    def __init__(self, config: DetectorConfig) -> None:
        c = config
        self.config = c
        self.core = rate_spike_from_config(c, windows_s=c.sig_windows_s, alpha=c.sig_alpha,
                                           resolve_alpha=c.sig_resolve_alpha, min_units=c.sig_min_units,
                                           min_ratio=c.sig_min_ratio, make_alert=self._alert)

    def route(self, event: Crash | Telemetry) -> str | None:
        return event.signature if type(event) is Crash else None

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        self.begin(inventory, ts_ms)
        job = event.job  # type: ignore[union-attr]
        source = "j:" + job if job else "h:" + event.host
        return self.core.observe(event.signature, source, 1.0, ts_ms)  # type: ignore[union-attr]

    def _alert(self, key: str, state: str, ts_ms: int, p: float | None, obs: float, exp: float,
               notes: list[str], w: float) -> Alert:
        if state == "firing":
            ratio = obs / exp if exp > 0 else float("inf")
            summary = (f"crash signature spiking: {obs:g} incidents (distinct jobs/hosts) in the last "
                       f"{w / 60:g} min vs {exp:.2g} expected ({ratio:.1f}x): {_short(key)}")
        else:
            summary = f"crash signature back to baseline: {_short(key)}"
        return Alert(ts=ts_from_ms(ts_ms), kind="signature_spike", state=state,  # type: ignore[arg-type]
                     signature=key, score=score_of(p) if p is not None else 0.0, p_value=p,
                     observed=obs, expected=round(exp, 6), relative_risk=(obs / exp if exp > 0 else None),
                     window_s=w, summary=summary, notes=notes)


__all__ = ["SignatureSpike"]
