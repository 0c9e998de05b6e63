"""End to end with the real servers, nothing mocked but the final kubectl.

fleetepi (a real Engine + PipelineMetrics over a recorded stream in which
one host turns sick) serves /metrics -> a real Prometheus scrapes it every
second and evaluates the shipped deploy/prometheus/rules.yml ->
FleetepiHostSick fires -> a real Alertmanager routes it with the shipped
deploy/alertmanager/alertmanager.yml (shortened waits) -> ``fleetepi hook``
(its own process, the shipped hook example made to act) receives it -> the
fake kubectl records the cordon and taint, the audit log the decision.
"""

from __future__ import annotations

import pytest

from fleetepi.hook.audit import read_audit
from servers import SICK_HOST, OpsStack, recorded_argv, wait_until

pytestmark = pytest.mark.integration


def test_sick_host_is_cordoned_end_to_end(ops_stack: OpsStack) -> None:
    prom = ops_stack.prometheus

    # 1. Prometheus scraped the pipeline and the hook.
    wait_until("both targets up", lambda: len(prom.query('up{job=~"fleetepi|fleetepi-hook"} == 1')) == 2)

    # 2. The shipped rule fires, with the labels and annotations on-call acts on.
    def host_sick() -> list[dict]:
        return [a for a in prom.alerts() if a["labels"]["alertname"] == "FleetepiHostSick" and a["state"] == "firing"]

    [alert] = wait_until("FleetepiHostSick firing in Prometheus", host_sick)
    assert alert["labels"]["host"] == SICK_HOST
    assert alert["labels"]["severity"] == "page" and alert["labels"]["entity"] == SICK_HOST
    assert f"Host {SICK_HOST} crashes above its expected rate" in alert["annotations"]["description"]
    assert "p-value n/a" not in alert["annotations"]["description"]  # the p-value query found the gauge
    # the finding's runbook (the bad CPU's odd crash shapes), the alert's own as the fallback
    assert alert["labels"]["finding"] == "suspected_bad_silicon"
    assert alert["annotations"]["runbook_url"].endswith("/docs/runbooks/suspected_bad_silicon.md")
    assert alert["labels"]["incident"] == f"host:{SICK_HOST}"

    # 3. Alertmanager holds it and routes it to the hook (and the pager).
    def in_am() -> list[dict]:
        return [a for a in ops_stack.alertmanager.get("/api/v2/alerts")
                if a["labels"]["alertname"] == "FleetepiHostSick"]

    [am_alert] = wait_until("FleetepiHostSick in Alertmanager", in_am)
    assert {r["name"] for r in am_alert["receivers"]} == {"quarantine-hook", "fleet-sre-page"}

    # 4. The hook decided (audit line written after its commands ran) and ran kubectl:
    #    cordon and taint of exactly that node.
    def quarantined() -> list[dict]:
        return [r for r in read_audit(ops_stack.audit_log) if r["decision"] == "quarantined"]

    audit = wait_until("the hook's quarantine decision", quarantined)
    calls = [argv[1:] for argv in recorded_argv(ops_stack.bindir, "kubectl")]
    assert calls[:2] == [
        ["cordon", SICK_HOST],
        ["taint", "nodes", SICK_HOST, "fleetepi.io/quarantine=true:NoSchedule", "--overwrite"],
    ]
    assert len(audit) == 1
    assert audit[0]["host"] == SICK_HOST and audit[0]["alertname"] == "FleetepiHostSick"
    assert audit[0]["receiver"] == "quarantine-hook"
    assert audit[0]["fingerprint"] == am_alert["fingerprint"]

    # 5. Prometheus sees the hook's own metrics: one host quarantined, breaker closed.
    wait_until("hook metrics scraped", lambda: prom.query("fleetepi_hook_quarantined_hosts == 1"))
    assert prom.query("fleetepi_hook_circuit_open")[0]["value"][1] == "0"
    # The pipeline's own health series are there too (what the dashboard draws).
    assert prom.query('fleetepi_events_total{kind="crash"} > 0')
    assert prom.query("fleetepi_hosts")[0]["value"][1] == "60"


def test_every_detection_rule_fires_on_real_pipeline_output(ops_stack: OpsStack) -> None:
    """The four detection rules, evaluated by Prometheus on the exporter's real series."""
    expected = {
        ("FleetepiHostSick", SICK_HOST),
        ("FleetepiSignatureSpike", "SIGSEGV | unw_step | libunwind.so.8"),
        ("FleetepiHardwareCorrelation", "bios=2.4"),
        ("FleetepiTelemetrySpike", "gpu-044"),
    }

    def firing() -> set[tuple[str, str]]:
        got = {(a["labels"]["alertname"], a["labels"]["entity"]) for a in ops_stack.prometheus.alerts()
               if a["state"] == "firing"}
        return got if expected <= got else set()

    got = wait_until("the four detection alerts firing", firing)
    # Every firing alert names its entity (a fleet-wide telemetry spike says "fleet").
    assert all(entity and not entity.startswith("=") for _, entity in got), got
    # Only the host alert reaches the hook; nothing else was quarantined.
    hosts = {r["host"] for r in read_audit(ops_stack.audit_log) if r["decision"] == "quarantined"}
    assert hosts == {SICK_HOST}


def test_repeated_notifications_do_not_act_twice(ops_stack: OpsStack) -> None:
    """Alertmanager re-sends the group (repeat_interval 2 s here); the hook answers duplicate."""
    wait_until("a duplicate decision in the audit log",
               lambda: any(r["decision"] == "duplicate" for r in read_audit(ops_stack.audit_log)))
    cordons = [a for a in recorded_argv(ops_stack.bindir, "kubectl") if a[1] == "cordon"]
    assert len(cordons) == 1
