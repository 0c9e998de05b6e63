"""The knobs of a simulated fleet, in one frozen object with documented defaults.

Defaults describe a 2,000-host training fleet over two weeks: about 0.3
crashes per host per day spread over a few hundred signatures with a heavy
tail, a couple of job-wide aborts a day, Xid codes at rates such fleets
report, a thermal reading every 30 minutes and an ECC counter every hour per
host (which is most of the ~2 M events). Everything random is drawn from
``seed``, so a config is a recording.

The defaults are the ``classic`` preset, byte for byte: every knob added
since (fleet structure, benign phenomena, telemetry cadence) defaults to
"off" and draws nothing from the generator when off, so a classic recording
made before them is reproduced exactly. Other fleets are presets
(``presets.py``), not other defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetepi.simulate.exceptions import SimulationConfigError

#: The first simulator's templates, one or two per alert kind: the ``classic`` preset's outbreaks.
CLASSIC_TEMPLATES: tuple[str, ...] = (
    "signature_spike/existing",
    "signature_spike/new",
    "host_spike/bit_flip",
    "host_spike/bad_memory",
    "hardware_correlation/bios_rack",
    "hardware_correlation/driver",
    "telemetry_spike/xid79_rack",
    "telemetry_spike/ecc_host",
)
#: Templates added for fleets unlike the classic one (issue 9: what the first detectors missed).
EXTENDED_TEMPLATES: tuple[str, ...] = (
    "hardware_correlation/rack_existing",
    "hardware_correlation/large_cohort",
    "hardware_correlation/new_driver_sig",
    "hardware_correlation/rising_static",
    "hardware_correlation/wearout",
    "telemetry_spike/wearout",
    "host_spike/sick_pcie",
    "signature_spike/deploy_regression",
    "signature_spike/deadlock_job",
)
#: Every outbreak template (see ``outbreaks.py`` for what each injects).
TEMPLATES: tuple[str, ...] = CLASSIC_TEMPLATES + EXTENDED_TEMPLATES
#: Canonical attribute keys the fleet can carry; presets rename them (``attribute_names``).
ATTRIBUTE_KEYS: tuple[str, ...] = ("gpu_model", "driver", "bios", "kernel", "rack", "datacenter", "sku", "cluster",
                                   "node_pool", "pdu", "switch", "nic_firmware", "cuda")
#: Attributes every preset keeps (the rack is what rack-confined outbreaks are named by).
REQUIRED_ATTRIBUTES: tuple[str, ...] = ("rack", "gpu_model", "driver")


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


#: One outbreak of every classic template: every alert kind, twice.
DEFAULT_OUTBREAKS: tuple[OutbreakSpec, ...] = tuple(OutbreakSpec(t) for t in CLASSIC_TEMPLATES)


def outbreak_specs(n: int, templates: tuple[str, ...] = CLASSIC_TEMPLATES) -> tuple[OutbreakSpec, ...]:
    """``n`` outbreaks cycling through ``templates`` (``0`` means none)."""
    if n < 0:
        raise SimulationConfigError(f"number of outbreaks must be >= 0, got {n}")
    if not templates:
        raise SimulationConfigError("no templates to cycle through")
    return tuple(OutbreakSpec(templates[i % len(templates)]) for i in range(n))


@dataclass(frozen=True)
class SimConfig:
    """A simulated fleet. Units are in the names; ``_per_host_day`` rates are means.

    :param hosts: fleet size (>= 20; racks hold ``hosts_per_rack`` hosts).
    :param days: length of the run in days of event time.
    :param seed: everything random derives from it; equal configs give equal events.
    :param start: event time of the first event, RFC 3339 UTC.
    :param outbreaks: labelled outbreaks to inject (the ground truth).
    :param preset: name of the preset this config came from (recorded in the truth; draws nothing).
    """

    hosts: int = 2000
    days: float = 14.0
    seed: int = 1
    start: str = "2026-11-01T00:00:00Z"
    outbreaks: tuple[OutbreakSpec, ...] = DEFAULT_OUTBREAKS
    preset: str = "classic"
    # ---- fleet layout ----
    hosts_per_rack: int = 40
    #: Share of the racks in each datacenter (racks fill datacenters in blocks, the first the largest).
    datacenter_shares: tuple[float, ...] = (0.5, 0.3, 0.2)
    #: GPU models and their share of the racks (one model per rack).
    gpu_mix: tuple[tuple[str, float], ...] = (("H100-SXM5-80GB", 0.6), ("A100-SXM4-80GB", 0.3),
                                              ("H200-SXM5-141GB", 0.1))
    #: The model that gets the new driver mid-run (the others keep theirs: driver and model are confounded).
    driver_rollout_model: str = "H100-SXM5-80GB"
    #: Start and end of the driver and BIOS roll-outs, as fractions of the run.
    driver_rollout: tuple[float, float] = (0.25, 0.45)
    bios_rollout: tuple[float, float] = (0.1, 0.5)
    #: Share of hosts that get a new kernel, host by host, during ``kernel_rollout`` (0: no kernel roll-out).
    kernel_rollout_share: float = 0.0
    kernel_rollout: tuple[float, float] = (0.3, 0.7)
    #: Attributes beyond the classic eight (of node_pool, pdu, switch, nic_firmware, cuda).
    extra_attributes: tuple[str, ...] = ()
    #: Canonical key -> the key hosts announce (``(("bios", "firmware"),)``): detectors must not rely on names.
    attribute_names: tuple[tuple[str, str], ...] = ()
    #: Canonical keys this fleet does not report at all.
    dropped_attributes: tuple[str, ...] = ()
    #: Share of hosts that leave out each of ``optional_attributes`` (inventory gaps).
    missing_attribute_share: float = 0.0
    optional_attributes: tuple[str, ...] = ("bios", "kernel", "sku", "pdu", "switch", "nic_firmware", "node_pool")
    # ---- background crashes ----
    #: Distinct background signatures (rates follow a Zipf law with lognormal noise).
    signatures: int = 400
    crash_rate_per_host_day: float = 0.3
    #: Exponent of the rank-rate law of signatures (1.0-1.3 in crash-reporting systems).
    zipf_exponent: float = 1.1
    #: Relative amplitude of the daily cycle of crashes and load (0 = flat).
    daily_amplitude: float = 0.4
    #: Load on Saturdays and Sundays (UTC) as a share of a weekday's (1 = no weekly cycle): crashes, faults and
    #: temperatures follow it, and Monday morning brings the jobs back.
    weekend_load: float = 1.0
    #: Gamma shape of the day-to-day rate multiplier per signature (overdispersion; inf = Poisson).
    day_to_day_shape: float = 4.0
    #: Host crash propensity spread (sigma of a lognormal): some hosts run crashier jobs.
    host_propensity_sigma: float = 0.6
    #: Share of background crashes that carry a ``job`` (the rest: daemons, interactive work, no scheduler).
    job_share: float = 1.0
    # ---- job bursts (background, not outbreaks) ----
    job_bursts_per_day: float = 2.0
    burst_min_hosts: int = 32
    burst_max_hosts: int = 256
    #: Share of job-wide aborts whose crashes carry the ``job`` field.
    burst_job_share: float = 1.0
    # ---- benign phenomena (labelled in the truth; none is an outbreak) ----
    #: Pods in CrashLoopBackOff, per 1,000 hosts per day: one signature restarting on one host for hours.
    crash_loops_per_1k_host_day: float = 0.0
    #: Range of a crash loop's length, hours (log-uniform).
    crash_loop_hours: tuple[float, float] = (2.0, 12.0)
    #: Share of hosts with a chronic corrected-ECC rate from day one (20-300 errors/h on one GPU).
    chronic_ecc_share: float = 0.0
    #: Share of hosts with a GPU re-reporting one Xid (63/64/92/94) every 1-6 h from day one.
    chronic_xid_share: float = 0.0
    #: Signatures 2-4x more frequent on one cohort from day one (workload placement).
    static_associations: int = 0
    #: Share of racks rebooted in planned maintenance during the run (one rack at a time, 2 h each).
    maintenance_rack_share: float = 0.0
    #: Whether the reboots are announced (host attribute ``maintenance=planned-reboot``).
    maintenance_announced: bool = True
    # ---- telemetry ----
    thermal_interval_s: float = 1800.0
    #: ``interval``: a reading every interval; ``on_change``: only when the 5 degree band changes,
    #: plus a heartbeat every ``heartbeat_s``.
    thermal_mode: str = "interval"
    heartbeat_s: float = 6 * 3600.0
    ecc_interval_s: float = 3600.0
    #: Whether ECC counter deltas of zero are sent (False: only when errors happened).
    ecc_zero_deltas: bool = True
    #: GPU power readings (watts) every interval; 0: none.
    power_interval_s: float = 0.0
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
        if not 0.0 < self.weekend_load <= 1.0:
            raise SimulationConfigError(f"weekend_load must be in (0, 1], got {self.weekend_load}")
        if self.daily_amplitude >= 1:
            raise SimulationConfigError("daily_amplitude must be < 1 (rates stay positive)")
        if self.thermal_interval_s < 10 or self.ecc_interval_s < 10:
            raise SimulationConfigError("telemetry intervals must be >= 10 s")
        if self.power_interval_s and self.power_interval_s < 10:
            raise SimulationConfigError("power_interval_s must be 0 (none) or >= 10 s")
        if self.thermal_mode not in ("interval", "on_change"):
            raise SimulationConfigError(f"thermal_mode must be 'interval' or 'on_change', got {self.thermal_mode!r}")
        self._check_structure()
        self._check_benign()
        self.start_ms  # noqa: B018  (validates the timestamp now, not in the loop)
        for o in self.outbreaks:
            if not isinstance(o, OutbreakSpec):
                raise SimulationConfigError(f"outbreaks must be OutbreakSpec, got {type(o).__name__}")
            if o.start_day is not None and not 0 <= o.start_day < self.days:
                raise SimulationConfigError(f"outbreak start_day {o.start_day} outside the run (0..{self.days})")

    def _check_structure(self) -> None:
        if not self.datacenter_shares or any(x <= 0 for x in self.datacenter_shares):
            raise SimulationConfigError("datacenter_shares must be positive")
        if not self.gpu_mix or any(w <= 0 for _, w in self.gpu_mix):
            raise SimulationConfigError("gpu_mix needs at least one model, every share > 0")
        from fleetepi.simulate.fleet import GPU_CATALOG  # noqa: PLC0415 - the catalog imports this module

        for model, _ in self.gpu_mix:
            if model not in GPU_CATALOG:
                raise SimulationConfigError(f"unknown GPU model {model!r}; known: {', '.join(GPU_CATALOG)}")
        for name, (lo, hi) in (("driver_rollout", self.driver_rollout), ("bios_rollout", self.bios_rollout),
                               ("kernel_rollout", self.kernel_rollout)):
            if not 0 <= lo < hi <= 1:
                raise SimulationConfigError(f"{name} must be 0 <= start < end <= 1, got {(lo, hi)}")
        if not 0 <= self.kernel_rollout_share <= 1:
            raise SimulationConfigError("kernel_rollout_share must be in [0, 1]")
        keys = set(ATTRIBUTE_KEYS)
        for k in self.extra_attributes:
            if k not in keys or k in ATTRIBUTE_KEYS[:8]:
                raise SimulationConfigError(f"extra attribute {k!r} is not one of {', '.join(ATTRIBUTE_KEYS[8:])}")
        for k in self.dropped_attributes:
            if k in REQUIRED_ATTRIBUTES or k not in keys:
                raise SimulationConfigError(f"cannot drop attribute {k!r}")
        names = dict(self.attribute_names)
        for k, v in names.items():
            if k not in keys or not v:
                raise SimulationConfigError(f"attribute_names: {k!r} is not a canonical attribute key")
        shown = [names.get(k, k) for k in ATTRIBUTE_KEYS]
        if len(set(shown)) != len(shown):
            raise SimulationConfigError("attribute_names would give two attributes the same key")
        if not 0 <= self.missing_attribute_share < 1:
            raise SimulationConfigError("missing_attribute_share must be in [0, 1)")

    def _check_benign(self) -> None:
        for name in ("job_share", "burst_job_share", "chronic_ecc_share", "chronic_xid_share",
                     "maintenance_rack_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise SimulationConfigError(f"{name} must be in [0, 1]")
        if self.crash_loops_per_1k_host_day < 0 or self.static_associations < 0:
            raise SimulationConfigError("benign rates must be >= 0")
        lo, hi = self.crash_loop_hours
        if not 0 < lo <= hi:
            raise SimulationConfigError("crash_loop_hours must be 0 < low <= high")

    def attribute_name(self, key: str) -> str:
        """The key hosts of this fleet announce for canonical attribute ``key``."""
        return dict(self.attribute_names).get(key, key)

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


__all__ = ["ATTRIBUTE_KEYS", "CLASSIC_TEMPLATES", "DEFAULT_OUTBREAKS", "EXTENDED_TEMPLATES", "REQUIRED_ATTRIBUTES",
           "TEMPLATES", "OutbreakSpec", "SimConfig", "outbreak_specs"]
