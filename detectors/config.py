"""Every setting of every detector, in one frozen object with documented defaults.

Units are in the names (``_s`` seconds, ``_ms`` milliseconds, ``_h`` hours).
A changed value changes ``fingerprint()``, part of every checkpoint, so a
worker never resumes from state computed under other parameters.

How the defaults were chosen (docs/detectors.md, "Tuning"): on the tuning
seeds of the simulator's ``quiet``, ``noisy`` and ``classic`` presets only;
figures are reported on other seeds and presets and on the Titan data. No
setting is a per-hour rate of the fleet: floors, priors and thresholds are
either probabilities (alphas, false discovery rates), ratios, or learned from
the stream (baselines, dispersion, a new signature's prior, a host's own rate,
a cohort's static association), so one configuration holds from 0.1 to 10
crashes per host-day and from 200 to 32,000 hosts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fleetepi.contract.shapes import BITFLIP_MIN
from fleetepi.detectors.windows import PAST_DAYS
from fleetepi.exceptions import ConfigError


@dataclass(frozen=True)
class DetectorConfig:
    # ---- event-time clock and admission (engine) ----
    #: Evaluation step: events are folded and every detector decides at each boundary of this grid.
    step_s: float = 300.0
    #: An event is folded once it is this old (at the first boundary after ``ts + settle_s``), so a
    #: job-wide abort is seen whole and events reordered in transit are folded in time order.
    settle_s: float = 120.0
    #: Events older than the watermark by more than this are counted as ``out_of_order`` and dropped.
    allowed_lateness_s: float = 600.0
    #: Events newer than the wall clock by more than this are ``future_timestamp`` (dropped).
    max_future_s: float = 86400.0
    #: An event more than this ahead of the fleet's event time is held aside until other hosts
    #: reach its time (one host with a wrong clock must not move everyone's time): ``clock_skew``.
    max_jump_s: float = 3600.0
    #: Distinct hosts that must be ahead before event time jumps past ``max_jump_s`` at once.
    jump_quorum_hosts: int = 3
    #: Most events held aside for clock skew (beyond it a new one is dropped, counted as clock_skew).
    max_held_events: int = 100_000
    #: Announcements kept per host (attribute history for events in the past).
    inventory_history: int = 8

    # ---- shared ----
    #: Warm-up: nothing fires until this much event time after the stream's start (the first host
    #: announcement), so baselines and hosts' own rates learn first. A day: one daily cycle.
    warmup_s: float = 24 * 3600.0
    #: After an alert resolves, the same entity cannot fire again for this long.
    cooldown_s: float = 6 * 3600.0
    #: The same for one channel of one host (host_spike, telemetry_host). Shorter: what a host's new
    #: test counts is only what came after its last episode resolved (``HostPeers``' reported counts), so
    #: a relapse stands on its own evidence; under ``cooldown_s`` a failing host's second burst two hours
    #: after its first went unpaged, its crashes decayed by the time the six hours were up.
    host_cooldown_s: float = 3600.0
    #: A key (signature, host, telemetry code) idle this long is forgotten.
    key_ttl_s: float = 40 * 86400.0
    #: Most keys one detector keeps; beyond it the quietest are evicted (never a firing one).
    max_keys: int = 200_000
    #: A case of one (key, host) counts once per this span: a crash-looping pod is one unit an
    #: hour for the fleet-level detectors (the host detector sees the loop for what it is).
    unit_span_s: float = 3600.0
    #: A job counts once per key within this span: one job dying on 256 hosts is one case.
    job_span_s: float = 86400.0
    #: Units of one key within one step are capped where they exceed this tail probability
    #: under the key's own rate: a job-wide abort without a job id adds a few units, not 256.
    burst_alpha: float = 1e-4

    # ---- signature_spike (and the fleet-wide part of telemetry_cohort) ----
    #: Sliding windows a key's units are counted over, side by side: minutes to a day.
    sig_windows_s: tuple[float, ...] = (3600.0, 4 * 3600.0, 24 * 3600.0)
    #: Multi-day windows, in days, tested hourly beside those: the sliding day window plus the
    #: key's last whole days, against the baseline as it stood on each. A deploy that triples a
    #: signature for good is an ordinary day's swing on any one day and a rise over three or
    #: seven (docs/detectors.md). Each at most 7; () turns them off.
    sig_days: tuple[int, ...] = (3, 7)
    #: One-sided p-value under which a window count fires (every key x window x step).
    sig_alpha: float = 1e-7
    #: ... per look of this length: a longer window slides afresh less often, and its alpha is
    #: ``sig_alpha`` times its length over this (the 3-day window's 3e-7, the 7-day's 7e-7; 0: one
    #: alpha for every window).
    sig_alpha_look_s: float = 86400.0
    #: The windows shorter than a day also fire when the baseline test finds them this unusual and
    #: the units are ``sig_alpha``-unusual against the hours before them in the day window: a
    #: spike in hours whose day had been ordinary (0: the baseline test alone; docs/detectors.md).
    sig_local_alpha: float = 1e-5
    #: A firing key resolves when every window is back above this p-value.
    sig_resolve_alpha: float = 0.01
    #: Minimum support: units in the window, from at least ``sig_min_spread`` distinct steps. 3, not 4: a
    #: deadlocked job's hang signature pages at the third restart, not the fourth (20-45 min sooner on
    #: 11 of 20 tuning runs, new signatures 5-35 min sooner on 7), for one false page more in the 20.
    sig_min_units: int = 3
    sig_min_spread: int = 3
    #: And at least this many times the expected count (an effect, not only a significance).
    sig_min_ratio: float = 1.5
    #: Half-life of the learned hour-of-day baseline.
    baseline_halflife_days: float = 7.0
    #: Pseudo-hours of the key's all-day rate mixed into each hour-of-day rate.
    hour_prior_h: float = 4.0
    #: ... or this many units' worth of it, whichever is more: a sparse key's profile stays flat until its
    #: slots have seen as many units (a slot's share of a daily cycle of +-30 % is known to ~1/sqrt(units)).
    hour_prior_units: float = 10.0
    #: Weight, in hours, of a new key's prior rate (learned: the first-day rate of new keys).
    prior_weight_h: float = 12.0
    #: Lower bound of that learned prior, units per hour: one case a day across the fleet, below
    #: which no rate can be told apart within a day (a statistical floor, not a fleet's rate).
    prior_rate_floor_per_h: float = 1.0 / 24.0
    #: Prior overdispersion of a key's counts (NB: variance mu + phi mu^2) until the fleet's keys
    #: have shown theirs (then the median of theirs is the prior); a key's own takes over as its
    #: days accrue (docs/detectors.md). 0.1: a signature's rate swinging by ~30 % around its baseline.
    dispersion_prior: float = 0.1

    # ---- host_spike, telemetry_host (peers) ----
    #: Time constants of a host's decayed counts for the acute test (hour, six hours, a day).
    host_scales_s: tuple[float, ...] = (3600.0, 6 * 3600.0, 24 * 3600.0)
    #: Time constant of a host's own long-run rate (a month).
    host_longrun_s: float = 30 * 86400.0
    #: Time constant of the chronic test (half a year). A decayed count holds ``rate x tau`` at most:
    #: a node failing 2.5 times a month for years held 2.5 units at a month's, under
    #: ``chronic_min_units`` for good, and was never reported; at half a year's it holds ~15.
    host_chronic_s: float = 180 * 86400.0
    #: p-value under which a host fires against max(peers, its own long-run rate).
    host_alpha: float = 1e-7
    host_resolve_alpha: float = 0.01
    #: Effective units (independent reports) a host needs in a scale to fire.
    host_min_units: float = 4.0
    #: And at least this many times the expected.
    host_min_ratio: float = 4.0
    #: Negative binomial size of a host's count around its peers' rate (hosts differ): the shape of
    #: the gamma of host propensities, before a host's own past sharpens it (docs/detectors.md).
    host_nb_size: float = 4.0
    #: The most a host's own past sharpens it: jobs move, a host's propensity drifts.
    host_nb_max_size: float = 32.0
    #: Hosts of a cohort needed before it is a peer group.
    host_min_peers: int = 5
    #: Crash units: an odd-shaped crash (bit flip, non-canonical address, misaligned stack)
    #: weighs this much; a hardware error of the host (not an application Xid) that much.
    host_odd_weight: float = 3.0
    host_hw_weight: float = 2.0
    #: Units the odd-shape channel needs (odd-shaped crashes of distinct signatures, each once a day;
    #: effective and decayed, so 1.5 is two within about sixteen hours): the finding itself is "odd
    #: shapes in two signatures or more", and the test's p-value, not this support, guards a fleet whose
    #: software crashes oddly now and then (its rate of odd shapes is the expectation). Three were asked
    #: before stop 43: a host miscomputing at 0.5 crashes an hour paged 13 h in. ``host_min_units``
    #: holds every other channel.
    host_odd_min_units: float = 1.5
    #: Units the hardware-error channel needs (a host's hardware Xids, uncorrectable ECC, NVLink and PCIe
    #: errors, one per kind and code a step; effective and decayed): in the crash channel four
    #: uncorrectable ECC errors and a Xid 48 in eight hours drowned among a crashy fleet's crashes.
    host_hw_min_units: float = 2.5
    #: The hardware-error channel's alpha: it is tested only on a host that reported a hardware error
    #: in the step, ~40x less often than the crash channel on the noisy preset. At 1e-5 and at 1e-6 the
    #: tuning seeds page the same (no false page more than without the channel); 1e-6 waited for a
    #: failing host's fourth hardware error (the demo's: 15.6 h instead of 67 min).
    host_hw_alpha: float = 1e-5
    #: A crash's bitflip_score at or above this makes it an odd shape.
    host_bitflip_min: float = BITFLIP_MIN
    #: A host whose last day is this dominated by one signature, with at most
    #: ``loop_max_signatures`` signatures, is a crash loop (ticket), not a sick host.
    loop_min_share: float = 0.75
    loop_max_signatures: int = 2
    #: A crash loop is reported (ticket) once one (host, signature) has crashed this often within
    #: about a day, whether or not the host stands out against its peers.
    loop_min_crashes: float = 10.0
    #: Chronic (ticket): the host's long-run rate against its peers', at this p-value and ratio,
    #: with at least ``chronic_min_units`` units spread over ``chronic_min_days`` days.
    chronic_alpha: float = 1e-7
    chronic_min_ratio: float = 10.0
    chronic_min_units: float = 5.0
    chronic_min_days: float = 2.0
    #: A ticket for the same entity is not repeated for this long.
    ticket_cooldown_s: float = 14 * 86400.0
    #: Suspected bad silicon: at least this share of at least ``silicon_min_crashes`` crashes with
    #: a known CPU on one core, spanning at least ``silicon_min_signatures`` signatures.
    silicon_min_share: float = 0.6
    silicon_min_crashes: int = 5
    silicon_min_signatures: int = 3

    # ---- hardware_correlation, telemetry_cohort (cohorts) ----
    #: Time constants of the cohort counts: an hour (a bad rack) to a month (wear-out, a batch).
    cohort_scales_s: tuple[float, ...] = (3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0, 30 * 86400.0)
    #: Time constant of the long-run (static) association a cohort is compared with.
    cohort_longrun_s: float = 180 * 86400.0
    #: Benjamini-Hochberg false discovery rate at each step, over every (key, attribute value,
    #: scale) with cases: across all signatures and attributes at once.
    corr_fdr: float = 0.01
    #: And an absolute one-sided p-value ceiling per test.
    corr_alpha: float = 1e-6
    #: ... per look of this length: a scale longer than it looks afresh less often, and its ceiling is
    #: ``corr_alpha`` times ``scale / corr_alpha_look_s`` (a week's 7e-6, a month's 3e-5; 0: one
    #: ceiling for every scale).
    corr_alpha_look_s: float = 86400.0
    #: Lower 95 % bound of the relative risk must exceed this.
    corr_min_rr_lower: float = 1.5
    #: Distinct affected hosts in the cohort needed.
    corr_min_hosts: int = 3
    #: Effective units (hosts and time weighed, ``kish_n``) of the key needed.
    corr_min_units: float = 5.0
    #: Cohorts with fewer hosts are not tested (a cohort of one host is that host).
    corr_min_cohort_hosts: int = 2
    #: A nested/confounded cohort is explained by another if its residual p-value exceeds this.
    corr_explain_alpha: float = 1e-3
    #: Is a cohort's excess new? Its share now against its own long-run share, at this p-value:
    #: above it, the association is static (a ticket); below, it is rising (a page).
    corr_rise_alpha: float = 1e-4
    #: Pseudo-units at the cohort's exposure share mixed into its long-run share.
    corr_prior_units: float = 20.0
    #: A firing cohort resolves when no scale is significant at this level.
    corr_resolve_alpha: float = 1e-3
    #: Share of the false-discovery budget given to the cohorts of keys whose fleet-wide rate is
    #: above its baseline now (signature_spike firing): a weighted Benjamini-Hochberg. Where a
    #: spiking signature lives is asked of a few hundred cohorts, not of every key's (0: unweighted).
    corr_spike_share: float = 0.5
    #: Cap on the weight of one such test (and on how far its absolute ceiling ``corr_alpha`` rises).
    corr_spike_weight_max: float = 1000.0
    #: A signature not firing whose fleet-wide window (an hour, four hours, a day) is this unusual against
    #: its baseline is on watch: its cohorts share ``corr_watch_share`` of the budget (capped at
    #: ``corr_spike_weight_max`` each). A crash rising on half the fleet at RR 3-15 is x2-x8 fleet-wide,
    #: rarely enough for signature_spike where days swing, and its share test waited on a family of
    #: every key's cohorts (0: no watch).
    corr_watch_alpha: float = 1e-3
    corr_watch_share: float = 0.1
    #: ... for its cohorts that hold at least this share of the hosts announcing their attribute (a GPU
    #: model, a driver, a datacenter: what a fleet-wide rise can come from; a rack's is sharp on its own)
    corr_watch_min_share: float = 0.1
    #: Share of the budget for the tests of static associations (ticketed, each tested against its own
    #: long-run relative risk): whether a known association rises is asked of the fleet's few tens of
    #: them, not of every key's cohorts (a 2x association turning 6-15x paged 7.5-45 h into the rise on
    #: the tuning seeds, 5 of 17 never; 0: no tier of their own).
    corr_static_share: float = 0.05
    #: ... at most this weight each: a static association is tested at every step for as long as it lives,
    #: so its absolute ceiling ``corr_alpha * w`` is paid at every look, not once as a spike's is (under
    #: the spikes' cap of 1000, three static associations paged as rising on a day's swing).
    corr_static_weight_max: float = 100.0

    # ---- incidents (rack escalation) ----
    #: A place (the finest attribute nested in another: a rack) escalates when at least this share of
    #: its hosts, and at least ``escalate_min_hosts``, paged within ``escalate_window_s``.
    escalate_share: float = 0.5
    escalate_min_hosts: int = 3
    escalate_window_s: float = 3600.0

    # ---- telemetry ----
    #: One event's error count is clipped to this (one ECC storm report must not be 10^6 units).
    tel_max_n: int = 1000
    #: Thermal readings at or above this (degrees C) are a crossing.
    thermal_threshold_c: float = 90.0
    #: A device must read below the threshold, or be quiet this long, before it crosses again.
    thermal_rearm_s: float = 600.0
    #: Telemetry kinds that count as hardware errors of a host in host_spike.
    hw_error_kinds: tuple[str, ...] = ("xid", "ecc_uncorrected", "nvlink", "pcie")
    #: Xid codes that are application faults (NVIDIA's Xid catalog), not hardware: a job burst
    #: leaves them on every host it ran on. Not hardware errors of a host; not a cohort signal.
    app_xid_codes: tuple[int, ...] = (13, 31, 43, 45)
    #: Channels telemetry_cohort does not test by cohort (kind or kind:code); reported by most
    #: hosts, "hosts with any" is no cohort signal. telemetry_host still watches them per host.
    tel_cohort_skip: tuple[str, ...] = ("xid:13", "xid:31", "xid:43", "xid:45", "ecc_corrected")
    #: telemetry_cohort also tests a cohort's units against the channel's earlier rate at the scales up to
    #: this (0: off): a rare channel's outbreak is most of its units, which a share test cannot tell
    tel_cohort_rate_max_s: float = 6 * 3600.0
    #: hardware_correlation's rate test, the same, at the cohort scales up to this (0: off)
    corr_rate_max_s: float = 6 * 3600.0

    def __post_init__(self) -> None:
        """Validate at start-up (never in the loop); YAML lists become tuples."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, list):
                object.__setattr__(self, f.name, tuple(v))
        for name in ("step_s", "settle_s", "max_jump_s", "unit_span_s", "job_span_s", "host_longrun_s",
                     "host_chronic_s", "cohort_longrun_s", "baseline_halflife_days", "host_odd_min_units",
                     "host_hw_min_units"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("warmup_s", "cooldown_s", "host_cooldown_s", "key_ttl_s", "allowed_lateness_s", "max_future_s",
                     "ticket_cooldown_s", "hour_prior_units", "corr_alpha_look_s", "sig_alpha_look_s",
                     "tel_cohort_rate_max_s", "corr_rate_max_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.step_s % 1 or self.step_s < 1:
            raise ConfigError(f"step_s must be a whole number of seconds, got {self.step_s}")
        for name in ("sig_windows_s", "host_scales_s", "cohort_scales_s"):
            windows = getattr(self, name)
            if not windows or any(w < self.step_s for w in windows) or list(windows) != sorted(windows):
                raise ConfigError(f"{name} needs windows of >= step_s ({self.step_s} s), shortest first")
        for name in ("sig_alpha", "sig_resolve_alpha", "host_alpha", "host_hw_alpha", "host_resolve_alpha", "chronic_alpha",
                     "corr_fdr", "corr_alpha", "corr_explain_alpha", "corr_rise_alpha", "corr_resolve_alpha",
                     "burst_alpha", "loop_min_share", "silicon_min_share", "escalate_share"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in (0, 1), got {getattr(self, name)}")
        if not 0.0 <= self.sig_local_alpha < 1.0:
            raise ConfigError(f"sig_local_alpha must be in [0, 1), got {self.sig_local_alpha}")
        if self.corr_static_weight_max < 1.0:
            raise ConfigError(f"corr_static_weight_max must be >= 1, got {self.corr_static_weight_max}")
        if not 0.0 <= self.corr_spike_share < 1.0 or self.corr_spike_weight_max < 1.0:
            raise ConfigError(f"corr_spike_share must be in [0, 1) and corr_spike_weight_max >= 1, got "
                              f"{self.corr_spike_share} and {self.corr_spike_weight_max}")
        if not 0.0 <= self.corr_watch_min_share <= 1.0:
            raise ConfigError(f"corr_watch_min_share must be in [0, 1], got {self.corr_watch_min_share}")
        if not 0.0 <= self.corr_watch_alpha < 1.0 or not 0.0 <= self.corr_watch_share < 1.0 or \
                not 0.0 <= self.corr_static_share < 1.0 or \
                self.corr_spike_share + self.corr_watch_share + self.corr_static_share >= 1.0:
            raise ConfigError(f"corr_watch_alpha, corr_watch_share and corr_static_share must be in [0, 1), and "
                              f"the three shares' sum under 1, got {self.corr_watch_alpha}, {self.corr_watch_share}, "
                              f"{self.corr_static_share} and corr_spike_share {self.corr_spike_share}")
        if any(not isinstance(d, int) or not 2 <= d <= PAST_DAYS + 1 for d in self.sig_days) or \
                list(self.sig_days) != sorted(set(self.sig_days)):
            raise ConfigError(f"sig_days needs whole days from 2 to {PAST_DAYS + 1}, shortest first, got "
                              f"{self.sig_days}")
        if not 0 < self.host_nb_size <= self.host_nb_max_size:
            raise ConfigError(f"host_nb_size must be positive and at most host_nb_max_size, got {self.host_nb_size} "
                              f"and {self.host_nb_max_size}")
        if self.max_keys < 1 or self.jump_quorum_hosts < 1 or self.max_held_events < 0:
            raise ConfigError("max_keys and jump_quorum_hosts must be >= 1, max_held_events >= 0")

    @property
    def step_ms(self) -> int:
        return int(self.step_s * 1000)

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
