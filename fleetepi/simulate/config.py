"""The knobs of a simulated fleet, in one frozen object with documented defaults.

Defaults describe a 2,000-host training fleet over two weeks: about 0.3
crashes per host per day spread over a few hundred signatures with a heavy
tail, a couple of job-wide aborts a day, Xid codes at rates such fleets
report, a thermal reading every 30 minutes and an ECC counter every hour per
host (which is most of the ~2 M events). Everything random is drawn from
``seed``, so a config is a recording.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetepi.simulate.exceptions import SimulationConfigError

#: Outbreak templates, one or two per alert kind (see ``outbreaks.py`` for what each injects).
TEMPLATES: tuple[str, ...] = (
    "signature_spike/existing",
    "signature_spike/new",
    "host_spike/bit_flip",
    "host_spike/bad_memory",
    "hardware_correlation/bios_rack",
    "hardware_correlation/driver",
    "telemetry_spike/xid79_rack",
    "telemetry_spike/ecc_host",
)


@dataclass(frozen=True)
class OutbreakSpec:
    """One outbreak to inject; ``None`` fields are drawn from the seed.

    :param template: one of :data:`TEMPLATES`.
    :param start_day: days after the start of the run (``None``: random after the warm-up).
    :param duration_h: how long new cases keep coming, in hours.
    :param strength: the template's rate knob (cases per hour, or a multiplier for
        ``signature_spike/existing``); ``None`` draws one that is neither trivial nor hopeless.
    """

    template: str
    start_day: float | None = None
    duration_h: float | None = None
    strength: float | None = None

    def __post_init__(self) -> None:
        if self.template not in TEMPLATES:
            raise SimulationConfigError(f"unknown outbreak template {self.template!r}; known: {', '.join(TEMPLATES)}")
        if self.duration_h is not None and self.duration_h <= 0:
            raise SimulationConfigError(f"outbreak duration_h must be > 0, got {self.duration_h}")
        if self.strength is not None and self.strength <= 0:
            raise SimulationConfigError(f"outbreak strength must be > 0, got {self.strength}")


#: One outbreak of every template: every alert kind, twice.
DEFAULT_OUTBREAKS: tuple[OutbreakSpec, ...] = tuple(OutbreakSpec(t) for t in TEMPLATES)


def outbreak_specs(n: int) -> tuple[OutbreakSpec, ...]:
    """``n`` outbreaks cycling through the templates (``0`` means none)."""
    if n < 0:
        raise SimulationConfigError(f"number of outbreaks must be >= 0, got {n}")
    return tuple(OutbreakSpec(TEMPLATES[i % len(TEMPLATES)]) for i in range(n))


@dataclass(frozen=True)
class SimConfig:
    """A simulated fleet. Units are in the names; ``_per_host_day`` rates are means.

    :param hosts: fleet size (>= 20; racks hold ``hosts_per_rack`` hosts).
    :param days: length of the run in days of event time.
    :param seed: everything random derives from it; equal configs give equal events.
    :param start: event time of the first event, RFC 3339 UTC.
    :param outbreaks: labelled outbreaks to inject (the ground truth).
    """

    hosts: int = 2000
    days: float = 14.0
    seed: int = 1
    start: str = "2026-11-01T00:00:00Z"
    outbreaks: tuple[OutbreakSpec, ...] = DEFAULT_OUTBREAKS
    # ---- fleet layout ----
    hosts_per_rack: int = 40
    # ---- background crashes ----
    #: Distinct background signatures (rates follow a Zipf law with lognormal noise).
    signatures: int = 400
    crash_rate_per_host_day: float = 0.3
    #: Exponent of the rank-rate law of signatures (1.0-1.3 in crash-reporting systems).
    zipf_exponent: float = 1.1
    #: Relative amplitude of the daily cycle of crashes and load (0 = flat).
    daily_amplitude: float = 0.4
    #: Gamma shape of the day-to-day rate multiplier per signature (overdispersion; inf = Poisson).
    day_to_day_shape: float = 4.0
    #: Host crash propensity spread (sigma of a lognormal): some hosts run crashier jobs.
    host_propensity_sigma: float = 0.6
    # ---- job bursts (background, not outbreaks) ----
    job_bursts_per_day: float = 2.0
    burst_min_hosts: int = 32
    burst_max_hosts: int = 256
    # ---- telemetry ----
    thermal_interval_s: float = 1800.0
    ecc_interval_s: float = 3600.0
    #: Multiplies every background Xid rate.
    xid_rate_scale: float = 1.0
    # ---- outbreaks ----
    #: Outbreaks start after this much event time (baselines need history), at most 30 % of the run.
    warmup_days: float = 3.0

    def __post_init__(self) -> None:
        if self.hosts < 20:
            raise SimulationConfigError(f"hosts must be >= 20, got {self.hosts}")
        if not 0.1 <= self.days <= 366:
            raise SimulationConfigError(f"days must be between 0.1 and 366, got {self.days}")
        if self.hosts_per_rack < 4:
            raise SimulationConfigError(f"hosts_per_rack must be >= 4, got {self.hosts_per_rack}")
        if self.signatures < 10:
            raise SimulationConfigError(f"signatures must be >= 10, got {self.signatures}")
        if not 1 <= self.burst_min_hosts <= self.burst_max_hosts:
            raise SimulationConfigError("need 1 <= burst_min_hosts <= burst_max_hosts")
        for name in ("crash_rate_per_host_day", "job_bursts_per_day", "xid_rate_scale", "daily_amplitude"):
            if getattr(self, name) < 0:
                raise SimulationConfigError(f"{name} must be >= 0")
        if self.daily_amplitude >= 1:
            raise SimulationConfigError("daily_amplitude must be < 1 (rates stay positive)")
        if self.thermal_interval_s < 10 or self.ecc_interval_s < 10:
            raise SimulationConfigError("telemetry intervals must be >= 10 s")
        self.start_ms  # noqa: B018  (validates the timestamp now, not in the loop)
        for o in self.outbreaks:
            if not isinstance(o, OutbreakSpec):
                raise SimulationConfigError(f"outbreaks must be OutbreakSpec, got {type(o).__name__}")
            if o.start_day is not None and not 0 <= o.start_day < self.days:
                raise SimulationConfigError(f"outbreak start_day {o.start_day} outside the run (0..{self.days})")

    @property
    def start_ms(self) -> int:
        try:
            dt = datetime.fromisoformat(self.start.replace("Z", "+00:00"))
        except ValueError as exc:
            raise SimulationConfigError(f"start is not RFC 3339: {self.start!r} ({exc})") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return self.start_ms + int(self.days * 86_400_000)

    def replace(self, **changes: Any) -> SimConfig:
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as exc:
            raise SimulationConfigError(str(exc)) from None


__all__ = ["DEFAULT_OUTBREAKS", "TEMPLATES", "OutbreakSpec", "SimConfig", "outbreak_specs"]
