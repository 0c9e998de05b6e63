"""telemetry_spike: Xid codes, ECC, thermal and power events per host, fleet-wide and per cohort.

Two detectors, one alert kind (``telemetry_spike``), no statistics of their
own: they feed the same engines as the crash detectors.

* ``telemetry_host`` (key: host and channel): a host's errors of one channel
  (Xid 79, uncorrectable ECC, thermal crossings, ...) against its peers and
  its own past, on ``detectors.peers`` — an ECC storm on one GPU host pages
  (``error_storm``); a host that has reported corrected ECC at a steady high
  rate for weeks is one ticket (``chronic``), and then its own rate is its
  baseline.
* ``telemetry_cohort`` (key: channel): the channel's distinct hosts rising
  fleet-wide against their own daily baseline (``detectors.rate``,
  ``fleet_rise``), and its concentration by attribute value
  (``detectors.cohorts``) — Xid 79 on the hosts of one rack, a thermal or
  power surge on one rack, a batch of GPUs failing over months.

What an event weighs is decided once, in ``detectors.cases``: the
contract's ``count`` (clipped), or one threshold crossing for thermal and
power readings.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
from msgspec import Struct

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.detectors.base import Context
from fleetepi.detectors.cases import Case
from fleetepi.detectors.cohorts import CohortCorrelation, CohortVerdict, cohort_correlation_from_config
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.findings import FINDINGS, PAGE, incident_channel, incident_host, span
from fleetepi.detectors.hardware_correlation import cohort_fields, cohort_summary
from fleetepi.detectors.peers import HostPeers, PeerVerdict, host_peers_from_config
from fleetepi.detectors.rate import RateSpike, RateVerdict, rate_spike_from_config
from fleetepi.detectors.stats import score_of


def split_channel(channel: str) -> tuple[str, int | None]:
    kind, _, code = channel.partition(":")
    return kind, (int(code) if code else None)


class TelemetryHostSpike:
    """One host's errors of one channel against its peers and its own past."""

    name: ClassVar[str] = "telemetry_host"
    state_version: ClassVar[str] = "telemetry_host/4"

    def __init__(self, config: DetectorConfig, clock: DecayClock) -> None:
        c = self.config = config
        self.core = host_peers_from_config(c, clock, alpha=c.host_alpha, min_units=c.host_min_units,
                                           min_ratio=c.host_min_ratio)
        self._is_chronic = self.core.is_chronic

    def fold(self, case: Case, ctx: Context) -> None:
        ctx.chronic = self._is_chronic  # the live state (a restore replaces the core), for telemetry_cohort's fold
        if not case.is_crash and case.errors > 0:
            self.core.observe(case.host, case.channel, case.errors, case.ts_ms, case.keys, ctx.clock)

    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        if self.core.start_ms is None or (ctx.start_ms is not None and ctx.start_ms < self.core.start_ms):
            self.core.start_ms = ctx.start_ms
        verdicts = self.core.decide(now_ms, ctx.inventory, ctx.clock)
        ctx.chronic_new = [(v.channel, v.host) for v in verdicts if v.state == "chronic"]
        ctx.chronic_host = self.core.is_chronic_host  # for host_spike, which decides next
        return [self._alert(v) for v in verdicts]

    def _alert(self, v: PeerVerdict) -> Alert:
        kind, code = split_channel(v.channel)
        if v.state == "firing":
            finding = "error_storm"
            summary = (f"host {v.host}: {v.observed:.3g} {v.channel} errors over ~{span(v.window_s)} vs "
                       f"{v.expected:.2g} expected from {v.basis}: check the GPU/board of this host")
        elif v.state == "chronic":
            finding = "chronic"
            summary = (f"host {v.host} has reported {v.channel} far above its peers for days ({v.observed:.3g} over "
                       f"~{span(v.window_s)} vs {v.expected:.2g} expected): a standing condition to fix")
        else:
            finding = ""
            summary = f"host {v.host}: {v.channel} errors back in line with its peers"
        return Alert(ts=ts_from_ms(v.ts_ms), kind="telemetry_spike",
                     state="resolved" if v.state == "resolved" else "firing", host=v.host, telemetry_kind=kind,
                     code=code, score=score_of(v.p_value) if v.p_value is not None else 0.0, p_value=v.p_value,
                     observed=round(v.observed, 6), expected=round(v.expected, 6),
                     relative_risk=(v.observed / v.expected if v.expected > 0 else None), window_s=v.window_s,
                     summary=summary, notes=["telemetry_host", *v.notes],
                     severity=FINDINGS[finding][0] if finding else PAGE,  # type: ignore[arg-type]
                     finding=finding or None, incident=incident_host(v.host))

    def rebase(self, factors: tuple[float, ...]) -> None:
        self.core.rebase(factors)

    def sweep(self, now_ms: int, ctx: Context) -> None:
        self.core.sweep(now_ms)

    def snapshot(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.core)  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.core = msgspec.convert(state, HostPeers)
        self._is_chronic = self.core.is_chronic

    def counts(self) -> dict[str, float]:
        return self.core.counts()


