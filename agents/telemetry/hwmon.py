"""hwmon temperatures (``/sys/class/hwmon/hwmon*/temp*_input``): CPUs, DIMMs, NICs, NVMe.

Values are millidegrees Celsius; ``temp*_max`` and ``temp*_crit`` give the
thresholds the hardware itself declares, overridable in config. The sysfs
root is a constructor parameter so tests read a fixture tree.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.thermal import ThermalTracker, Thresholds
from fleetepi.contract import Telemetry

log = logging.getLogger(__name__)
_TEMP_INPUT = re.compile(r"^temp(\d+)_input$")


def read_int(path: Path) -> int | None:
    """An integer sysfs attribute, or None when absent or unreadable (EIO from a flaky sensor)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_str(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


@dataclass(frozen=True)
class Sensor:
    device: str
    input: Path
    thresholds: Thresholds


def discover(root: Path, warn_c: float | None, crit_c: float | None, hysteresis_c: float) -> list[Sensor]:
    sensors: list[Sensor] = []
    seen: set[str] = set()
    for hw in sorted(root.glob("hwmon*")):
        name = read_str(hw / "name") or hw.name
        for f in sorted(hw.glob("temp*_input")):
            m = _TEMP_INPUT.match(f.name)
            if not m:
                continue
            idx = m.group(1)
            label = read_str(hw / f"temp{idx}_label") or f"temp{idx}"
            device = f"{name}/{label}"
            if device in seen:
                device = f"{device}@{hw.name}"
            seen.add(device)
            mx, cr = read_int(hw / f"temp{idx}_max"), read_int(hw / f"temp{idx}_crit")
            thr = Thresholds(
                warn_c=warn_c if warn_c is not None else (mx / 1000 if mx else None),
                crit_c=crit_c if crit_c is not None else (cr / 1000 if cr else None),
                hysteresis_c=hysteresis_c,
            )
            sensors.append(Sensor(device, f, thr))
    return sensors


class HwmonOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    root: str = "/sys/class/hwmon"
    sample_interval_s: Annotated[float, Meta(ge=0)] = 300.0
    warn_c: float | None = None
    crit_c: float | None = None
    hysteresis_c: Annotated[float, Meta(ge=0)] = 2.0


@register("hwmon", HwmonOptions)
class HwmonSource:
    """Temperature crossings and slow samples from hwmon sysfs.

    :param root: hwmon class directory (``/sys/class/hwmon``).
    :param sample_interval_s: periodic sample per sensor (0 = crossings only).
    :param warn_c: override every sensor's warning threshold (°C).
    :param crit_c: override every sensor's critical threshold (°C).
    :param hysteresis_c: how far below a threshold a sensor must fall to clear it.
    """

    kind: ClassVar[str] = "hwmon"

    def __init__(self, host: str, root: str = "/sys/class/hwmon", sample_interval_s: float = 300.0,
                 warn_c: float | None = None, crit_c: float | None = None, hysteresis_c: float = 2.0) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SourceUnavailable(f"no hwmon on this host ({self.root} missing)")
        self.sensors = discover(self.root, warn_c, crit_c, hysteresis_c)
        if not self.sensors:
            raise SourceUnavailable(f"no hwmon temperature sensors under {self.root}")
        self.tracker = ThermalTracker(host, sample_interval_s)

    @classmethod
    def from_options(cls, options: HwmonOptions, ctx: SourceContext) -> HwmonSource:
        return cls(ctx.host, options.root, options.sample_interval_s, options.warn_c, options.crit_c, options.hysteresis_c)

    def poll(self, now_ms: int) -> Iterable[Telemetry]:
        out: list[Telemetry] = []
        for s in self.sensors:
            milli = read_int(s.input)
            if milli is None:
                continue
            out.extend(self.tracker.update(s.device, milli / 1000.0, s.thresholds, now_ms))
        return out

    def close(self) -> None:
        pass


__all__ = ["HwmonSource", "Sensor", "discover", "read_int", "read_str"]
