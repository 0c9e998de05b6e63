"""The shipped alert rules: they parse, their promtool unit tests pass, and each is actionable."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from servers import PROM_EXAMPLE, REPO, RULE_TESTS, RULES, require_binary

DETECTION_ALERTS = {"FleetepiSignatureSpike", "FleetepiHostSick", "FleetepiHardwareCorrelation", "FleetepiTelemetrySpike",
                    "FleetepiRackEscalation"}
#: A detection rule's severity is the detector's (the series' label; page unless it says ticket).
SEVERITY_FROM_SERIES = '{{ if eq $labels.severity "ticket" }}ticket{{ else }}page{{ end }}'
RUNBOOK = re.compile(r"/docs/runbooks/(?:\{\{ with \$labels\.finding \}\}\{\{ \. \}\}\{\{ else \}\}"
                     r"(?P<fallback>[A-Za-z]+)\{\{ end \}\}|(?P<name>[A-Za-z_]+))\.md$")
SECTIONS = ("## What it means", "## How to confirm", "## What to do")
HEALTH_ALERTS = {"FleetepiWorkerDown", "FleetepiConsumerLag", "FleetepiDeadLettersRising", "FleetepiAgentSpoolFilling",
                 "FleetepiAgentSpoolDropping", "FleetepiEventsInvalidRising", "FleetepiQuarantineCircuitOpen"}


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("promtool"), *args], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules() -> None:
    res = _promtool("check", "rules", str(RULES))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in res.stdout


def test_promtool_unit_tests() -> None:
    files = sorted(str(p) for p in RULE_TESTS.glob("*.yml"))
    assert len(files) >= 2
    res = _promtool("test", "rules", *files)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(files)


def test_example_prometheus_config_checks() -> None:
    res = _promtool("check", "config", str(PROM_EXAMPLE))
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_of_the_issue_is_there() -> None:
    names = {r["alert"] for r in _rules()}
    assert names == DETECTION_ALERTS | HEALTH_ALERTS


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_rule_is_actionable(rule: dict) -> None:
    labels, ann = rule["labels"], rule["annotations"]
    # Routing needs severity and team; the hook and humans need the entity.
    assert labels["severity"] in ("page", "ticket") or (rule["alert"] in DETECTION_ALERTS
                                                        and labels["severity"] == SEVERITY_FROM_SERIES)
    assert labels["team"]
    assert labels["entity"]
    assert rule["alert"] in DETECTION_ALERTS or labels["kind"] == "health"
    assert ann["summary"] and ann["description"]
    # The runbook link points at a runbook that exists in this repository: the finding's, else the alert's.
    url = ann["runbook_url"]
    m = RUNBOOK.search(url)
    assert m, url
    name = m.group("fallback") or m.group("name")
    assert name in (rule["alert"], "rack_escalation"), url
    runbook = REPO / "docs" / "runbooks" / f"{name}.md"
    assert runbook.is_file(), runbook
    text = runbook.read_text()
    for section in SECTIONS:
        assert section in text, f"{runbook.name} lacks {section!r}"


@pytest.mark.parametrize("finding", sorted(__import__("fleetepi.detectors.findings", fromlist=["FINDINGS"]).FINDINGS))
def test_every_finding_has_a_runbook(finding: str) -> None:
    """The detection rules link docs/runbooks/<finding>.md: one per finding the detectors can conclude."""
    from fleetepi.detectors.findings import FINDINGS

    runbook = REPO / "docs" / "runbooks" / f"{finding}.md"
    assert runbook.is_file(), runbook
    text = runbook.read_text()
    for section in SECTIONS:
        assert section in text, f"{runbook.name} lacks {section!r}"
    assert f"Severity **{FINDINGS[finding][0]}**" in text, f"{runbook.name} must say its severity"


def test_detection_descriptions_name_the_evidence() -> None:
    for rule in _rules():
        if rule["alert"] in DETECTION_ALERTS - {"FleetepiRackEscalation"}:  # its evidence: the hosts that paged
            desc = rule["annotations"]["description"]
            assert "p-value" in desc or "relative risk" in desc, rule["alert"]


def test_rules_only_use_series_of_the_metrics_contract() -> None:
    contract = (REPO / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`(fleetepi_[a-z_]+)`", contract))
    used: set[str] = set()
    for rule in _rules():
        used |= set(re.findall(r"\bfleetepi_[a-z_]+", rule["expr"]))
        for text in rule["annotations"].values():
            used |= set(re.findall(r"\bfleetepi_[a-z_]+", text))
    assert used, "no fleetepi series referenced"
    assert used <= documented, f"not in docs/metrics.md: {sorted(used - documented)}"
