"""The example Alertmanager config: valid, routes each alert where the issue says, and its inhibit rules hold.

Routes are checked with ``amtool config routes test``; the inhibit rules
with a real Alertmanager running the shipped config (receivers emptied),
alerts posted to its API, and the inhibition read back from it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from servers import AM_EXAMPLE, Proc, alertmanager_test_config, require_binary, start_alertmanager, wait_until


def _amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("amtool"), *args], capture_output=True, text=True, timeout=60)


def test_amtool_check_config() -> None:
    res = _amtool("check-config", str(AM_EXAMPLE))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


@pytest.mark.parametrize(("labels", "receivers"), [
    # A sick host page goes to the quarantine hook AND pages a human (continue: true).
    (["alertname=FleetepiHostSick", "severity=page", "host=gpu-017", "incident=host:gpu-017"],
     "quarantine-hook,fleet-sre-page"),
    # A crash loop is a ticket: never the hook, never the pager.
    (["alertname=FleetepiHostSick", "severity=ticket", "host=gpu-017", "finding=crash_loop",
      "incident=host:gpu-017"], "fleet-sre-ticket"),
    # Pages of every detection alert page; their tickets file tickets.
    (["alertname=FleetepiHardwareCorrelation", "severity=page", "incident=signature:0a1b"], "fleet-sre-page"),
    (["alertname=FleetepiHardwareCorrelation", "severity=ticket", "finding=static_association",
      "incident=signature:0a1b"], "fleet-sre-ticket"),
    (["alertname=FleetepiTelemetrySpike", "severity=page", "incident=telemetry:xid:79"], "fleet-sre-page"),
    (["alertname=FleetepiTelemetrySpike", "severity=ticket", "finding=chronic", "host=gpu-5",
      "incident=host:gpu-5"], "fleet-sre-ticket"),
    (["alertname=FleetepiSignatureSpike", "severity=page", "incident=signature:0a1b"], "fleet-sre-page"),
    # The rack's page pages (and is no host for the hook).
    (["alertname=FleetepiRackEscalation", "severity=page", "finding=rack_escalation", "escalation=rack=r07",
      "incident=telemetry:xid:79"], "fleet-sre-page"),
    # Self-health follows its severity.
    (["alertname=FleetepiWorkerDown", "severity=page"], "fleet-sre-page"),
    (["alertname=FleetepiConsumerLag", "severity=ticket"], "fleet-sre-ticket"),
    # Anything unknown lands in tickets, never nowhere.
    (["alertname=SomethingElse"], "fleet-sre-ticket"),
])
def test_routes(labels: list[str], receivers: str) -> None:
    res = _amtool("config", "routes", "test", f"--config.file={AM_EXAMPLE}", *labels)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == receivers


def test_detections_are_grouped_by_incident() -> None:
    """One notification per incident: the detection route groups by ``incident`` alone."""
    import yaml

    cfg = yaml.safe_load(AM_EXAMPLE.read_text())
    (detections,) = [r for r in cfg["route"]["routes"] if r.get("matchers") == ['incident=~".+"']]
    assert detections["group_by"] == ["incident"]
    assert {r["receiver"] for r in detections["routes"]} == {"fleet-sre-page", "fleet-sre-ticket"}


# ---------------------------------------------------------------------- inhibit rules, on a real Alertmanager
@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    tmp = tmp_path_factory.mktemp("am-inhibit")
    token = tmp / "token"
    token.write_text("x\n")
    am = start_alertmanager(tmp / "am", alertmanager_test_config("http://127.0.0.1:9/alerts", token))
    try:
        yield am
    finally:
        am.stop()


def _post(am: Proc, *alerts: dict[str, str]) -> None:
    now = datetime.now(UTC)
    body = [{"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
            for labels in alerts]
    httpx.post(am.url + "/api/v2/alerts", json=body, timeout=5).raise_for_status()


def _state(am: Proc, **match: str) -> dict[str, Any]:
    for a in am.get("/api/v2/alerts"):
        if all(a["labels"].get(k) == v for k, v in match.items()):
            return dict(a["status"])
    raise KeyError(match)


def _host(host: str, rack: str, severity: str = "page", finding: str = "sick_host", tag: str = "") -> dict[str, str]:
    return {"alertname": "FleetepiHostSick", "severity": severity, "host": host, "finding": finding,
            "incident": f"host:{host}", "escalation": f"rack={rack}", "test": tag}


def test_a_place_page_holds_the_host_alerts_of_that_place_only(alertmanager: Proc) -> None:
    am = alertmanager
    _post(am,
          {"alertname": "FleetepiTelemetrySpike", "severity": "page", "finding": "cohort_outbreak",
           "attribute": "rack", "value": "r07", "escalation": "rack=r07", "incident": "telemetry:xid:79",
           "test": "place"},
          _host("gpu-071", "r07", tag="place"), _host("gpu-072", "r07", severity="ticket", finding="chronic",
                                                      tag="place"),
          _host("gpu-081", "r08", tag="place"))
    wait_until("the host pages of r07 inhibited",
               lambda: _state(am, host="gpu-071", test="place")["state"] == "suppressed")
    assert _state(am, host="gpu-071", test="place")["inhibitedBy"]
    assert _state(am, host="gpu-072", test="place")["state"] == "suppressed"  # the rack's ticket waits too
    assert _state(am, host="gpu-081", test="place")["state"] == "active"  # another rack: not held
    assert _state(am, attribute="rack", value="r07", test="place")["state"] == "active"  # the place's page goes out


def test_a_rack_escalation_holds_its_rack_pages(alertmanager: Proc) -> None:
    am = alertmanager
    _post(am,
          {"alertname": "FleetepiRackEscalation", "severity": "page", "finding": "rack_escalation",
           "attribute": "rack", "value": "r02", "kind": "host_spike", "escalation": "rack=r02",
           "incident": "rack=r02", "test": "escalation"},
          _host("gpu-021", "r02", tag="escalation"), _host("gpu-031", "r03", tag="escalation"))
    wait_until("the host page of r02 inhibited",
               lambda: _state(am, host="gpu-021", test="escalation")["state"] == "suppressed")
    assert _state(am, host="gpu-031", test="escalation")["state"] == "active"


def test_a_ticket_on_a_place_does_not_mute_a_host_page(alertmanager: Proc) -> None:
    """A static association with rack r09 (a ticket) is no reason to hold a sick host of r09."""
    am = alertmanager
    _post(am,
          {"alertname": "FleetepiHardwareCorrelation", "severity": "ticket", "finding": "static_association",
           "signature": "SIGILL | x", "attribute": "rack", "value": "r09", "escalation": "rack=r09",
           "incident": "signature:0a1b", "test": "ticket"},
          _host("gpu-091", "r09", tag="ticket"))
    wait_until("both alerts in Alertmanager", lambda: _state(am, host="gpu-091", test="ticket")["state"] != "unprocessed")
    assert _state(am, host="gpu-091", test="ticket")["state"] == "active"


def test_helm_copy_of_the_config_is_identical() -> None:
    """helm can only read files inside the chart: scripts/sync-helm-files.sh copies it."""
    copy = Path(__file__).resolve().parents[2] / "helm" / "fleetepi" / "files" / "alertmanager.yml"
    assert copy.read_bytes() == AM_EXAMPLE.read_bytes(), "run scripts/sync-helm-files.sh"
