"""Temperature thresholds with hysteresis, and a slow periodic sample.

Shared by hwmon and NVML. A reading that crosses a threshold is an event at
once (upwards at the threshold, downwards only ``hysteresis_c`` below it, so
a sensor sitting on the line does not flap); otherwise one sample per device
every ``sample_interval_s`` keeps a slow temperature series for cohort
comparisons without flooding the topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetepi.contract import Telemetry, ts_from_ms

LEVELS = ("normal", "warning", "critical")


@dataclass(frozen=True)
class Thresholds:
    """Temperatures in degrees Celsius; None = no such threshold."""

    warn_c: float | None = None
    crit_c: float | None = None
    hysteresis_c: float = 2.0

    def level(self, temp_c: float, previous: str) -> str:
        """Level for ``temp_c`` given the previous level (hysteresis on the way down)."""
        def above(thr: float | None, was_above: bool) -> bool:
            if thr is None:
                return False
            return temp_c >= (thr - self.hysteresis_c if was_above else thr)

        prev = LEVELS.index(previous)
        if above(self.crit_c, prev >= 2):
            return "critical"
        if above(self.warn_c, prev >= 1):
            return "warning"
        return "normal"


class ThermalTracker:
    """Per-device level and last-sample time.

    :param host: host name put on the events.
    :param sample_interval_s: seconds between periodic samples per device (0 = none).
    """

    def __init__(self, host: str, sample_interval_s: float = 300.0) -> None:
        self.host = host
        self.sample_interval_ms = int(sample_interval_s * 1000)
        self._level: dict[str, str] = {}
        self._last_sample: dict[str, int] = {}

    def update(self, device: str, temp_c: float, thresholds: Thresholds, now_ms: int) -> list[Telemetry]:
        prev = self._level.get(device, "normal")
        level = thresholds.level(temp_c, prev)
        self._level[device] = level
        ts = ts_from_ms(now_ms)
        out: list[Telemetry] = []
        if level != prev:
            thr = thresholds.crit_c if level == "critical" or prev == "critical" else thresholds.warn_c
            rising = LEVELS.index(level) > LEVELS.index(prev)
            what = f"above {level} threshold" if rising else f"back to {level} from {prev}"
            out.append(Telemetry(
                ts=ts, host=self.host, kind="thermal", device=device, value=round(temp_c, 1),
                message=f"temperature {what} ({temp_c:.0f} C, threshold {thr:g} C)",
                severity=level if rising else "info",
            ))
            self._last_sample[device] = now_ms
            return out
        last = self._last_sample.get(device)
        if self.sample_interval_ms > 0 and (last is None or now_ms - last >= self.sample_interval_ms):
            self._last_sample[device] = now_ms
            out.append(Telemetry(ts=ts, host=self.host, kind="thermal", device=device,
                                 value=round(temp_c, 1), message="temperature sample"))
        return out


__all__ = ["LEVELS", "ThermalTracker", "Thresholds"]
