"""From an Alertmanager notification to decisions: the hook's whole policy.

Per alert, in this order (the first that applies is the decision)::

    same fingerprint and status as last time  -> duplicate  (idempotent)
    no rule matches the labels                -> ignored
    resolved, release_on_resolved off         -> ignored
    firing, severity=ticket                   -> ticket    (a standing condition: never acted on)
    host label missing or not a host name     -> invalid
    host on the deny list / not on allow list -> denied
    firing: host in maintenance               -> maintenance (label, file or silence; not remembered)
    firing: host re-hit more than rehits.max  -> rehit_cap (quarantined, released, hit again; not remembered)
    firing: its place holds places.max_hosts  -> place_cap (a rack's problem is not drained host by host)
    firing: breaker refuses                   -> breaker_open (not remembered: retried after reset)
    dry run                                   -> dry_run   (commands logged, not run)
    firing: every command exits 0             -> quarantined
    resolved, host quarantined by this hook   -> released  (only when its last alert resolved)
    a command fails                           -> failed    (not remembered: Alertmanager retries)

The refusals that depend on time (maintenance, caps, breaker) are not
remembered, so Alertmanager's next repeat of the same alert is decided
again: after the window ends, or when a person raised a cap.

Decisions are serialized under one lock: the breaker's count and the
idempotency memory must see one decision at a time, and the rate (a few
notifications a minute) makes that free. The memory is rebuilt from the
audit log at start-up, so a restart neither repeats a quarantine nor forgets
which hosts it holds (and may release).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from fleetepi.detectors.maintenance import Maintenance
from fleetepi.hook.actions import RunResult, quarantine_argvs, release_argvs, run_argv, template_values, timeout_of
from fleetepi.hook.audit import AuditLog, read_audit
from fleetepi.hook.config import HookConfig, Rule
from fleetepi.hook.exceptions import InvalidHost
from fleetepi.hook.metrics import HookMetrics
from fleetepi.hook.payload import WebhookAlert, WebhookPayload
from fleetepi.hook.safety import CircuitBreaker, FleetSize, HostFilter, check_host
from fleetepi.hook.text import printable
from fleetepi.maintenance import MaintenanceSources, window_for_labels

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str], float], RunResult]

#: Outcomes after which the same (fingerprint, status) is a duplicate.
_REMEMBERED = frozenset({"quarantined", "released", "dry_run", "denied", "ignored", "invalid", "ticket"})


@dataclass
class Decision:
    """One alert's decision: the HTTP answer and one audit line."""

    fingerprint: str
    status: str
    alertname: str
    action: str
    outcome: str
    host: str | None = None
    rule: str | None = None
    reason: str = ""
    commands: list[dict[str, Any]] = field(default_factory=list)
    #: the host's place (the alert's ``places.label``, e.g. ``rack=r07``), for the per-place cap
    place: str | None = None


