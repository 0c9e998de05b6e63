"""telemetry_spike: Xid codes, ECC and thermal events per host and per cohort.

Two detectors, one alert kind (``telemetry_spike``), no statistics of their
own: they feed the same engines as the crash detectors.

* ``telemetry_host`` (partition key ``host``): a host's errors of one kind and
  code (Xid 79, uncorrectable ECC, ...) against its peers' mean, on
  ``fleetepi.detectors.peers`` -- an ECC storm on one GPU host.
* ``telemetry_cohort`` (partition key ``kind:code``): the code's fleet-wide
  count of distinct hosts against its own daily baseline (``fleetepi.detectors.rate``),
  and its concentration by attribute value (``fleetepi.detectors.cohorts``) -- Xid 79
  on the hosts of one rack.

What an event weighs: ``Telemetry.n`` errors (the contract's ``count``,
default 1), clipped to ``tel_max_n``; a thermal reading counts one threshold
*crossing* when it reaches ``thermal_threshold_c`` on a device that was not
already hot (re-armed by a cool reading or ``thermal_rearm_s`` of quiet).
"""

from __future__ import annotations

from typing import Any, ClassVar

from fleetepi.contract import Alert, Crash, Telemetry, ts_from_ms
from fleetepi.detectors.cohorts import Pair, cohort_correlation_from_config
from fleetepi.detectors.common import CoreDetector, cohort_numbers, cohort_summary
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.inventory import Inventory, stream_start
from fleetepi.detectors.peers import peer_spike_from_config
from fleetepi.detectors.rate import rate_spike_from_config
from fleetepi.detectors.stats import score_of


def channel_of(event: Telemetry) -> str:
    """``kind:code`` (``xid:79``) or the bare kind when there is no code (``ecc_uncorrected``)."""
    return event.kind if event.code is None else f"{event.kind}:{event.code}"


def _split(channel: str) -> tuple[str, int | None]:
    kind, _, code = channel.partition(":")
    return kind, (int(code) if code else None)


class ThermalCrossings:
    """Which thermal readings are crossings: per device, hot after cool (or after a quiet spell)."""

    def __init__(self, threshold_c: float, rearm_s: float) -> None:
        self.threshold_c = threshold_c
        self.rearm_ms = int(rearm_s * 1000)
        #: "host|device" -> ms of the last hot reading
        self.hot: dict[str, int] = {}

    def crossing(self, event: Telemetry, ts_ms: int) -> bool:
        value = event.value
        if value is None:
            return True  # a thermal *event* (throttle notice) without a reading: one crossing
        if value < self.threshold_c:
            if self.hot:  # the common case, a cool reading with no hot device, costs one comparison
                self.hot.pop(f"{event.host}|{event.device or ''}", None)
            return False
        key = f"{event.host}|{event.device or ''}"
        last = self.hot.get(key)
        self.hot[key] = max(ts_ms, last or ts_ms)
        return last is None or ts_ms - last >= self.rearm_ms

    def expire(self, now_ms: int) -> None:
        # Keep an hour beyond the re-arm time: late readings still see their device's state.
        cutoff = now_ms - self.rearm_ms - 3_600_000
        if len(self.hot) > 64:
            self.hot = {k: t for k, t in self.hot.items() if t > cutoff}


def telemetry_units(event: Telemetry, ts_ms: int, thermal: ThermalCrossings, max_n: int) -> float:
    """Errors this event stands for (0 = not an error: a cool reading, a zero counter)."""
    if event.kind == "thermal":
        return 1.0 if thermal.crossing(event, ts_ms) else 0.0
    n = event.count
    return 1.0 if n is None else float(min(n, max_n))


class TelemetryHostSpike(CoreDetector):
    """One host's errors of one telemetry code against its peers."""

    name: ClassVar[str] = "telemetry_host"
    state_version: ClassVar[str] = "telemetry_host/1"
    event_types: ClassVar[tuple[type, ...]] = (Telemetry,)

    def __init__(self, config: DetectorConfig) -> None:
        c = config
        self.config = c
        self.core = peer_spike_from_config(c, windows_s=c.tel_windows_s, alpha=c.tel_alpha,
                                           resolve_alpha=c.host_resolve_alpha, min_count=c.tel_min_count,
                                           min_ratio=c.tel_min_ratio, floor_per_h=c.tel_floor_per_h,
                                           min_events=c.tel_min_events, make_alert=self._alert)
        self.thermal = ThermalCrossings(c.thermal_threshold_c, c.thermal_rearm_s)

    def route(self, event: Crash | Telemetry) -> str | None:
        return event.host if type(event) is Telemetry else None

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        self.begin(inventory, ts_ms)
        w = telemetry_units(event, ts_ms, self.thermal, self.config.tel_max_n)  # type: ignore[arg-type]
        if w <= 0:
            # A reading without errors still says the host is alive: the peers' denominator.
            active = self.core.active
            if ts_ms > active.get(event.host, -1):
                active[event.host] = ts_ms
            return []
        return self.core.observe(event.host, channel_of(event), w, ts_ms, inventory)  # type: ignore[arg-type]

    def _alert(self, host: str, channel: str, state: str, ts_ms: int, p: float | None, obs: float, exp: float,
               notes: list[str], evidence: dict[str, Any]) -> Alert:
        kind, code = _split(channel)
        w = float(evidence.get("window_s", self.core.window_s))
        if state == "firing":
            summary = (f"host {host}: {obs:g} {channel} errors in {w / 60:g} min vs {exp:.2g} per peer host: "
                       f"check the GPU/board of this host")
        else:
            summary = f"host {host}: {channel} errors back in line with its peers"
        return Alert(ts=ts_from_ms(ts_ms), kind="telemetry_spike", state=state,  # type: ignore[arg-type]
                     host=host, telemetry_kind=kind, code=code, score=score_of(p) if p is not None else 0.0,
                     p_value=p, observed=obs, expected=round(exp, 6),
                     relative_risk=(obs / exp if exp > 0 else None), window_s=w, summary=summary,
                     notes=["telemetry_host"] + notes)

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Alert]:
        self.thermal.expire(watermark_ms)
        return self.core.advance(watermark_ms, inventory)

    def snapshot(self) -> dict[str, Any]:
        return {"core": self.core.dump(), "hot": dict(self.thermal.hot)}

    def restore(self, state: dict[str, Any]) -> None:
        self.core.load(state["core"])
        self.thermal.hot = {str(k): int(v) for k, v in state["hot"].items()}

    def counts(self) -> dict[str, float]:
        return self.core.counts()


