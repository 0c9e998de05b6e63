"""Scoring alerts against the ground truth: pure functions, no I/O.

Rules (the same for the detectors and every baseline):

* Only ``firing`` alerts count. A **page** is a firing alert whose
  ``severity`` is absent or ``page`` (the contract's default); a **ticket**
  has ``severity: ticket``.
* A page **detects** an outbreak when its kind and entity equal one of the
  outbreak's ``accept`` entities (the truth's own entity first) and its ``ts``
  lies in ``[start_ms, end_ms + grace]``. Recall counts outbreaks found by a
  page; an outbreak found only by a ticket is reported apart
  (``ticket_only``): nobody was woken for it.
* A page is **related** when its entity is one of the outbreak's ``related``
  entities (a true consequence, e.g. the host_spike of a host in an ECC
  storm) in the same span: neither a detection nor a false page.
* Every other page is **false**. A false page that a benign phenomenon
  explains (``benign_explains``: a crash loop's host or signature, a job
  abort's signature/hosts/Xid 43/45, a chronic host's channel, a static
  association's signature, a rolled-out value, a rack in maintenance) is also
  counted under that phenomenon's type.
* Tickets: the first ticket on one of a benign phenomenon's ``expected``
  entities within ``[start, end + grace]`` is **expected**; later ones on the
  same phenomenon are **repeats** (the truth allows one per host/channel); a
  ticket on an outbreak's accept or related entity is an **outbreak** ticket;
  every other ticket is **unexpected**. An expected ticket whose ``finding``
  is not the truth's (``crash_loop``, ``chronic``, ``static_association``) still
  counts as expected and is also counted apart (``wrong_finding``).
* Recall = outbreaks detected by a page / outbreaks; delay = first detecting
  page's ``ts`` - outbreak start; precision = (detect + related) / pages;
  false pages and tickets are normalized per 1,000 hosts per day of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetepi.simulate.background import JobBurst
from fleetepi.simulate.benign import BENIGN_TYPES, from_burst
from fleetepi.simulate.truth import Benign, EntityKey, Outbreak

KINDS = ("signature_spike", "host_spike", "hardware_correlation", "telemetry_spike")
#: Default grace after an outbreak's end during which an alert still counts as finding it.
DEFAULT_GRACE_S = 2 * 3600.0
#: Xid codes that killed job ranks leave behind (bursts explain them).
BURST_XIDS = (43, 45)
#: Link counters a planned reboot trips fleet-wide.
LINK_KINDS = ("nvlink", "pcie")
TICKET_CLASSES = ("expected", "repeat", "outbreak", "unexpected")


def alert_key(alert: Any) -> EntityKey:
    """Entity of an alert (a contract ``Alert`` or anything with its fields)."""
    return (alert.kind, alert.signature, alert.host, alert.attribute, alert.value, alert.telemetry_kind, alert.code)


def alert_ts_ms(alert: Any) -> int:
    ts = getattr(alert, "ts_ms", None)
    return int(ts) if ts is not None else int(alert.ts.timestamp() * 1000)


def is_page(alert: Any) -> bool:
    """A page unless ``severity`` says ``ticket`` (absent means page, as the contract says)."""
    return getattr(alert, "severity", None) != "ticket"


@dataclass(frozen=True)
class AlertOutcome:
    """What one firing alert was.

    :ivar outcome: pages: ``detect``, ``related`` or ``false``; tickets: ``ticket``.
    :ivar benign: the type of the benign phenomenon that explains a false page or a ticket.
    :ivar ticket: tickets only: ``expected``, ``repeat``, ``outbreak`` or ``unexpected``.
    """

    kind: str
    ts_ms: int
    key: EntityKey
    outcome: str
    outbreak: str | None = None
    benign: str | None = None
    benign_id: str | None = None
    page: bool = True
    ticket: str | None = None
    finding: str | None = None
    #: Expected tickets: whether ``finding`` is the one the truth names (None: nothing to compare).
    finding_ok: bool | None = None

    @property
    def burst(self) -> bool:
        """A false page during a background job burst (the first simulator's only benign phenomenon)."""
        return self.outcome == "false" and self.benign == "job_abort"


@dataclass(frozen=True)
class OutbreakOutcome:
    id: str
    kind: str
    template: str
    detected: bool
    delay_s: float | None
    #: Whether the method looks at this kind at all (R baselines do not see hosts or cohorts).
    covered: bool = True
    #: Found by a ticket but by no page.
    ticket_only: bool = False
    ticket_delay_s: float | None = None


@dataclass(frozen=True)
class BenignOutcome:
    id: str
    type: str
    #: Whether the truth expects a ticket for it, and whether one came.
    expects_ticket: bool
    ticketed: bool
    #: False pages it explains.
    pages: int


@dataclass
class RunScore:
    """Outcomes of one method on one simulated run."""

    outbreaks: list[OutbreakOutcome]
    alerts: list[AlertOutcome]
    host_days: float
    #: Alert kinds the method produces.
    kinds: tuple[str, ...] = KINDS
    benign: list[BenignOutcome] = field(default_factory=list)


class _Truth:
    """Outbreaks and benign phenomena with their entity lists as sets (alerts are matched many times)."""

    def __init__(self, outbreaks: Sequence[Outbreak], benign: Sequence[Benign | JobBurst]) -> None:
        self.outbreaks = [(o, frozenset(o.accept) | {o.key}, frozenset(o.related)) for o in outbreaks]
        self.benign = [b if isinstance(b, Benign) else from_burst(b, k) for k, b in enumerate(benign)]
        self.hosts = {b.id: frozenset(b.hosts) for b in self.benign}
        self.cohorts = {b.id: frozenset(b.cohorts) for b in self.benign}
        self.expected = {b.id: frozenset(b.expected) for b in self.benign}


def classify(alert_key_: EntityKey, ts_ms: int, outbreaks: Sequence[Outbreak], grace_ms: int) -> tuple[str, Outbreak | None]:
    """``("detect"|"related"|"false", outbreak)`` for one firing alert; a detection wins over a relation."""
    return _classify(alert_key_, ts_ms, [(o, frozenset(o.accept) | {o.key}, frozenset(o.related)) for o in outbreaks],
                     grace_ms)


def _classify(key: EntityKey, ts_ms: int, indexed: list[tuple[Outbreak, frozenset, frozenset]],
              grace_ms: int) -> tuple[str, Outbreak | None]:
    related = None
    for o, accept, rel in indexed:
        if not o.start_ms <= ts_ms <= o.end_ms + grace_ms:
            continue
        if key in accept:
            return "detect", o
        if related is None and key in rel:
            related = o
    return ("related", related) if related is not None else ("false", None)


def benign_explains(b: Benign, key: EntityKey, ts_ms: int, grace_ms: int, hosts: frozenset[str] | None = None,
                    cohorts: frozenset[tuple[str, str]] | None = None) -> bool:
    """Whether benign phenomenon ``b`` explains an alert on ``key`` at ``ts_ms`` (see the module rules)."""
    if not b.start_ms <= ts_ms <= b.end_ms + grace_ms:
        return False
    kind, signature, host, attr, value, tkind, code = key
    hs = frozenset(b.hosts) if hosts is None else hosts
    cs = frozenset(b.cohorts) if cohorts is None else cohorts
    t = b.type
    if t == "job_abort":
        return ((signature is not None and signature == b.signature) or (host is not None and host in hs)
                or (tkind == "xid" and (code is None or code in BURST_XIDS)))
    if t == "crash_loop":
        return (host is not None and host == b.host) or (signature is not None and signature == b.signature)
    if t in ("chronic_ecc", "chronic_xid"):
        if kind == "host_spike":
            return host == b.host
        if kind != "telemetry_spike" or tkind != b.telemetry_kind or (b.code is not None and code not in (None, b.code)):
            return False
        return host == b.host or (host is None and (attr is None or (attr, value) in cs))
    if t == "static_association":
        return kind == "hardware_correlation" and signature == b.signature
    if t == "rollout":
        return kind in ("hardware_correlation", "telemetry_spike") and attr == b.attribute and value == b.value
    if t == "maintenance":
        return ((host is not None and host in hs) or (signature is not None and signature == b.signature)
                or (attr is not None and (attr, value) in cs)
                or (kind == "telemetry_spike" and host is None and attr is None and tkind in LINK_KINDS))
    return False


def caused_by_burst(key: EntityKey, ts_ms: int, bursts: Sequence[JobBurst], grace_ms: int) -> bool:
    """Whether a job burst explains an alert (kept for the first simulator's callers)."""
    return any(benign_explains(from_burst(b), key, ts_ms, grace_ms) for b in bursts)


def _explaining(truth: _Truth, key: EntityKey, ts: int, grace_ms: int) -> Benign | None:
    for b in truth.benign:
        if benign_explains(b, key, ts, grace_ms, truth.hosts[b.id], truth.cohorts[b.id]):
            return b
    return None


def score_run(alerts: Iterable[Any], outbreaks: Sequence[Outbreak], benign: Sequence[Benign | JobBurst], hosts: int,
              days: float, grace_s: float = DEFAULT_GRACE_S, kinds: Sequence[str] = KINDS) -> RunScore:
    """Score one method's alerts on one run.

    :param benign: the run's benign phenomena (``Simulation.benign``); bare ``JobBurst`` objects
        (``Simulation.bursts``, the first simulator's truth) are accepted too.
    :param kinds: alert kinds the method can produce; outbreaks of other kinds
        are marked ``covered=False`` (reported, not hidden).
    """
    grace_ms = int(grace_s * 1000)
    truth = _Truth(outbreaks, benign)
    first: dict[str, int] = {}
    first_ticket: dict[str, int] = {}
    ticketed: set[str] = set()
    caused: Counter[str] = Counter()
    outcomes: list[AlertOutcome] = []
    firing = [a for a in alerts if getattr(a, "state", "firing") == "firing"]
    firing.sort(key=alert_ts_ms)  # "first expected ticket" must not depend on emission order
    for a in firing:
        key = alert_key(a)
        ts = alert_ts_ms(a)
        finding = getattr(a, "finding", None)
        what, o = _classify(key, ts, truth.outbreaks, grace_ms)
        if is_page(a):
            b = _explaining(truth, key, ts, grace_ms) if what == "false" else None
            if b is not None:
                caused[b.id] += 1
            outcomes.append(AlertOutcome(key[0], ts, key, what, o.id if o else None, b.type if b else None,
                                         b.id if b else None, True, None, finding))
            if what == "detect" and o is not None:
                first[o.id] = min(first.get(o.id, ts), ts)
            continue
        b = None
        if what == "detect" and o is not None:
            cls = "outbreak"
            first_ticket[o.id] = min(first_ticket.get(o.id, ts), ts)
        else:
            b = next((x for x in truth.benign if key in truth.expected[x.id]
                      and x.start_ms <= ts <= x.end_ms + grace_ms), None)
            if b is not None:
                cls = "repeat" if b.id in ticketed else "expected"
                ticketed.add(b.id)
            elif what == "related":
                cls = "outbreak"
            else:
                cls = "unexpected"
                b = _explaining(truth, key, ts, grace_ms)
        ok = (finding == b.finding) if b is not None and cls in ("expected", "repeat") and b.finding else None
        outcomes.append(AlertOutcome(key[0], ts, key, "ticket", o.id if o and cls == "outbreak" else None,
                                     b.type if b else None, b.id if b else None, False, cls, finding, ok))
    obs = []
    for o in outbreaks:
        t = first.get(o.id)
        tt = first_ticket.get(o.id)
        obs.append(OutbreakOutcome(o.id, o.kind, o.template, t is not None,
                                   None if t is None else max(0.0, (t - o.start_ms) / 1000.0), o.kind in kinds,
                                   t is None and tt is not None,
                                   None if tt is None else max(0.0, (tt - o.start_ms) / 1000.0)))
    bo = [BenignOutcome(b.id, b.type, bool(b.expected), b.id in ticketed, caused[b.id]) for b in truth.benign]
    return RunScore(obs, outcomes, hosts * days, tuple(kinds), bo)


@dataclass
class Summary:
    """Figures of one method over one or more runs, overall or for one kind."""

    outbreaks: int = 0
    detected: int = 0
    ticket_only: int = 0
    pages: int = 0
    true_pages: int = 0
    false_pages: int = 0
    #: False pages a benign phenomenon explains, by its type.
    benign_pages: Counter[str] = field(default_factory=Counter)
    tickets: int = 0
    ticket_classes: Counter[str] = field(default_factory=Counter)
    #: Unexpected tickets a benign phenomenon explains, by its type.
    benign_tickets: Counter[str] = field(default_factory=Counter)
    #: Expected tickets (and repeats) whose ``finding`` is not the truth's (``crash_loop``, ``chronic``, ...).
    wrong_finding: int = 0
    #: Benign phenomena that expect a ticket, and how many got one.
    benign_expecting: int = 0
    benign_ticketed: int = 0
    host_days: float = 0.0
    delays_s: list[float] = field(default_factory=list)
    covered: bool = True

    # --- the first scorer's names (every alert was a page) ---
    @property
    def alerts(self) -> int:
        return self.pages

    @property
    def true_alerts(self) -> int:
        return self.true_pages

    @property
    def false_alerts(self) -> int:
        return self.false_pages

    @property
    def burst_false(self) -> int:
        return self.benign_pages["job_abort"]

    @property
    def recall(self) -> float | None:
        return self.detected / self.outbreaks if self.outbreaks else None

    @property
    def precision(self) -> float | None:
        return self.true_pages / self.pages if self.pages else None

    def per_1k_host_day(self, n: float) -> float:
        return 1000.0 * n / self.host_days if self.host_days else 0.0

    @property
    def false_per_1k_host_day(self) -> float:
        """False pages per 1,000 hosts per day (benign-caused ones included)."""
        return self.per_1k_host_day(self.false_pages)

    @property
    def benign_false(self) -> int:
        return sum(self.benign_pages.values())

    @property
    def tickets_per_1k_host_day(self) -> float:
        return self.per_1k_host_day(self.tickets)

    @property
    def expected_tickets_per_1k_host_day(self) -> float:
        return self.per_1k_host_day(self.ticket_classes["expected"])

    @property
    def unexpected_tickets_per_1k_host_day(self) -> float:
        """Tickets beyond the truth's one per phenomenon: unexpected ones and repeats."""
        return self.per_1k_host_day(self.ticket_classes["unexpected"] + self.ticket_classes["repeat"])

    @property
    def median_delay_s(self) -> float | None:
        return float(np.median(self.delays_s)) if self.delays_s else None

    @property
    def p90_delay_s(self) -> float | None:
        return float(np.percentile(self.delays_s, 90)) if self.delays_s else None

    def to_json(self) -> dict[str, Any]:
        return {"outbreaks": self.outbreaks, "detected": self.detected, "recall": self.recall,
                "ticket_only": self.ticket_only, "pages": self.pages, "alerts": self.pages,
                "precision": self.precision, "false_pages": self.false_pages, "false_alerts": self.false_pages,
                "false_per_1k_host_day": self.false_per_1k_host_day,
                "benign_false_pages": {t: self.benign_pages[t] for t in BENIGN_TYPES if self.benign_pages[t]},
                "burst_false_alerts": self.burst_false,
                "tickets": self.tickets, "tickets_per_1k_host_day": self.tickets_per_1k_host_day,
                "ticket_classes": {c: self.ticket_classes[c] for c in TICKET_CLASSES},
                "expected_tickets_per_1k_host_day": self.expected_tickets_per_1k_host_day,
                "unexpected_tickets_per_1k_host_day": self.unexpected_tickets_per_1k_host_day,
                "benign_tickets": {t: self.benign_tickets[t] for t in BENIGN_TYPES if self.benign_tickets[t]},
                "expected_tickets_with_another_finding": self.wrong_finding,
                "benign_expecting_ticket": self.benign_expecting, "benign_ticketed": self.benign_ticketed,
                "host_days": self.host_days, "median_delay_s": self.median_delay_s, "p90_delay_s": self.p90_delay_s,
                "covered": self.covered}


def summarize(runs: Sequence[RunScore], kind: str | None = None) -> Summary:
    """Pool runs (outbreaks, alerts and host-days add up). ``kind``: one alert kind only.

    Overall (``kind=None``) recall counts only covered outbreaks; per kind,
    ``covered`` says whether the method produces that kind at all.
    """
    s = Summary()
    for r in runs:
        s.host_days += r.host_days
        for o in r.outbreaks:
            if (kind is not None and o.kind != kind) or not o.covered:
                continue
            s.outbreaks += 1
            if o.detected:
                s.detected += 1
                s.delays_s.append(float(o.delay_s or 0.0))
            elif o.ticket_only:
                s.ticket_only += 1
        for a in r.alerts:
            if kind is not None and a.kind != kind:
                continue
            if a.page:
                s.pages += 1
                if a.outcome == "false":
                    s.false_pages += 1
                    if a.benign is not None:
                        s.benign_pages[a.benign] += 1
                else:
                    s.true_pages += 1
            else:
                s.tickets += 1
                s.ticket_classes[a.ticket or "unexpected"] += 1
                if a.ticket == "unexpected" and a.benign is not None:
                    s.benign_tickets[a.benign] += 1
                s.wrong_finding += a.finding_ok is False
        if kind is None:
            for b in r.benign:
                s.benign_expecting += b.expects_ticket
                s.benign_ticketed += b.expects_ticket and b.ticketed
    if kind is not None:
        s.covered = any(kind in r.kinds for r in runs)
    return s


__all__ = ["BURST_XIDS", "DEFAULT_GRACE_S", "KINDS", "TICKET_CLASSES", "AlertOutcome", "BenignOutcome",
           "OutbreakOutcome", "RunScore", "Summary", "alert_key", "alert_ts_ms", "benign_explains", "caused_by_burst",
           "classify", "is_page", "score_run", "summarize"]
