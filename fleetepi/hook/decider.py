"""From an Alertmanager notification to decisions: the hook's whole policy.

Per alert, in this order (the first that applies is the decision)::

    same fingerprint and status as last time  -> duplicate  (idempotent)
    no rule matches the labels                -> ignored
    resolved, release_on_resolved off         -> ignored
    host label missing or not a host name     -> invalid
    host on the deny list / not on allow list -> denied
    firing: breaker refuses                   -> breaker_open (not remembered: retried after reset)
    dry run                                   -> dry_run   (commands logged, not run)
    firing: every command exits 0             -> quarantined
    resolved, host quarantined by this hook   -> released  (only when its last alert resolved)
    a command fails                           -> failed    (not remembered: Alertmanager retries)

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

from fleetepi.hook.actions import RunResult, quarantine_argvs, release_argvs, run_argv, template_values, timeout_of
from fleetepi.hook.audit import AuditLog, read_audit
from fleetepi.hook.config import HookConfig, Rule
from fleetepi.hook.exceptions import InvalidHost
from fleetepi.hook.metrics import HookMetrics
from fleetepi.hook.payload import WebhookAlert, WebhookPayload
from fleetepi.hook.safety import CircuitBreaker, FleetSize, HostFilter, check_host
from fleetepi.hook.text import printable

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str], float], RunResult]

#: Outcomes after which the same (fingerprint, status) is a duplicate.
_REMEMBERED = frozenset({"quarantined", "released", "dry_run", "denied", "ignored", "invalid"})


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


class QuarantineHook:
    """The decision engine behind the HTTP server.

    :param runner: ``(argv, timeout_s) -> RunResult``; the real ``run_argv`` by default.
    :param fleet_fetch: ``url -> exposition text`` for the fleet-size scrape.
    """

    def __init__(self, cfg: HookConfig, registry: CollectorRegistry, audit: AuditLog,
                 runner: Runner | None = None, clock: Callable[[], float] = time.monotonic,
                 fleet_fetch: Callable[[str], str] | None = None) -> None:
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
            self.quarantined.setdefault(d.host, set()).add(alert.fingerprint)
            return self._done(d, "quarantined", f"{len(plan)} command(s) ok")
        self.quarantined.pop(d.host, None)
        return self._done(d, "released", f"{len(plan)} command(s) ok")

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
                self.quarantined.setdefault(host, set()).add(fp)
            elif outcome == "released" and host:
                self.quarantined.pop(host, None)
            elif rec.get("status") == "resolved" and host in self.quarantined:
                self.quarantined[host].discard(fp)  # resolved while other alerts hold the host
        self.metrics.quarantined_hosts.set(len(self.quarantined))


__all__ = ["Decision", "QuarantineHook"]
