"""Every threshold of every detector, in one frozen object with documented defaults.

Units are in the names (``_s`` seconds, ``_ms`` milliseconds). A changed
value changes ``fingerprint()``, which is part of every checkpoint, so a
worker never resumes from state computed under other parameters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fleetepi.exceptions import ConfigError


@dataclass(frozen=True)
class DetectorConfig:
    # ---- event-time clock (engine) ----
    #: Evaluation step: how often (in event time) idle keys are re-examined and alerts resolve.
    step_s: float = 300.0
    #: Events older than the watermark by more than this are counted as ``out_of_order`` and dropped.
    allowed_lateness_s: float = 600.0
    #: Events newer than the watermark by more than this are counted as ``future_timestamp`` and dropped.
    max_future_s: float = 86400.0
    #: Announcements kept per host (attribute history for events in the past).
    inventory_history: int = 8

    # ---- shared windows and state bounds (all detectors) ----
    #: Width of one ring-buffer bucket of every count window; windows are whole buckets.
    bucket_s: float = 300.0
    #: Warm-up: nothing fires until this much event time after the stream's start (the first
    #: host announcement, which every worker reads), so baselines and hosts' own rates learn
    #: first. A day: one turn of the daily cycle.
    warmup_s: float = 24 * 3600.0
    #: A key (signature, host, telemetry code) with no event for this long is forgotten
    #: (longer than the longest window; a signature that returns after it is new again).
    key_ttl_s: float = 3 * 86400.0
    #: Most keys one detector instance keeps; beyond it the quietest key is evicted.
    max_keys: int = 50_000
    #: Negative binomial size r of crash/error counts (variance mu + mu^2/r); inf = Poisson.
    #: 8: a busy signature's hour may hold ~35 % more or less than its mean without news.
    nb_size: float = 8.0
    #: After an alert resolves, the same entity cannot fire again for this long.
    cooldown_s: float = 6 * 3600.0

    # ---- signature_spike ----
    #: Sliding windows over which a signature's incidence is counted, side by side: the
    #: short one pages on a sharp outbreak in minutes, the long one on a slow steady one.
    sig_windows_s: tuple[float, ...] = (3600.0, 6 * 3600.0)
    #: One-sided p-value under which a window count fires (many signatures x steps a day).
    sig_alpha: float = 1e-7
    #: A firing signature resolves when its window count is no longer significant at this level.
    sig_resolve_alpha: float = 0.01
    #: Minimum support: at least this many units (distinct jobs/hosts) in the window.
    sig_min_units: int = 4
    #: And at least this many times the expected count (effect size, not only significance).
    sig_min_ratio: float = 3.0
    #: Half-life of the learned baseline (hour-of-day rates decay per day).
    baseline_halflife_days: float = 7.0
    #: Pseudo-hours of the key's all-day rate mixed into each hour-of-day rate
    #: (smoothing: sparse keys get a flat profile, busy ones their own daily cycle).
    hour_prior_h: float = 4.0
    #: Prior rate (units per hour) of a key with little history, with ``prior_weight_h`` hours of weight.
    prior_rate_per_h: float = 0.05
    #: Weight of the prior, in hours of exposure.
    prior_weight_h: float = 12.0

    # ---- host_spike ----
    #: Sliding windows over which a host's crashes are counted (a sick host may crash
    #: only a few times an hour, so the longest window is a day).
    host_windows_s: tuple[float, ...] = (3600.0, 6 * 3600.0, 24 * 3600.0)
    #: One-sided p-value against the peers' mean under which a host fires (fewer tests than
    #: signatures: one per host that already stands out against the fleet and its past).
    host_alpha: float = 1e-5
    #: Minimum units (crashes, odd-shape-weighted, plus hardware errors) in the window for a host to fire.
    host_min_crashes: int = 6
    #: Minimum events (crashes and hardware errors, unweighted) in the longest window.
    host_min_events: int = 3
    #: Units one hardware error of the host counts (Xid other than the application ones,
    #: uncorrectable ECC, NVLink, PCIe).
    host_hw_weight: float = 2.0
    #: And at least this many times the peers' mean.
    host_min_ratio: float = 5.0
    #: Peer floor: expected crashes per host per hour never taken below this (quiet fleets).
    host_floor_per_h: float = 0.05
    #: Hosts of a cohort (attribute value) needed before it is used as a peer group.
    host_min_peers: int = 5
    #: Hours of the fleet's rate mixed into a host's own long-run rate (its expected count is
    #: never below that own rate: a host that always runs crashier jobs is not news).
    host_own_prior_h: float = 48.0
    #: Crashes flagged as odd shapes (bit flips, non-canonical addresses) count this many units.
    host_odd_weight: float = 3.0
    #: A crash's bitflip_score at or above this makes it an odd shape.
    host_bitflip_min: float = 0.5
    #: A host resolves when its count is no longer significant at this level.
    host_resolve_alpha: float = 0.01

    # ---- hardware_correlation (and telemetry_cohort's cohort part) ----
    #: Window over which distinct affected hosts of a signature are collected.
    corr_window_s: float = 24 * 3600.0
    #: Distinct affected hosts in one cohort needed before it can be reported (three hosts of
    #: one rack of 40 in a fleet of 2,000 is already p < 1e-5; the p-value ceiling does the rest).
    corr_min_hosts: int = 3
    #: Benjamini-Hochberg false discovery rate over the (attribute, value) pairs of a key.
    corr_fdr: float = 0.01
    #: And an absolute one-sided binomial p-value ceiling per pair.
    corr_alpha: float = 1e-5
    #: Lower 95 % bound of the relative risk must exceed this.
    corr_min_rr_lower: float = 2.0
    #: Cohorts smaller than this share of the fleet's hosts are not tested alone
    #: when they hold one host (a cohort of one host is that host: host_spike's job).
    corr_min_cohort_hosts: int = 2
    #: A nested/confounded cohort is explained by another if its residual p-value exceeds this.
    corr_explain_alpha: float = 1e-3
    #: Most distinct hosts kept per key (the window's oldest leave first beyond it).
    corr_max_units: int = 5000

    # ---- telemetry_host / telemetry_cohort ----
    #: Sliding windows for telemetry counts (per host, and a code's fleet-wide distinct hosts).
    tel_windows_s: tuple[float, ...] = (3600.0, 6 * 3600.0)
    #: Window of telemetry_cohort's distinct hosts per attribute value (Xid 79 in a rack comes
    #: within hours; a day of a rare code's background would dilute it).
    tel_corr_window_s: float = 6 * 3600.0
    #: Events (not errors) a host needs in the window: one report of 10 NVLink errors is one incident.
    tel_min_events: int = 3
    #: Telemetry channels (``kind`` or ``kind:code``) that telemetry_cohort does not test: Xid
    #: 13/31/43/45 are application faults (NVIDIA's Xid catalog) that follow jobs -- a job
    #: burst leaves them on a rack of hosts at once -- and the corrected-ECC counter is
    #: reported by most hosts, so "hosts with any" is no cohort signal. telemetry_host still
    #: watches them per host.
    tel_cohort_skip: tuple[str, ...] = ("xid:13", "xid:31", "xid:43", "xid:45", "ecc_corrected")
    #: One-sided p-value for a host's telemetry count against peers, and for a code's fleet count.
    tel_alpha: float = 1e-7
    #: Minimum errors (Telemetry.n summed, or thermal crossings) for a host to fire.
    tel_min_count: int = 10
    #: Minimum distinct hosts in the window for a fleet-wide telemetry spike.
    tel_min_hosts: int = 6
    #: And at least this many times the expected.
    tel_min_ratio: float = 5.0
    #: Peer floor: expected errors per host per hour never below this.
    tel_floor_per_h: float = 0.05
    #: One event's error count is clipped to this (one ECC storm report must not be 10^6 units).
    tel_max_n: int = 1000
    #: Thermal readings at or above this (degrees C) are a threshold crossing.
    thermal_threshold_c: float = 90.0
    #: A device must read below the threshold, or be quiet this long, before it crosses again.
    thermal_rearm_s: float = 600.0
    #: Telemetry kinds that count as hardware errors of a host in host_spike.
    hw_error_kinds: tuple[str, ...] = ("xid", "ecc_uncorrected", "nvlink", "pcie")
    #: Xid codes that are application faults (NVIDIA's Xid catalog), not hardware: a job
    #: burst leaves them on every host it ran on.
    app_xid_codes: tuple[int, ...] = (13, 31, 43, 45)

    def __post_init__(self) -> None:
        """Validate at start-up (never in the loop); YAML lists become tuples."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, list):
                object.__setattr__(self, f.name, tuple(v))
        for name in ("bucket_s", "step_s", "warmup_s", "key_ttl_s", "cooldown_s", "corr_window_s",
                     "tel_corr_window_s", "baseline_halflife_days"):
            if getattr(self, name) < 0 or (name in ("bucket_s", "step_s", "corr_window_s", "tel_corr_window_s")
                                            and getattr(self, name) <= 0):
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("sig_windows_s", "host_windows_s", "tel_windows_s"):
            windows = getattr(self, name)
            if not windows or any(w < self.bucket_s for w in windows):
                raise ConfigError(f"{name} needs at least one window of >= bucket_s ({self.bucket_s} s)")
        for name in ("sig_alpha", "sig_resolve_alpha", "host_alpha", "host_resolve_alpha", "tel_alpha",
                     "corr_fdr", "corr_alpha", "corr_explain_alpha"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if self.max_keys < 1 or self.corr_max_units < 1:
            raise ConfigError("max_keys and corr_max_units must be >= 1")

    def fingerprint(self) -> str:
        """Short hash of every value: part of each checkpoint's identity."""
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def replace(self, **changes: Any) -> DetectorConfig:
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> DetectorConfig:
        """Build from a config file's mapping; unknown keys are a start-up error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown detector setting(s): {', '.join(unknown)}")
        return cls(**data)


__all__ = ["DetectorConfig"]
