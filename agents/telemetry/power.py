"""GPU power draw against its enforced limit: crossings with hysteresis, and a slow sample.

The power twin of :mod:`fleetepi.agents.telemetry.thermal`. A reading that
rises to ``high_fraction`` of the GPU's enforced power limit is a ``power``
event at once (value: the reading, in watts); it clears only when the draw
falls ``hysteresis_fraction`` of the limit below that line, so a GPU that
sits on its cap (a busy H100 draws 698-714 W against its 700 W limit, see
``tests/agents/data/nvml/h100-load.json``) does not flap. Otherwise one
sample per GPU every ``sample_interval_s`` keeps a slow power series, which
is what makes a rack-wide surge (a deadlocked job busy-waiting every GPU at
full power) visible to the detectors as a ``telemetry_spike`` on the rack.

A change of the enforced limit itself (an operator or a facility power
controller capping the GPUs) is an event too: it explains later readings.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetepi.contract import Telemetry, ts_from_ms


@dataclass(frozen=True)
class PowerThresholds:
    """Fractions of the enforced power limit."""

    high_fraction: float = 0.95
    hysteresis_fraction: float = 0.05

    def high(self, power_w: float, limit_w: float, was_high: bool) -> bool:
        line = self.high_fraction - (self.hysteresis_fraction if was_high else 0.0)
        return limit_w > 0 and power_w >= line * limit_w


class PowerTracker:
    """Per-GPU power level, enforced limit and last-sample time.

    :param host: host name put on the events.
    :param sample_interval_s: seconds between periodic samples per GPU (0 = none).
    :param thresholds: the crossing line and its hysteresis, as fractions of the limit.
    """

    def __init__(self, host: str, sample_interval_s: float = 300.0, thresholds: PowerThresholds | None = None) -> None:
        self.host = host
        self.sample_interval_ms = int(sample_interval_s * 1000)
        self.thresholds = thresholds or PowerThresholds()
        self._high: dict[str, bool] = {}
        self._limit_w: dict[str, float] = {}
        self._last_sample: dict[str, int] = {}

    def update(self, device: str, power_w: float, limit_w: float | None, now_ms: int) -> list[Telemetry]:
        """Events for one reading (``limit_w`` None: the GPU does not say; no crossings then)."""
        ts = ts_from_ms(now_ms)
        out: list[Telemetry] = []
        if limit_w is not None:
            before = self._limit_w.get(device)
            self._limit_w[device] = limit_w
            if before is not None and abs(before - limit_w) >= 1.0:
                out.append(Telemetry(ts=ts, host=self.host, kind="power", device=device,
                                     message=f"enforced power limit changed from {before:.0f} W to {limit_w:.0f} W",
                                     severity="info"))
            was = self._high.get(device, False)
            now_high = self.thresholds.high(power_w, limit_w, was)
            self._high[device] = now_high
            if now_high != was:
                pct = 100 * self.thresholds.high_fraction
                what = (f"power draw at {pct:.0f} % of the enforced limit or above" if now_high
                        else f"power draw back below {pct:.0f} % of the enforced limit")
                # count: the rise is one crossing (what the detectors count), the fall none; a reading
                # without a count would weigh nothing there, like a sample
                out.append(Telemetry(ts=ts, host=self.host, kind="power", device=device, value=round(power_w, 1),
                                     message=f"{what} ({power_w:.0f} W, limit {limit_w:.0f} W)",
                                     severity="warning" if now_high else "info", count=1 if now_high else 0))
                self._last_sample[device] = now_ms
                return out
        last = self._last_sample.get(device)
        if self.sample_interval_ms > 0 and (last is None or now_ms - last >= self.sample_interval_ms):
            self._last_sample[device] = now_ms
            out.append(Telemetry(ts=ts, host=self.host, kind="power", device=device, value=round(power_w, 1),
                                 message="power sample"))
        return out


__all__ = ["PowerThresholds", "PowerTracker"]
