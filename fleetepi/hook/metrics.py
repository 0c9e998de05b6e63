"""The hook's series (docs/metrics.md, "Quarantine hook"), on an injected registry.

Every (action, outcome) pair starts at 0 so a dashboard and the alert rules
see the series before the first decision.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

ACTIONS = ("quarantine", "release", "none")
OUTCOMES = ("quarantined", "released", "dry_run", "denied", "breaker_open", "duplicate", "invalid", "failed", "ignored",
            "unauthorized", "ticket", "maintenance", "rehit_cap", "place_cap")


class HookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.decisions = Counter("fleetepi_hook_decisions_total", "Decisions of the quarantine hook.",
                                 ["action", "outcome"], registry=registry)
        self.quarantined_hosts = Gauge("fleetepi_hook_quarantined_hosts",
                                       "Hosts the hook holds quarantined now.", registry=registry)
        self.circuit_open = Gauge("fleetepi_hook_circuit_open",
                                  "1 while the circuit breaker refuses quarantines.", registry=registry)
        for action in ACTIONS:
            for outcome in OUTCOMES:
                self.decisions.labels(action, outcome)


__all__ = ["ACTIONS", "OUTCOMES", "HookMetrics"]
