"""From an admitted event to a *case*: what every detector reads when the engine folds it.

One place decides, once per event, what the detectors would otherwise each
work out again (and could disagree on):

* its *channel*: a crash's signature, or a telemetry event's ``kind:code``
  (``xid:79``), or its bare kind when it has no code (``ecc_uncorrected``);
* its pair keys: the host's ``attribute=value``s in force at the event's time;
* its fleet *unit* (``detectors.units``): 1 if it is a new independent case of
  its channel, 0 if it repeats a job, a host within the hour, or a burst;
* for telemetry, the *errors* it stands for: the contract's ``count`` (clipped),
  or a thermal or power threshold crossing, 0 for a reading below it.

This is also the one routing table: ``ROUTES`` names the state key of every
detector, which the stream workers used to partition by (they now run all
detectors in one fleet partition, docs/stream.md).
"""

from __future__ import annotations

from msgspec import Struct, field

from fleetepi.contract import Crash, Host, Telemetry
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.units import UnitFilter

#: Which key each detector keeps its state under.
ROUTES = {
    "signature_spike": "signature",
    "hardware_correlation": "signature",
    "telemetry_host": "host",
    "host_spike": "host",
    "telemetry_cohort": "channel",
}


def channel_of(event: Telemetry) -> str:
    """``kind:code`` (``xid:79``), or the bare kind when the event has no code (``ecc_uncorrected``)."""
    return event.kind if event.code is None else f"{event.kind}:{event.code}"


class Crossings(Struct):
    """Which readings are threshold crossings: per device, hot after cool (or after a quiet spell).

    A thermal reading crosses at ``threshold``; a power reading carries no
    threshold of its own, so the agent's crossing events (``count`` set, or
    no ``value``: a brake or limit notice) are what count.
    """

    threshold_c: float
    rearm_ms: int
    #: "host|kind|device" -> ms of the last hot reading
    hot: dict[str, int] = field(default_factory=dict)

    def crossing(self, event: Telemetry, ts_ms: int) -> bool:
        value = event.value
        if value is None:
            return True  # a notice (throttle, brake) without a reading: one crossing
        if value < self.threshold_c:
            if self.hot:
                self.hot.pop(f"{event.host}|{event.kind}|{event.device or ''}", None)
            return False
        key = f"{event.host}|{event.kind}|{event.device or ''}"
        last = self.hot.get(key)
        self.hot[key] = max(ts_ms, last or ts_ms)
        return last is None or ts_ms - last >= self.rearm_ms

    def expire(self, now_ms: int) -> None:
        cutoff = now_ms - self.rearm_ms - 3_600_000
        if len(self.hot) > 64:
            self.hot = {k: t for k, t in self.hot.items() if t > cutoff}


class Case:
    """One folded event as the detectors see it (a plain slotted class: built once per event)."""

    __slots__ = ("errors", "event", "host", "is_crash", "channel", "keys", "ts_ms", "unit")

    def __init__(self, event: Crash | Telemetry, ts_ms: int, channel: str, keys: tuple[str, ...], unit: float,
                 errors: float) -> None:
        self.event = event
        self.ts_ms = ts_ms
        self.host = event.host
        self.is_crash = type(event) is Crash
        self.channel = channel
        self.keys = keys
        self.unit = unit
        self.errors = errors


class CaseMaker(Struct):
    """The engine's stateful part of turning events into cases (unit filters, crossings)."""

    crash_units: UnitFilter
    tel_units: UnitFilter
    thermal: Crossings
    max_n: int

    @classmethod
    def new(cls, c: DetectorConfig) -> CaseMaker:
        # crashes: a job abort without a job id is capped to a few units; telemetry: no cap, a rack of
        # Xid 79 at once is what the cohort detectors are for (application Xids are not tested by cohort)
        return cls(UnitFilter.new(c.unit_span_s, c.job_span_s, c.step_s, c.burst_alpha),
                   UnitFilter.new(c.unit_span_s, c.job_span_s, c.step_s, 0.0),
                   Crossings(c.thermal_threshold_c, int(c.thermal_rearm_s * 1000)), c.tel_max_n)

    def quiet_reading(self, event: Crash | Telemetry) -> bool:
        """Is this a thermal reading below the threshold while no device is hot (the commonest event)?"""
        return (type(event) is Telemetry and event.kind == "thermal" and event.value is not None
                and event.value < self.thermal.threshold_c and not self.thermal.hot)

    def case(self, event: Crash | Telemetry, ts_ms: int, keys: tuple[str, ...]) -> Case:
        if type(event) is Crash:
            sig = event.signature
            return Case(event, ts_ms, sig, keys, self.crash_units.unit(sig, event.host, event.job, ts_ms), 1.0)
        tel: Telemetry = event  # type: ignore[assignment]
        ch = channel_of(tel)
        kind = tel.kind
        if kind == "thermal":
            errors = 1.0 if self.thermal.crossing(tel, ts_ms) else 0.0
        elif kind == "power":
            errors = float(min(tel.count, self.max_n)) if tel.count is not None else (1.0 if tel.value is None else 0.0)
        else:
            errors = 1.0 if tel.count is None else float(min(tel.count, self.max_n))
        unit = self.tel_units.unit(ch, tel.host, None, ts_ms) if errors > 0 else 0.0
        return Case(event, ts_ms, ch, keys, unit, errors)

    def sweep(self, now_ms: int, ttl_ms: int) -> None:
        self.crash_units.sweep(now_ms, ttl_ms)
        self.tel_units.sweep(now_ms, ttl_ms)
        self.thermal.expire(now_ms)


def canonical(event: Host | Crash | Telemetry, ts_ms: int) -> tuple:
    """Sort key that orders events of one step the same however they arrived.

    Every field a detector's decision can depend on is in it, so two events
    equal in the key are interchangeable.
    """
    if type(event) is Host:
        h: Host = event  # type: ignore[assignment]
        return (ts_ms, h.host, -1, tuple(sorted(h.attributes.items())))
    if type(event) is Crash:
        c: Crash = event  # type: ignore[assignment]
        return (ts_ms, c.host, 0, c.signature, c.job or "", c.fault_class or "", tuple(c.shape_flags or ()),
                c.bitflip_score if c.bitflip_score is not None else -1.0, c.cpu if c.cpu is not None else -1, c.n)
    t: Telemetry = event  # type: ignore[assignment]
    return (ts_ms, t.host, 1, t.kind, t.code if t.code is not None else -1, t.device or "",
            t.count if t.count is not None else -1, t.value if t.value is not None else -1e300, "", -1.0, -1, 0)


__all__ = ["ROUTES", "Case", "CaseMaker", "Crossings", "canonical", "channel_of"]
