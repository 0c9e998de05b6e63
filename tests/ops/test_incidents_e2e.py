"""Incidents, not alert storms, with the real Prometheus, Alertmanager and hook (issue 13).

Each test replays a small fleet through the real pipeline (Engine +
PipelineMetrics), serves its /metrics, and lets a real Prometheus evaluate
the shipped rules, a real Alertmanager route, group and inhibit with the
shipped config (waits shortened, repeats an hour apart so every
notification is one incident), the real hook act, and a webhook receiver of
the test's own stand for the pager and the ticket system.

(a) A planned rolling reboot of 60 % of the hosts plus one real outbreak (a
    bad CPU): announced, the reboot pages nobody and the outbreak pages;
    unannounced, at most one page per rack, grouped by incident.
(b) All hosts of one rack report Xid 79 within an hour: exactly one
    notification reaches the pager; a host page under the rack is inhibited.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetepi.hook.audit import read_audit
from incident_fleet import Scenario, about_racks, rack_xid_storm, rolling_reboot
from servers import OpsStack, Recorder, incident_alertmanager_config, stack, wait_until

pytestmark = pytest.mark.integration

#: After the last expected notification, how long nothing else may arrive (group_wait and
#: group_interval are 1 s in these stacks).
QUIET_S = 6.0


def _run(tmp: Path, scenario: Scenario) -> Iterator[tuple[OpsStack, Recorder]]:
    rec = Recorder()
    try:
        for st in stack(tmp, scenario.events, am_config=incident_alertmanager_config(rec.url)):
            yield st, rec
    finally:
        rec.stop()


def _notified(rec: Recorder, path: str = "/page") -> list[dict[str, Any]]:
    return rec.at(path)


def _settle(rec: Recorder) -> None:
    """Wait until no notification arrived for QUIET_S seconds."""
    last = len(rec.received)
    quiet_since = time.monotonic()
    deadline = quiet_since + 60
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if len(rec.received) != last:
            last, quiet_since = len(rec.received), time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET_S:
            return


def _pipeline_pages(st: OpsStack) -> list[Any]:
    return [a for a in st.exporter.pipeline.sink.alerts if a.state == "firing" and a.is_page]


def _wait_for_outbreak(st: OpsStack, rec: Recorder, host: str) -> None:
    def paged() -> bool:
        return any(a["labels"].get("host") == host for n in _notified(rec) for a in n["alerts"])

    wait_until(f"the outbreak on {host} paged", paged)
    wait_until(f"the hook's decision on {host}",
               lambda: any(r.get("host") == host for r in read_audit(st.audit_log)) if st.audit_log.exists() else False)


# ---------------------------------------------------------------------- (a) the planned rolling reboot
@pytest.fixture(scope="module")
def announced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpsStack, Recorder, Scenario]]:
    sc = rolling_reboot(announced=True)
    for st, rec in _run(tmp_path_factory.mktemp("reboot-announced"), sc):
        yield st, rec, sc


@pytest.fixture(scope="module")
def unannounced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpsStack, Recorder, Scenario]]:
    sc = rolling_reboot(announced=False)
    for st, rec in _run(tmp_path_factory.mktemp("reboot-unannounced"), sc):
        yield st, rec, sc


def test_announced_reboot_pages_nobody_and_the_outbreak_pages(announced: tuple[OpsStack, Recorder, Scenario]
                                                              ) -> None:
    st, rec, sc = announced
    _wait_for_outbreak(st, rec, sc.sick_host)
    _settle(rec)
    # the pipeline: one page in the whole run, the outbreak's; the reboot's events were left out, counted
    assert [(a.host, a.finding) for a in _pipeline_pages(st)] == [(sc.sick_host, "suspected_bad_silicon")]
    assert st.exporter.pipeline.summary.in_maintenance >= 4 * len(sc.rebooted)
    assert st.prometheus.query("fleetepi_events_in_maintenance_total")[0]["value"][1] == str(
        st.exporter.pipeline.summary.in_maintenance)
    # the pager: one notification, the outbreak's incident
    pages = _notified(rec)
    assert [n["groupLabels"] for n in pages] == [{"incident": f"host:{sc.sick_host}"}]
    assert not _notified(rec, "/ticket")
    # the hook quarantined the sick host, and no host of the reboot
    decided = {r["host"]: r["decision"] for r in read_audit(st.audit_log) if r.get("host")}
    assert decided == {sc.sick_host: "quarantined"}


def test_unannounced_reboot_is_at_most_one_grouped_page_per_rack(unannounced: tuple[OpsStack, Recorder, Scenario]
                                                                  ) -> None:
    st, rec, sc = unannounced
    _wait_for_outbreak(st, rec, sc.sick_host)
    _settle(rec)
    # the pipeline: per rack of the reboot, at most one paged incident
    reboot_pages = [a for a in _pipeline_pages(st) if a.host != sc.sick_host]
    assert reboot_pages, "an unannounced reboot of 60 % of the fleet is news"
    for rack in sc.rebooted_racks:
        incidents = {a.incident for a in reboot_pages if rack in about_racks(a, sc.racks)}
        assert len(incidents) <= 1, (rack, incidents)
    # the pager: one notification per incident (grouped), at most one per rack of the reboot
    pages = _notified(rec)
    groups = [n["groupLabels"]["incident"] for n in pages]
    assert len(groups) == len(set(groups)), groups  # one notification per incident
    for n in pages:  # every alert of a notification belongs to its incident
        assert {a["labels"]["incident"] for a in n["alerts"]} == {n["groupLabels"]["incident"]}
    reboot_groups = [g for g in groups if g != f"host:{sc.sick_host}"]
    assert 1 <= len(reboot_groups) <= len(sc.rebooted_racks), groups
    for rack in sc.rebooted_racks:
        about = [n for n in pages if any(rack in about_racks(a["labels"], sc.racks) for a in n["alerts"])]
        assert len(about) <= 1, (rack, [n["groupLabels"] for n in about])
    assert f"host:{sc.sick_host}" in groups  # the outbreak still pages
    # the hook: the sick host only; a wave of the reboot never reached it
    decided = {r["host"]: r["decision"] for r in read_audit(st.audit_log) if r.get("host")}
    assert decided == {sc.sick_host: "quarantined"}


# ---------------------------------------------------------------------- (b) one rack's Xid 79 storm
@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpsStack, Recorder, Scenario]]:
    sc = rack_xid_storm(sick_in_rack=True)
    for st, rec in _run(tmp_path_factory.mktemp("rack-storm"), sc):
        yield st, rec, sc


def test_a_rack_storm_is_one_notification_and_its_host_pages_are_held(
        storm: tuple[OpsStack, Recorder, Scenario]) -> None:
    st, rec, sc = storm
    wait_until("the rack's page notified", lambda: _notified(rec))

    # the host page under the rack reached Alertmanager, inhibited by the rack's page
    def held() -> list[dict[str, Any]]:
        return [a for a in st.alertmanager.get("/api/v2/alerts") if a["labels"].get("host") == sc.sick_host]

    [host_alert] = wait_until("the host page in Alertmanager", held)
    wait_until("its inhibition", lambda: held()[0]["status"]["state"] == "suppressed")
    host_alert = held()[0]
    assert host_alert["status"]["inhibitedBy"], host_alert
    assert host_alert["labels"]["escalation"] == "rack=r03"
    _settle(rec)
    pages = _notified(rec)
    assert len(pages) == 1, [n["groupLabels"] for n in pages]
    (note,) = pages
    assert note["groupLabels"] == {"incident": "telemetry:xid:79"}
    labels = [a["labels"] for a in note["alerts"]]
    assert all("host" not in lb for lb in labels)  # the host page is held, not sent
    assert any(lb.get("attribute") == "rack" and lb.get("value") == "r03" for lb in labels)
    # nothing reached the hook: the one host alert was inhibited
    audit = read_audit(st.audit_log) if st.audit_log.exists() else []
    assert not [r for r in audit if r.get("host")]
