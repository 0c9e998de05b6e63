"""Scoring alerts against the ground truth: pure functions, no I/O.

Rules (the same for the detectors and every baseline):

* Only ``firing`` alerts count; each one is a page.
* An alert **detects** an outbreak when its kind and entity equal one of the
  outbreak's ``accept`` entities (the truth's own entity first) and its ``ts``
  lies in ``[start_ms, end_ms + grace]``.
* An alert is **related** when its entity is one of the outbreak's
  ``related`` entities (a true consequence, e.g. the host_spike of a host in
  an ECC storm, the GPU model confounded with the guilty driver) in the same
  time span: neither a detection nor a false alert.
* Every other firing alert is **false**. False alerts that fall on a
  background job burst (its signature, one of its hosts, or the Xid 43/45 its
  ranks leave, within the burst + grace) are also counted as ``burst``.
* Recall = detected / outbreaks; delay = first detecting alert's ``ts`` -
  outbreak start; precision = (detect + related) / firing alerts; false
  alerts are normalized per 1,000 hosts per day of the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetepi.simulate.background import JobBurst
from fleetepi.simulate.outbreaks import EntityKey, Outbreak

KINDS = ("signature_spike", "host_spike", "hardware_correlation", "telemetry_spike")
#: Default grace after an outbreak's end during which an alert still counts as finding it.
DEFAULT_GRACE_S = 2 * 3600.0
#: Xid codes that killed job ranks leave behind (bursts explain them).
BURST_XIDS = (43, 45)


def alert_key(alert: Any) -> EntityKey:
    """Entity of an alert (a contract ``Alert`` or anything with its fields)."""
    return (alert.kind, alert.signature, alert.host, alert.attribute, alert.value, alert.telemetry_kind, alert.code)


def alert_ts_ms(alert: Any) -> int:
    ts = getattr(alert, "ts_ms", None)
    return int(ts) if ts is not None else int(alert.ts.timestamp() * 1000)


@dataclass(frozen=True)
class AlertOutcome:
    kind: str
    ts_ms: int
    key: EntityKey
    outcome: str  # "detect", "related" or "false"
    outbreak: str | None = None
    burst: bool = False


@dataclass(frozen=True)
class OutbreakOutcome:
    id: str
    kind: str
    template: str
    detected: bool
    delay_s: float | None
    #: Whether the method looks at this kind at all (R baselines do not see hosts or cohorts).
    covered: bool = True


@dataclass
class RunScore:
    """Outcomes of one method on one simulated run."""

    outbreaks: list[OutbreakOutcome]
    alerts: list[AlertOutcome]
    host_days: float
    #: Alert kinds the method produces.
    kinds: tuple[str, ...] = KINDS


def classify(alert_key_: EntityKey, ts_ms: int, outbreaks: Sequence[Outbreak], grace_ms: int) -> tuple[str, Outbreak | None]:
    """``("detect"|"related"|"false", outbreak)`` for one firing alert; a detection wins over a relation."""
    related = None
    for o in outbreaks:
        if not o.start_ms <= ts_ms <= o.end_ms + grace_ms:
            continue
        if alert_key_ in o.accept or alert_key_ == o.key:
            return "detect", o
        if related is None and alert_key_ in o.related:
            related = o
    return ("related", related) if related is not None else ("false", None)


def caused_by_burst(key: EntityKey, ts_ms: int, bursts: Sequence[JobBurst], grace_ms: int) -> bool:
    kind, signature, host, _attr, _value, tkind, code = key
    for b in bursts:
        if not b.start_ms <= ts_ms <= b.end_ms + grace_ms:
            continue
        if signature is not None and signature == b.signature:
            return True
        if host is not None and host in b.hosts:
            return True
        if tkind == "xid" and (code is None or code in BURST_XIDS):
            return True
    return False


def score_run(alerts: Iterable[Any], outbreaks: Sequence[Outbreak], bursts: Sequence[JobBurst], hosts: int,
              days: float, grace_s: float = DEFAULT_GRACE_S, kinds: Sequence[str] = KINDS) -> RunScore:
    """Score one method's alerts on one run.

    :param kinds: alert kinds the method can produce; outbreaks of other kinds
        are marked ``covered=False`` (reported, not hidden).
    """
    grace_ms = int(grace_s * 1000)
    first: dict[str, int] = {}
    outcomes: list[AlertOutcome] = []
    for a in alerts:
        if getattr(a, "state", "firing") != "firing":
            continue
        key = alert_key(a)
        ts = alert_ts_ms(a)
        what, o = classify(key, ts, outbreaks, grace_ms)
        burst = what == "false" and caused_by_burst(key, ts, bursts, grace_ms)
        outcomes.append(AlertOutcome(key[0], ts, key, what, o.id if o else None, burst))
        if what == "detect" and o is not None:
            first[o.id] = min(first.get(o.id, ts), ts)
    obs = []
    for o in outbreaks:
        t = first.get(o.id)
        obs.append(OutbreakOutcome(o.id, o.kind, o.template, t is not None,
                                   None if t is None else max(0.0, (t - o.start_ms) / 1000.0), o.kind in kinds))
    return RunScore(obs, outcomes, hosts * days, tuple(kinds))


@dataclass
class Summary:
    """Figures of one method over one or more runs, overall or for one kind."""

    outbreaks: int = 0
    detected: int = 0
    alerts: int = 0
    true_alerts: int = 0
    false_alerts: int = 0
    burst_false: int = 0
    host_days: float = 0.0
    delays_s: list[float] = field(default_factory=list)
    covered: bool = True

    @property
    def recall(self) -> float | None:
        return self.detected / self.outbreaks if self.outbreaks else None

    @property
    def precision(self) -> float | None:
        return self.true_alerts / self.alerts if self.alerts else None

    @property
    def false_per_1k_host_day(self) -> float:
        return 1000.0 * self.false_alerts / self.host_days if self.host_days else 0.0

    @property
    def median_delay_s(self) -> float | None:
        return float(np.median(self.delays_s)) if self.delays_s else None

    @property
    def p90_delay_s(self) -> float | None:
        return float(np.percentile(self.delays_s, 90)) if self.delays_s else None

    def to_json(self) -> dict[str, Any]:
        return {"outbreaks": self.outbreaks, "detected": self.detected, "recall": self.recall,
                "alerts": self.alerts, "precision": self.precision, "false_alerts": self.false_alerts,
                "burst_false_alerts": self.burst_false, "false_per_1k_host_day": self.false_per_1k_host_day,
                "median_delay_s": self.median_delay_s, "p90_delay_s": self.p90_delay_s, "covered": self.covered}


def summarize(runs: Sequence[RunScore], kind: str | None = None) -> Summary:
    """Pool runs (outbreaks and alerts add up; host-days add up). ``kind``: one alert kind only.

    Overall (``kind=None``) recall counts only covered outbreaks; per kind,
    ``covered`` says whether the method produces that kind at all.
    """
    s = Summary()
    for r in runs:
        s.host_days += r.host_days
        for o in r.outbreaks:
            if kind is not None and o.kind != kind:
                continue
            if not o.covered:
                continue
            s.outbreaks += 1
            if o.detected:
                s.detected += 1
                s.delays_s.append(float(o.delay_s or 0.0))
        for a in r.alerts:
            if kind is not None and a.kind != kind:
                continue
            s.alerts += 1
            if a.outcome == "false":
                s.false_alerts += 1
                s.burst_false += a.burst
            else:
                s.true_alerts += 1
    if kind is not None:
        s.covered = any(kind in r.kinds for r in runs)
    return s


__all__ = ["DEFAULT_GRACE_S", "KINDS", "AlertOutcome", "OutbreakOutcome", "RunScore", "Summary", "alert_key",
           "caused_by_burst", "classify", "score_run", "summarize"]