class TelemetryCohortSpike:
    """A telemetry code rising fleet-wide, or concentrated in one cohort (rack, GPU model, ...)."""

    name: ClassVar[str] = "telemetry_cohort"
    state_version: ClassVar[str] = "telemetry_cohort/1"
    event_types: ClassVar[tuple[type, ...]] = (Telemetry,)

    def __init__(self, config: DetectorConfig) -> None:
        c = config
        self.config = c
        self.fleet = rate_spike_from_config(c, windows_s=c.tel_windows_s, alpha=c.tel_alpha,
                                            resolve_alpha=c.sig_resolve_alpha, min_units=c.tel_min_hosts,
                                            min_ratio=c.tel_min_ratio, make_alert=self._fleet_alert)
        self.cohorts = cohort_correlation_from_config(c, self._cohort_alert, window_s=c.tel_corr_window_s)
        self._skip = frozenset(c.tel_cohort_skip)
        self.thermal = ThermalCrossings(c.thermal_threshold_c, c.thermal_rearm_s)

    def route(self, event: Crash | Telemetry) -> str | None:
        if type(event) is not Telemetry:
            return None
        kind = event.kind  # type: ignore[union-attr]
        if kind in self._skip:
            return None  # a whole kind skipped (corrected ECC): the common case, one set lookup
        ch = kind if event.code is None else f"{kind}:{event.code}"  # type: ignore[union-attr]
        return None if ch in self._skip else ch

    def update(self, event: Crash | Telemetry, ts_ms: int, inventory: Inventory) -> list[Alert]:
        ev: Telemetry = event  # type: ignore[assignment]
        if self.fleet.start_ms is None:
            self.fleet.start(stream_start(inventory, ts_ms))
            self.cohorts.start(self.fleet.start_ms)  # type: ignore[arg-type]
        if telemetry_units(ev, ts_ms, self.thermal, self.config.tel_max_n) <= 0:
            return []
        ch = channel_of(ev)
        # Distinct hosts, not errors: one host's storm is telemetry_host's business.
        out = self.fleet.observe(ch, "h:" + ev.host, 1.0, ts_ms)
        out.extend(self.cohorts.observe(ch, ev.host, None, ts_ms, inventory))
        return out

    def _fleet_alert(self, key: str, state: str, ts_ms: int, p: float | None, obs: float, exp: float,
                     notes: list[str], w: float) -> Alert:
        kind, code = _split(key)
        if state == "firing":
            summary = (f"{key} rising fleet-wide: {obs:g} hosts in {w / 60:g} min vs {exp:.2g} expected "
                       f"(a driver, firmware or facility change?)")
        else:
            summary = f"{key} back to baseline fleet-wide"
        return Alert(ts=ts_from_ms(ts_ms), kind="telemetry_spike", state=state,  # type: ignore[arg-type]
                     telemetry_kind=kind, code=code, score=score_of(p) if p is not None else 0.0, p_value=p,
                     observed=obs, expected=round(exp, 6), relative_risk=(obs / exp if exp > 0 else None),
                     window_s=w, summary=summary, notes=["telemetry_cohort: fleet"] + notes)

    def _cohort_alert(self, key: str, kv: Pair, state: str, ts_ms: int, p: float | None, k: int, d: int, n1: int,
                      n_all: int, rr: float | None, lo: float | None, hi: float | None, notes: list[str]) -> Alert:
        kind, code = _split(key)
        a, v = kv
        if state == "firing":
            summary = cohort_summary(f"{key} concentrated", a, v, k, d, n1, n_all, rr, lo, hi,
                                     "check power/cooling/firmware of that cohort")
        else:
            summary = f"{key} no longer concentrated on {a}={v}"
        return Alert(ts=ts_from_ms(ts_ms), kind="telemetry_spike", state=state,  # type: ignore[arg-type]
                     telemetry_kind=kind, code=code, attribute=a, value=v, window_s=self.cohorts.window_s,
                     summary=summary, notes=["telemetry_cohort: cohort"] + notes,
                     **cohort_numbers(p, k, d, n1, n_all, rr, lo, hi))

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Alert]:
        self.thermal.expire(watermark_ms)
        out = self.fleet.advance(watermark_ms, inventory)
        out.extend(self.cohorts.advance(watermark_ms, inventory))
        return out

    def snapshot(self) -> dict[str, Any]:
        return {"fleet": self.fleet.dump(), "cohorts": self.cohorts.dump(), "hot": dict(self.thermal.hot)}

    def restore(self, state: dict[str, Any]) -> None:
        self.fleet.load(state["fleet"])
        self.cohorts.load(state["cohorts"])
        self.thermal.hot = {str(k): int(v) for k, v in state["hot"].items()}

    def counts(self) -> dict[str, float]:
        return self.fleet.counts()


__all__ = ["TelemetryCohortSpike", "TelemetryHostSpike", "ThermalCrossings", "channel_of", "telemetry_units"]