class QuarantineHook:
    """The decision engine behind the HTTP server.

    :param runner: ``(argv, timeout_s) -> RunResult``; the real ``run_argv`` by default.
    :param fleet_fetch: ``url -> exposition text`` for the fleet-size scrape.
    :param wall: wall clock (unix seconds): maintenance windows and the re-hit window are in wall time.
    :param maintenance: the maintenance sources (built from ``cfg.maintenance`` if None).
    :raises ConfigFileError: the maintenance file cannot be read (start-up).
    """

    def __init__(self, cfg: HookConfig, registry: CollectorRegistry, audit: AuditLog,
                 runner: Runner | None = None, clock: Callable[[], float] = time.monotonic,
                 fleet_fetch: Callable[[str], str] | None = None, wall: Callable[[], float] = time.time,
                 maintenance: MaintenanceSources | None = None) -> None:
        self.cfg = cfg
        self.metrics = HookMetrics(registry)
        self.audit = audit
        self.breaker = CircuitBreaker(cfg.breaker, clock=clock)
        self.fleet = FleetSize(cfg.breaker, fetch=fleet_fetch, clock=clock)
        self.filter = HostFilter(cfg.allow, cfg.deny)
        self._runner: Runner = runner or (lambda argv, t: run_argv(argv, t))
        self._host_re = cfg.host_regex()
        self._lock = threading.Lock()
        self._last: OrderedDict[str, str] = OrderedDict()
        #: host -> fingerprints of the firing alerts it is quarantined for.
        self.quarantined: dict[str, set[str]] = {}
        #: host -> wall times (s) its quarantines began (a re-hit is one after a release)
        self.episodes: dict[str, list[float]] = {}
        #: held host -> its place (``places.label`` of the alert that quarantined it)
        self.places: dict[str, str] = {}
        self._wall = wall
        self._clock = clock
        self.sources = maintenance or MaintenanceSources(cfg.maintenance.file, cfg.maintenance.alertmanager_url)
        self.windows = Maintenance()
        if self.sources.enabled:
            self.windows.set(self.sources.load())
        self._windows_read = clock()
        self._restore(audit.path)

    # ------------------------------------------------------------------ entry points
    def handle(self, payload: WebhookPayload, remote: str = "") -> list[Decision]:
        with self._lock:
            out = [self._decide(a) for a in payload.alerts]
            for d in out:
                self._record(d, remote=remote, receiver=payload.receiver)
            return out

    def reject(self, reason: str, remote: str = "") -> Decision:
        """A body that is not a payload: counted and audited like every decision."""
        d = Decision(fingerprint="", status="", alertname="", action="none", outcome="invalid", reason=reason)
        with self._lock:
            self._record(d, remote=remote, receiver="")
        return d

    def unauthorized(self, remote: str = "", path: str = "") -> Decision:
        """A request without the bearer token: refused before its body is read, counted and audited."""
        d = Decision(fingerprint="", status="", alertname="", action="none", outcome="unauthorized",
                     reason=f"missing or wrong bearer token on POST {path[:200]}")
        with self._lock:
            self._record(d, remote=remote, receiver="")
        return d

    def reset_breaker(self, remote: str = "") -> None:
        with self._lock:
            self.breaker.reset()
            self.metrics.circuit_open.set(0)
            self.audit.write({"decision": "breaker_reset", "remote": remote})

    # ------------------------------------------------------------------ policy
    def _decide(self, alert: WebhookAlert) -> Decision:
        firing = alert.status == "firing"
        d = Decision(fingerprint=alert.fingerprint, status=alert.status, alertname=alert.alertname,
                     action="quarantine" if firing else "release", outcome="")
        if self._last.get(alert.fingerprint) == alert.status:
            return self._done(d, "duplicate", "already decided for this fingerprint and status")
        rule = self._rule_for(alert.labels)
        if rule is None:
            d.action = "none"
            return self._done(d, "ignored", "no rule matches the alert's labels")
        d.rule = rule.name
        if not firing and not self.cfg.release_on_resolved:
            d.action = "none"
            return self._done(d, "ignored", "release_on_resolved is off")
        if firing and alert.labels.get(self.cfg.severity_label) == "ticket":
            d.action = "none"
            d.host = alert.labels.get(self.cfg.host_label)
            return self._done(d, "ticket", "a ticket (a standing condition for working hours): the hook never "
                                           "acts on one")
        try:
            d.host = check_host(alert.labels.get(self.cfg.host_label, ""), self._host_re)
        except InvalidHost as exc:
            d.host = alert.labels.get(self.cfg.host_label)
            return self._done(d, "invalid", str(exc))
        refused = self.filter.reason_to_refuse(d.host)
        if refused:
            return self._done(d, "denied", refused)
        values = template_values(d.host, alert.labels, alert.annotations, alert.fingerprint, alert.status)
        if firing:
            d.place = alert.labels.get(self.cfg.places.label) or None
            planned = self._maintenance(d.host, alert.labels)
            if planned:
                return self._done(d, "maintenance", planned)
            if d.host not in self.quarantined:
                capped = self._rehits(d.host)
                if capped:
                    return self._done(d, "rehit_cap", capped)
                capped = self._place_full(d.place)
                if capped:
                    return self._done(d, "place_cap", capped)
            reason = self.breaker.admit(d.host, self.fleet.get())
            self.metrics.circuit_open.set(1 if self.breaker.is_open else 0)
            if reason is not None:
                return self._done(d, "breaker_open", reason)
            plan = [(argv, timeout_of(a)) for a in rule.actions for argv in quarantine_argvs(a, values)]
        else:
            holders = self.quarantined.get(d.host)
            if not holders or alert.fingerprint not in holders:
                return self._done(d, "ignored", "host is not quarantined by this alert")
            if holders - {alert.fingerprint}:
                holders.discard(alert.fingerprint)
                return self._done(d, "ignored", f"host stays quarantined for {len(holders)} other alert(s)")
            plan = [(argv, timeout_of(a)) for a in rule.actions for argv in release_argvs(a, values)]
        if self.cfg.dry_run:
            d.commands = [{"argv": list(argv)} for argv, _ in plan]
            return self._done(d, "dry_run", "dry run: commands not run")
        for argv, timeout_s in plan:
            res = self._runner(argv, timeout_s)
            d.commands.append({"argv": list(res.argv), "returncode": res.returncode, "output": res.output})
            if not res.ok:
                return self._done(d, "failed", f"{argv[0]} exited {res.returncode}: {res.output[:200]}")
        if firing:
            self._hold(d.host, alert.fingerprint, d.place, self._wall())
            return self._done(d, "quarantined", f"{len(plan)} command(s) ok")
        self.quarantined.pop(d.host, None)
        self.places.pop(d.host, None)
        return self._done(d, "released", f"{len(plan)} command(s) ok")

    def _hold(self, host: str, fingerprint: str, place: str | None, at_s: float) -> None:
        if host not in self.quarantined:
            self.episodes.setdefault(host, []).append(at_s)
            if place:
                self.places[host] = place
        self.quarantined.setdefault(host, set()).add(fingerprint)

    # ------------------------------------------------------------------ planned work and caps
    def _maintenance(self, host: str, labels: dict[str, str]) -> str:
        """Why ``host`` is in planned work now ("" if it is not)."""
        label = self.cfg.maintenance.label
        if label and labels.get(label):
            return f"host in maintenance: the alert says {label}={printable(labels[label], 80)}"
        if self.sources.enabled and self._clock() - self._windows_read >= self.cfg.maintenance.refresh_s:
            self.windows.set(self.sources.refresh())  # keeps the last good windows on errors
            self._windows_read = self._clock()
        w = window_for_labels(self.windows, labels, int(self._wall() * 1000), self.cfg.host_label)
        if w is None:
            return ""
        what = ",".join(w.hosts) if w.hosts else f"{w.attribute}={w.value}"
        return f"host in a maintenance window ({printable(what, 80)}: {printable(w.reason, 160) or 'no reason given'})"

    def _rehits(self, host: str) -> str:
        """Why quarantining ``host`` once more is refused ("" if it may be)."""
        cutoff = self._wall() - self.cfg.rehits.window_s
        earlier = [t for t in self.episodes.get(host, ()) if t >= cutoff]
        self.episodes[host] = earlier
        if len(earlier) <= self.cfg.rehits.max:
            return ""
        return (f"host {host} was quarantined {len(earlier)} times in the last {self.cfg.rehits.window_s / 86400:g} "
                f"days (released and hit again {len(earlier) - 1} times; cap {self.cfg.rehits.max} re-hits): a host "
                f"that keeps coming back needs a person (diagnostics, an RMA), not another cordon")

    def _place_full(self, place: str | None) -> str:
        """Why one more host of ``place`` is refused ("" if it may be drained)."""
        if not place:
            return ""
        held = sorted(h for h, p in self.places.items() if p == place and h in self.quarantined)
        cap = self.cfg.places.max_hosts
        if len(held) < cap:
            return ""
        return (f"{printable(place, 80)} already has {len(held)} host(s) quarantined by this hook "
                f"({', '.join(held[:10])}; cap {cap} per place): many hosts of one place failing is the place's "
                f"problem (power, network, cooling), see its escalation page")

    def _rule_for(self, labels: dict[str, str]) -> Rule | None:
        for rule in self.cfg.rules:
            if all(labels.get(k) == v for k, v in rule.match.items()):
                return rule
        return None

    def _done(self, d: Decision, outcome: str, reason: str) -> Decision:
        d.outcome = outcome
        d.reason = reason
        if outcome in _REMEMBERED and d.fingerprint:
            self._remember(d.fingerprint, d.status)
        return d

    def _remember(self, fingerprint: str, status: str) -> None:
        self._last[fingerprint] = status
        self._last.move_to_end(fingerprint)
        while len(self._last) > self.cfg.remember:
            self._last.popitem(last=False)

    def _record(self, d: Decision, remote: str, receiver: str) -> None:
        self.metrics.decisions.labels(d.action, d.outcome).inc()
        self.metrics.quarantined_hosts.set(len(self.quarantined))
        rec = dict(vars(d))  # shallow: dataclasses.asdict deep-copies, 5x the cost of a decision
        rec["decision"] = rec.pop("outcome")
        rec.update(dry_run=self.cfg.dry_run, remote=remote, receiver=receiver)
        self.audit.write(rec)
        level = logging.WARNING if d.outcome in ("quarantined", "released", "failed", "breaker_open") else logging.INFO
        log.log(level, "%s %s host=%s alert=%s fp=%s: %s", d.action, d.outcome, printable(d.host), printable(d.alertname),
                printable(d.fingerprint), printable(d.reason, 500))

    # ------------------------------------------------------------------ restart
    def _restore(self, path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        for rec in read_audit(path, on_cut_tail=lambda msg: log.warning("%s", msg)):
            fp, outcome, host = rec.get("fingerprint"), rec.get("decision"), rec.get("host")
            if not fp or rec.get("dry_run"):
                continue
            if outcome in _REMEMBERED:
                self._remember(fp, rec.get("status", ""))
            if outcome == "quarantined" and host:
                self._hold(host, fp, rec.get("place"), float(rec.get("ts", 0.0)))
            elif outcome == "released" and host:
                self.quarantined.pop(host, None)
                self.places.pop(host, None)
            elif rec.get("status") == "resolved" and host in self.quarantined:
                self.quarantined[host].discard(fp)  # resolved while other alerts hold the host
        self.metrics.quarantined_hosts.set(len(self.quarantined))


__all__ = ["Decision", "QuarantineHook"]
