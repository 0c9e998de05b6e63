"""The quarantine hook over real HTTP, running real (fake) kubectl/scontrol executables.

Each test starts a ``HookServer`` on a free port with a fresh registry and
audit log; ``kubectl``/``scontrol`` are tiny scripts first on PATH that record
their argv, so the assertions are on the exact command lines run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from fleetepi.hook.audit import AuditLog, read_audit
from fleetepi.hook.config import parse_config
from fleetepi.hook.decider import QuarantineHook
from fleetepi.hook.server import HookServer
from servers import recorded_argv

TOKEN = "t0ken-for-tests"
_fp = itertools.count(1)


class Hook:
    """A running hook plus what a test reads back: argv files, audit log, metrics."""

    def __init__(self, server: HookServer, registry: CollectorRegistry, audit: Path, bindir: Path) -> None:
        self.server, self.registry, self.audit, self.bindir = server, registry, audit, bindir
        self.client = httpx.Client(base_url=server.url, timeout=10.0)

    def post(self, body: Any, token: str | None = TOKEN, path: str = "/alerts") -> httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if isinstance(body, (bytes, str)):
            return self.client.post(path, content=body, headers=headers)
        return self.client.post(path, json=body, headers=headers)

    def kubectl(self) -> list[list[str]]:
        return [argv[1:] for argv in recorded_argv(self.bindir, "kubectl")]

    def scontrol(self) -> list[list[str]]:
        return [argv[1:] for argv in recorded_argv(self.bindir, "scontrol")]

    def decisions(self) -> list[str]:
        return [r["decision"] for r in read_audit(self.audit)]

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


K8S_RULE = {"name": "sick-k8s", "match": {"alertname": "FleetepiHostSick"},
            "actions": [{"type": "kubernetes", "cordon": True, "taint": "fleetepi.io/quarantine=true:NoSchedule"}]}


@pytest.fixture
def hook_factory(tmp_path: Path, fake_bin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Hook]]:
    monkeypatch.setenv("PATH", f"{fake_bin}:{__import__('os').environ['PATH']}")
    made: list[Hook] = []

    def make(**overrides: Any) -> Hook:
        cfg_map: dict[str, Any] = {"token_env": "UNUSED", "audit_log": str(tmp_path / f"audit{len(made)}.jsonl"),
                                   "breaker": {"fleet_size": 1000, "max_hosts": 5, "max_percent": 50},
                                   "rules": [K8S_RULE], "release_on_resolved": True}
        cfg_map.update(overrides)
        cfg = parse_config(cfg_map)
        registry = CollectorRegistry()
        audit = AuditLog(cfg.audit_log)
        server = HookServer("127.0.0.1:0", QuarantineHook(cfg, registry, audit), TOKEN, registry)
        server.start_background()
        hook = Hook(server, registry, Path(cfg.audit_log), fake_bin)
        made.append(hook)
        return hook

    yield make
    for h in made:
        h.client.close()
        h.server.shutdown()
        h.server.server_close()
        h.server.hook.audit.close()


def alert(host: str = "gpu-017", status: str = "firing", fingerprint: str | None = None,
          alertname: str = "FleetepiHostSick", **labels: str) -> dict[str, Any]:
    return {"status": status, "fingerprint": fingerprint or f"fp{next(_fp):04d}",
            "labels": {"alertname": alertname, "host": host, "severity": "page", "kind": "host_spike", **labels},
            "annotations": {"summary": f"Host {host} is sick"}, "startsAt": "2026-03-02T08:15:00Z",
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus/graph"}


def payload(*alerts: dict[str, Any]) -> dict[str, Any]:
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return {"version": "4", "status": status, "receiver": "quarantine-hook", "groupKey": "{}:{}",
            "truncatedAlerts": 0, "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093", "alerts": list(alerts)}


# ---------------------------------------------------------------------- auth and validation
@pytest.mark.parametrize("token", [None, "wrong", TOKEN[:-1]], ids=["no header", "wrong token", "prefix of the token"])
def test_unauthorized_is_401_and_nothing_runs(hook_factory: Callable[..., Hook], token: str | None) -> None:
    h = hook_factory()
    r = h.post(payload(alert()), token=token)
    assert r.status_code == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert h.kubectl() == []


@pytest.mark.parametrize(("body", "reason"), [
    (b"{not json", "malformed JSON"),
    ({"version": "3", "status": "firing", "alerts": []}, "$.version"),
    ({"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": {}}]}, "fingerprint"),
    ({"version": "4", "status": "burning", "alerts": []}, "$.status"),
    ({"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": {"a": 1}, "fingerprint": "x"}]},
     "$.alerts[0].labels"),
])
def test_bad_payload_is_400_with_reason(hook_factory: Callable[..., Hook], body: Any, reason: str) -> None:
    h = hook_factory()
    r = h.post(body)
    assert r.status_code == 400
    assert reason in r.json()["error"]
    assert h.kubectl() == []
    assert h.metric("fleetepi_hook_decisions_total", action="none", outcome="invalid") == 1
    assert read_audit(h.audit)[-1]["decision"] == "invalid"


def test_metrics_and_health_routes(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    assert h.client.get("/healthz").text == "ok\n"
    text = h.client.get("/metrics").text
    assert 'fleetepi_hook_decisions_total{action="quarantine",outcome="quarantined"} 0.0' in text
    assert "fleetepi_hook_circuit_open 0.0" in text


# ---------------------------------------------------------------------- acting
def test_quarantine_runs_the_exact_kubectl_commands(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    r = h.post(payload(alert("gpu-017", fingerprint="aaa1")))
    assert r.status_code == 200
    assert r.json()["decisions"][0]["outcome"] == "quarantined"
    assert h.kubectl() == [
        ["cordon", "gpu-017"],
        ["taint", "nodes", "gpu-017", "fleetepi.io/quarantine=true:NoSchedule", "--overwrite"],
    ]
    assert h.metric("fleetepi_hook_quarantined_hosts") == 1
    assert h.metric("fleetepi_hook_decisions_total", action="quarantine", outcome="quarantined") == 1
    rec = read_audit(h.audit)[-1]
    assert rec["decision"] == "quarantined" and rec["host"] == "gpu-017" and rec["fingerprint"] == "aaa1"
    assert rec["commands"][0] == {"argv": ["kubectl", "cordon", "gpu-017"], "returncode": 0,
                                  "output": "kubectl (fake): cordon gpu-017"}
    assert rec["rule"] == "sick-k8s" and rec["remote"] == "127.0.0.1" and rec["ts"] > 0


def test_label_action_and_release(hook_factory: Callable[..., Hook]) -> None:
    rule = {"name": "lbl", "match": {"alertname": "FleetepiHostSick"},
            "actions": [{"type": "kubernetes", "cordon": True, "label": "fleetepi.io/quarantine=true",
                         "taint": "fleetepi.io/quarantine:NoExecute", "kubectl_args": ["--context", "prod"]}]}
    h = hook_factory(rules=[rule])
    h.post(payload(alert("gpu-005", fingerprint="f5")))
    h.post(payload(alert("gpu-005", status="resolved", fingerprint="f5")))
    assert h.kubectl() == [
        ["--context", "prod", "cordon", "gpu-005"],
        ["--context", "prod", "taint", "nodes", "gpu-005", "fleetepi.io/quarantine:NoExecute", "--overwrite"],
        ["--context", "prod", "label", "nodes", "gpu-005", "fleetepi.io/quarantine=true", "--overwrite"],
        ["--context", "prod", "uncordon", "gpu-005"],
        ["--context", "prod", "taint", "nodes", "gpu-005", "fleetepi.io/quarantine:NoExecute-"],
        ["--context", "prod", "label", "nodes", "gpu-005", "fleetepi.io/quarantine-"],
    ]
    assert h.decisions() == ["quarantined", "released"]
    assert h.metric("fleetepi_hook_quarantined_hosts") == 0


def test_slurm_drain_and_resume(hook_factory: Callable[..., Hook]) -> None:
    rule = {"name": "slurm", "match": {"alertname": "FleetepiHostSick"},
            "actions": [{"type": "slurm", "reason": "fleetepi {alertname}: {summary}"}]}
    h = hook_factory(rules=[rule])
    h.post(payload(alert("node17", fingerprint="s1")))
    h.post(payload(alert("node17", status="resolved", fingerprint="s1")))
    assert h.scontrol() == [
        ["update", "nodename=node17", "state=drain", "reason=fleetepi FleetepiHostSick: Host node17 is sick"],
        ["update", "nodename=node17", "state=resume"],
    ]


def test_command_action_argv_templating(hook_factory: Callable[..., Hook], fake_bin: Path) -> None:
    # The "command" is the fake kubectl script itself, so its argv is recorded.
    rule = {"name": "cmd", "match": {"alertname": "FleetepiHostSick"},
            "actions": [{"type": "command", "quarantine": [str(fake_bin / "kubectl"), "--host={host}", "{summary}",
                                                            "{fingerprint}"],
                         "release": [str(fake_bin / "kubectl"), "release", "{host}"]}]}
    h = hook_factory(rules=[rule])
    # A summary with shell metacharacters and a leading dash stays ONE harmless argument.
    a = alert("gpu-009", fingerprint="c9")
    a["annotations"]["summary"] = "--force; rm -rf / $(reboot) `id`"
    h.post(payload(a))
    assert h.kubectl() == [["--host=gpu-009", "force_ rm -rf / _(reboot) _id_", "c9"]]


def test_release_only_when_configured(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(release_on_resolved=False)
    h.post(payload(alert("gpu-001", fingerprint="r1")))
    r = h.post(payload(alert("gpu-001", status="resolved", fingerprint="r1")))
    assert r.json()["decisions"][0]["outcome"] == "ignored"
    assert [c[0] for c in h.kubectl()] == ["cordon", "taint"]  # no uncordon


def test_release_waits_for_the_last_alert_of_the_host(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    h.post(payload(alert("gpu-002", fingerprint="x1")))
    h.post(payload(alert("gpu-002", fingerprint="x2", kind="telemetry_spike")))
    h.post(payload(alert("gpu-002", status="resolved", fingerprint="x1")))
    assert "uncordon" not in [c[0] for c in h.kubectl()]
    h.post(payload(alert("gpu-002", status="resolved", fingerprint="x2", kind="telemetry_spike")))
    assert [c[0] for c in h.kubectl()].count("uncordon") == 1


def test_resolved_for_a_host_never_quarantined_does_nothing(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    r = h.post(payload(alert("gpu-003", status="resolved", fingerprint="nq")))
    assert r.json()["decisions"][0]["outcome"] == "ignored"
    assert h.kubectl() == []


def test_unmatched_alert_is_ignored(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    r = h.post(payload(alert("gpu-004", alertname="FleetepiSignatureSpike")))
    assert r.json()["decisions"][0]["outcome"] == "ignored"
    assert h.kubectl() == []


# ---------------------------------------------------------------------- idempotency
def test_idempotent_per_fingerprint_and_status(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    for _ in range(3):  # Alertmanager repeats a group every repeat_interval
        h.post(payload(alert("gpu-010", fingerprint="same")))
    assert [c[0] for c in h.kubectl()] == ["cordon", "taint"]
    assert h.decisions() == ["quarantined", "duplicate", "duplicate"]
    assert h.metric("fleetepi_hook_decisions_total", action="quarantine", outcome="duplicate") == 2
    # Resolved, then firing again: a new episode acts again.
    h.post(payload(alert("gpu-010", status="resolved", fingerprint="same")))
    h.post(payload(alert("gpu-010", fingerprint="same")))
    assert [c[0] for c in h.kubectl()] == ["cordon", "taint", "uncordon", "taint", "cordon", "taint"]


def test_memory_survives_a_restart(hook_factory: Callable[..., Hook], tmp_path: Path) -> None:
    audit = str(tmp_path / "shared-audit.jsonl")
    h1 = hook_factory(audit_log=audit)
    h1.post(payload(alert("gpu-011", fingerprint="keep")))
    h2 = hook_factory(audit_log=audit)  # a restarted hook reading the same audit log
    assert h2.post(payload(alert("gpu-011", fingerprint="keep"))).json()["decisions"][0]["outcome"] == "duplicate"
    assert h2.metric("fleetepi_hook_quarantined_hosts") == 1
    h2.post(payload(alert("gpu-011", status="resolved", fingerprint="keep")))
    assert [c[0] for c in h2.kubectl()][-2:] == ["uncordon", "taint"]


def test_restart_keeps_which_alerts_hold_a_host(hook_factory: Callable[..., Hook], tmp_path: Path) -> None:
    audit = str(tmp_path / "holders-audit.jsonl")
    h1 = hook_factory(audit_log=audit)
    h1.post(payload(alert("gpu-013", fingerprint="h1"), alert("gpu-013", fingerprint="h2")))
    h1.post(payload(alert("gpu-013", status="resolved", fingerprint="h1")))  # gpu-013 still held by h2
    h2 = hook_factory(audit_log=audit)
    d = h2.post(payload(alert("gpu-013", status="resolved", fingerprint="h2"))).json()["decisions"][0]
    assert d["outcome"] == "released"


def test_failed_command_is_500_and_retried(hook_factory: Callable[..., Hook], monkeypatch: pytest.MonkeyPatch) -> None:
    h = hook_factory()
    monkeypatch.setenv("FAKE_KUBECTL_RC", "1")
    r = h.post(payload(alert("gpu-012", fingerprint="boom")))
    assert r.status_code == 500  # Alertmanager retries on 5xx
    assert r.json()["decisions"][0]["outcome"] == "failed"
    assert h.metric("fleetepi_hook_quarantined_hosts") == 0
    monkeypatch.setenv("FAKE_KUBECTL_RC", "0")
    r = h.post(payload(alert("gpu-012", fingerprint="boom")))
    assert r.status_code == 200 and r.json()["decisions"][0]["outcome"] == "quarantined"


# ---------------------------------------------------------------------- safety
def test_dry_run_runs_nothing_and_logs_the_commands(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(dry_run=True)
    r = h.post(payload(alert("gpu-020", fingerprint="d1")))
    d = r.json()["decisions"][0]
    assert d["outcome"] == "dry_run"
    assert d["commands"] == [{"argv": ["kubectl", "cordon", "gpu-020"]},
                             {"argv": ["kubectl", "taint", "nodes", "gpu-020",
                                       "fleetepi.io/quarantine=true:NoSchedule", "--overwrite"]}]
    assert h.kubectl() == []
    assert read_audit(h.audit)[-1]["dry_run"] is True
    assert h.metric("fleetepi_hook_quarantined_hosts") == 0


@pytest.mark.parametrize("host", [
    "node1; rm -rf /",      # shell injection
    "-rf",                  # option injection
    "$(reboot)",            # command substitution
    "node1 node2",          # a second argument
    "../../etc/passwd",     # path
    "",                     # missing
    "a" * 300,              # too long
])
def test_host_names_are_validated(hook_factory: Callable[..., Hook], host: str) -> None:
    h = hook_factory()
    r = h.post(payload(alert(host)))
    assert r.status_code == 200
    d = r.json()["decisions"][0]
    assert d["outcome"] == "invalid" and "host-name pattern" in d["reason"]
    assert h.kubectl() == []
    assert h.metric("fleetepi_hook_decisions_total", action="quarantine", outcome="invalid") == 1


def test_deny_and_allow_lists(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(allow=["gpu-*"], deny=["gpu-login-*"])
    outcomes = [h.post(payload(alert(host))).json()["decisions"][0] for host in ("gpu-login-1", "cpu-7", "gpu-030")]
    assert [d["outcome"] for d in outcomes] == ["denied", "denied", "quarantined"]
    assert "deny pattern 'gpu-login-*'" in outcomes[0]["reason"]
    assert outcomes[1]["reason"] == "host matches no allow pattern"
    assert h.kubectl() == [["cordon", "gpu-030"],
                           ["taint", "nodes", "gpu-030", "fleetepi.io/quarantine=true:NoSchedule", "--overwrite"]]


def test_breaker_trips_at_max_hosts(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(breaker={"fleet_size": 1000, "max_hosts": 2, "max_percent": 50})
    hosts = ["gpu-101", "gpu-102", "gpu-103", "gpu-104"]
    outcomes = [h.post(payload(alert(x))).json()["decisions"][0]["outcome"] for x in hosts]
    assert outcomes == ["quarantined", "quarantined", "breaker_open", "breaker_open"]
    assert [c[1] for c in h.kubectl() if c[0] == "cordon"] == ["gpu-101", "gpu-102"]
    assert h.metric("fleetepi_hook_circuit_open") == 1
    assert h.metric("fleetepi_hook_decisions_total", action="quarantine", outcome="breaker_open") == 2
    rec = [r for r in read_audit(h.audit) if r["decision"] == "breaker_open"][0]
    assert "limit 2 (max_hosts 2)" in rec["reason"]


def test_breaker_trips_at_percent_of_fleet(hook_factory: Callable[..., Hook]) -> None:
    # 10 % of 30 hosts = 3 hosts, fewer than max_hosts 10.
    h = hook_factory(breaker={"fleet_size": 30, "max_hosts": 10, "max_percent": 10})
    outcomes = [h.post(payload(alert(f"gpu-2{i:02d}"))).json()["decisions"][0] for i in range(5)]
    assert [d["outcome"] for d in outcomes] == ["quarantined"] * 3 + ["breaker_open"] * 2
    assert "limit 3 (10 % of 30 hosts)" in outcomes[3]["reason"]


def test_breaker_uses_scraped_fleet_size(hook_factory: Callable[..., Hook]) -> None:
    from prometheus_client import Gauge, start_http_server

    reg = CollectorRegistry()
    Gauge("fleetepi_hosts", "hosts", registry=reg).set(20)
    server, _ = start_http_server(0, addr="127.0.0.1", registry=reg)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        h = hook_factory(breaker={"fleet_size_url": url, "max_hosts": 10, "max_percent": 10})
        outcomes = [h.post(payload(alert(f"gpu-3{i:02d}"))).json()["decisions"][0]["outcome"] for i in range(3)]
    finally:
        server.shutdown()
    assert outcomes == ["quarantined", "quarantined", "breaker_open"]  # 10 % of 20 = 2


def test_unknown_fleet_size_fails_closed(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(breaker={"fleet_size_url": "http://127.0.0.1:9/metrics", "max_hosts": 10, "max_percent": 10})
    d = h.post(payload(alert("gpu-400"))).json()["decisions"][0]
    assert d["outcome"] == "breaker_open" and "fleet size unknown" in d["reason"]
    assert h.kubectl() == []


def test_breaker_reset_and_releases_while_open(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(breaker={"fleet_size": 1000, "max_hosts": 1, "max_percent": 50})
    h.post(payload(alert("gpu-501", fingerprint="b1")))
    assert h.post(payload(alert("gpu-502", fingerprint="b2"))).json()["decisions"][0]["outcome"] == "breaker_open"
    # Giving a host back is allowed while the breaker is open.
    d = h.post(payload(alert("gpu-501", status="resolved", fingerprint="b1"))).json()["decisions"][0]
    assert d["outcome"] == "released"
    assert h.post({}, path="/breaker/reset", token="bad").status_code == 401
    assert h.post({}, path="/breaker/reset").json() == {"breaker": "closed"}
    assert h.metric("fleetepi_hook_circuit_open") == 0
    # The refused alert was not remembered: its next repeat acts.
    assert h.post(payload(alert("gpu-502", fingerprint="b2"))).json()["decisions"][0]["outcome"] == "quarantined"
    assert "breaker_reset" in h.decisions()


def test_audit_log_has_one_line_per_decision(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory(deny=["gpu-deny"])
    h.post(payload(alert("gpu-600", fingerprint="a1"), alert("gpu-deny", fingerprint="a2"),
                   alert("bad host", fingerprint="a3"), alert("gpu-601", alertname="Other", fingerprint="a4")))
    h.post(payload(alert("gpu-600", fingerprint="a1")))
    h.post(b"[]")
    recs = read_audit(h.audit)
    assert [r["decision"] for r in recs] == ["quarantined", "denied", "invalid", "ignored", "duplicate", "invalid"]
    for r in recs:
        assert {"ts", "decision", "action", "host", "fingerprint", "status", "reason", "dry_run", "remote"} <= set(r)


# ---------------------------------------------------------------------- incidents: tickets, planned work, caps
def test_a_ticket_is_never_acted_on(hook_factory: Callable[..., Hook]) -> None:
    """A crash loop or a chronic host files a ticket: no cordon, whatever rule matches."""
    h = hook_factory()
    r = h.post(payload(alert("gpu-020", fingerprint="t1", severity="ticket", finding="crash_loop")))
    d = r.json()["decisions"][0]
    assert d["outcome"] == "ticket" and "never acts" in d["reason"]
    assert h.post(payload(alert("gpu-020", fingerprint="t1", severity="ticket"))).json()["decisions"][0][
        "outcome"] == "duplicate"
    assert h.kubectl() == []
    assert h.metric("fleetepi_hook_decisions_total", action="none", outcome="ticket") == 1


def test_a_host_in_maintenance_by_its_label_is_not_quarantined(hook_factory: Callable[..., Hook]) -> None:
    h = hook_factory()
    r = h.post(payload(alert("gpu-021", fingerprint="m1", maintenance="planned-reboot")))
    assert r.json()["decisions"][0]["outcome"] == "maintenance"
    assert "maintenance=planned-reboot" in r.json()["decisions"][0]["reason"]
    assert h.kubectl() == []


def test_hosts_and_places_in_file_windows_are_not_quarantined(hook_factory: Callable[..., Hook],
                                                               tmp_path: Path) -> None:
    """The maintenance file the workers read: a host window, and a rack window matched by the escalation label."""
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    path = tmp_path / "maintenance.yaml"
    path.write_text(f"windows:\n"
                    f"  - {{hosts: [gpu-022], start: '{(now - timedelta(hours=1)).isoformat()}', "
                    f"end: '{(now + timedelta(hours=1)).isoformat()}', reason: BIOS update}}\n"
                    f"  - {{cohort: rack=r07, start: '{(now - timedelta(hours=1)).isoformat()}', "
                    f"end: '{(now + timedelta(hours=1)).isoformat()}', reason: PDU swap}}\n"
                    f"  - {{hosts: [gpu-024], start: '{(now - timedelta(hours=3)).isoformat()}', "
                    f"end: '{(now - timedelta(hours=2)).isoformat()}', reason: over}}\n")
    h = hook_factory(maintenance={"file": str(path)})
    got = {host: h.post(payload(alert(host, escalation=rack))).json()["decisions"][0]
           for host, rack in (("gpu-022", "rack=r01"), ("gpu-023", "rack=r07"), ("gpu-024", "rack=r01"))}
    assert got["gpu-022"]["outcome"] == "maintenance" and "BIOS update" in got["gpu-022"]["reason"]
    assert got["gpu-023"]["outcome"] == "maintenance" and "rack=r07: PDU swap" in got["gpu-023"]["reason"]
    assert got["gpu-024"]["outcome"] == "quarantined"  # its window is over
    assert [c[1] for c in h.kubectl() if c[0] == "cordon"] == ["gpu-024"]


def test_silences_of_a_real_alertmanager_are_maintenance(hook_factory: Callable[..., Hook], tmp_path: Path) -> None:
    """A silence on ``rack="r05"`` mutes nothing in Alertmanager (no alert has that label) but tells the hook."""
    from datetime import UTC, datetime, timedelta

    from servers import start_alertmanager

    am = start_alertmanager(tmp_path / "am", {"route": {"receiver": "none"}, "receivers": [{"name": "none"}]})
    try:
        now = datetime.now(UTC)
        httpx.post(am.url + "/api/v2/silences", timeout=5, json={
            "matchers": [{"name": "rack", "value": "r05", "isRegex": False, "isEqual": True}],
            "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=2)).isoformat(),
            "createdBy": "dcops", "comment": "rack r05 firmware"}).raise_for_status()
        h = hook_factory(maintenance={"alertmanager_url": am.url})
        d = h.post(payload(alert("gpu-050", escalation="rack=r05"))).json()["decisions"][0]
        assert d["outcome"] == "maintenance" and "rack r05 firmware" in d["reason"]
        assert h.post(payload(alert("gpu-060", escalation="rack=r06"))).json()["decisions"][0]["outcome"] == \
            "quarantined"
    finally:
        am.stop()


def test_rehits_are_counted_and_capped(hook_factory: Callable[..., Hook], tmp_path: Path) -> None:
    """Quarantined, released, hit again: allowed ``rehits.max`` times, then refused with the reason, also after a restart."""
    audit = str(tmp_path / "rehit-audit.jsonl")
    h = hook_factory(audit_log=audit, rehits={"max": 1, "window_s": 86400})
    outcomes = []
    for i in range(2):
        outcomes.append(h.post(payload(alert("gpu-030", fingerprint=f"e{i}"))).json()["decisions"][0]["outcome"])
        h.post(payload(alert("gpu-030", status="resolved", fingerprint=f"e{i}")))
    d = h.post(payload(alert("gpu-030", fingerprint="e2"))).json()["decisions"][0]
    assert outcomes == ["quarantined", "quarantined"]
    assert d["outcome"] == "rehit_cap"
    assert "quarantined 2 times" in d["reason"] and "released and hit again 1 times" in d["reason"]
    assert [c[0] for c in h.kubectl()].count("cordon") == 2
    rec = read_audit(h.audit)[-1]
    assert rec["decision"] == "rehit_cap" and rec["host"] == "gpu-030"
    # not remembered: the repeat is decided again (still refused); and a restart remembers the episodes
    assert h.post(payload(alert("gpu-030", fingerprint="e2"))).json()["decisions"][0]["outcome"] == "rehit_cap"
    h2 = hook_factory(audit_log=audit, rehits={"max": 1, "window_s": 86400})
    assert h2.post(payload(alert("gpu-030", fingerprint="e3"))).json()["decisions"][0]["outcome"] == "rehit_cap"
    # another host is not affected
    assert h2.post(payload(alert("gpu-031", fingerprint="o1"))).json()["decisions"][0]["outcome"] == "quarantined"


def test_a_place_drains_at_most_its_cap(hook_factory: Callable[..., Hook], tmp_path: Path) -> None:
    """Half a rack paging: the first ``places.max_hosts`` hosts are drained, the rest wait under the rack's page."""
    audit = str(tmp_path / "place-audit.jsonl")
    h = hook_factory(audit_log=audit, places={"max_hosts": 2},
                     breaker={"fleet_size": 1000, "max_hosts": 10, "max_percent": 50})
    got = [h.post(payload(alert(f"gpu-07{i}", fingerprint=f"p{i}", escalation="rack=r07"))).json()["decisions"][0]
           for i in range(4)]
    assert [d["outcome"] for d in got] == ["quarantined", "quarantined", "place_cap", "place_cap"]
    assert "rack=r07 already has 2 host(s) quarantined" in got[2]["reason"] and "gpu-070, gpu-071" in got[2]["reason"]
    assert h.post(payload(alert("gpu-080", fingerprint="q0", escalation="rack=r08"))).json()["decisions"][0][
        "outcome"] == "quarantined"  # another rack
    assert h.metric("fleetepi_hook_circuit_open") == 0  # refused by the cap: the breaker never saw them
    # one of the rack's hosts released: the next one may go; a restart knows which hosts hold the rack
    h.post(payload(alert("gpu-070", status="resolved", fingerprint="p0")))
    h2 = hook_factory(audit_log=audit, places={"max_hosts": 2},
                      breaker={"fleet_size": 1000, "max_hosts": 10, "max_percent": 50})
    assert h2.post(payload(alert("gpu-072", fingerprint="p2", escalation="rack=r07"))).json()["decisions"][0][
        "outcome"] == "quarantined"
    assert h2.post(payload(alert("gpu-073", fingerprint="p3", escalation="rack=r07"))).json()["decisions"][0][
        "outcome"] == "place_cap"