#: A fleet-wide rise with at least this share of its units inside the key's firing cohorts is theirs.
EXPLAINED_SHARE = 0.8


class _CohortState(Struct):
    fleet: RateSpike
    cohorts: CohortCorrelation
    #: channels whose fleet-wide rise was a firing cohort's (not alerted, nor its resolution)
    explained: set[str] = msgspec.field(default_factory=set)


class TelemetryCohortSpike:
    """A telemetry channel rising fleet-wide, or concentrated in one cohort (rack, GPU model, batch, ...)."""

    name: ClassVar[str] = "telemetry_cohort"
    state_version: ClassVar[str] = "telemetry_cohort/2"

    def __init__(self, config: DetectorConfig, clock: DecayClock) -> None:
        c = self.config = config
        self.state = _CohortState(rate_spike_from_config(c), cohort_correlation_from_config(c, clock, c.tel_cohort_rate_max_s))
        self._skip = frozenset(c.tel_cohort_skip)

    def fold(self, case: Case, ctx: Context) -> None:
        if case.is_crash or not case.unit:
            return
        ch = case.channel
        if ch in self._skip or ch.partition(":")[0] in self._skip:
            return
        self.state.fleet.observe(ch, case.unit, case.ts_ms)
        if case.keys and not ctx.chronic(ch, case.host):
            # a chronic reporter (ticketed) is a standing condition of its host: in the cohort counts it would
            # be most of a channel's units on a few hosts, and a wear-out on a quarter of the fleet drowns
            self.state.cohorts.observe(ch, case.host, case.unit, case.ts_ms, case.keys, ctx.clock)

    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        for core in (self.state.fleet, self.state.cohorts):
            if core.start_ms is None or (ctx.start_ms is not None and ctx.start_ms < core.start_ms):
                core.start_ms = ctx.start_ms
        for ch, host in ctx.chronic_new:
            self.state.cohorts.forget_host(ch, host, ctx.inventory.latest_keys(host))
        ctx.chronic_new = []
        out = [self._cohort_alert(v) for v in self.state.cohorts.decide(now_ms, ctx.inventory, ctx.clock)]
        g = ctx.clock.g(now_ms)
        explained = self.state.explained
        for v in self.state.fleet.decide(horizon_ms, now_ms):
            if v.state == "firing" and self.state.cohorts.firing_share(v.key, now_ms, g, ctx.inventory) >= \
                    EXPLAINED_SHARE:
                explained.add(v.key)  # one rack's surge seen fleet-wide: the rack's alert says it
                continue
            if v.state == "resolved" and v.key in explained:
                explained.discard(v.key)
                continue
            out.insert(0, self._fleet_alert(v))
        return out

    def _fleet_alert(self, v: RateVerdict) -> Alert:
        kind, code = split_channel(v.key)
        if v.state == "firing":
            summary = (f"{v.key} rising fleet-wide: {v.observed:g} hosts in {span(v.window_s)} vs {v.expected:.2g} "
                       f"expected (a driver, firmware or facility change?)")
        else:
            summary = f"{v.key} back to baseline fleet-wide"
        return Alert(ts=ts_from_ms(v.ts_ms), kind="telemetry_spike", state=v.state, telemetry_kind=kind, code=code,
                     score=score_of(v.p_value) if v.p_value is not None else 0.0, p_value=v.p_value,
                     observed=v.observed, expected=round(v.expected, 6),
                     relative_risk=(v.observed / v.expected if v.expected > 0 else None), window_s=v.window_s,
                     summary=summary, notes=["telemetry_cohort: fleet", *v.notes], severity=PAGE,
                     finding="fleet_rise" if v.state == "firing" else None, incident=incident_channel(v.key))

    def _cohort_alert(self, v: CohortVerdict) -> Alert:
        kind, code = split_channel(v.key)
        if v.state == "firing":
            summary = cohort_summary(f"{v.key} concentrated", v, "check power/cooling/firmware of that cohort")
        else:
            summary = f"{v.key} no longer concentrated on {v.attribute}={v.value}"
        fields = cohort_fields(v)
        fields["notes"] = ["telemetry_cohort: cohort", *fields["notes"]]
        return Alert(ts=ts_from_ms(v.ts_ms), kind="telemetry_spike", telemetry_kind=kind, code=code, summary=summary,
                     incident=incident_channel(v.key), **fields)

    def rebase(self, factors: tuple[float, ...]) -> None:
        self.state.cohorts.rebase(factors)

    def sweep(self, now_ms: int, ctx: Context) -> None:
        self.state.fleet.sweep(now_ms)
        self.state.cohorts.sweep(now_ms, ctx.clock.g(now_ms))

    def snapshot(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.state)  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.state = msgspec.convert(state, _CohortState)
        self.state.cohorts.restored()

    def counts(self) -> dict[str, float]:
        return self.state.fleet.counts()


__all__ = ["TelemetryCohortSpike", "TelemetryHostSpike", "split_channel"]
