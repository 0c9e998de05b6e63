"""The shipped alert rules: they parse, their promtool unit tests pass, and each is actionable."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from servers import PROM_EXAMPLE, REPO, RULE_TESTS, RULES, require_binary

DETECTION_ALERTS = {"FleetepiSignatureSpike", "FleetepiHostSick", "FleetepiHardwareCorrelation", "FleetepiTelemetrySpike"}
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
    assert labels["severity"] in ("page", "ticket")
    assert labels["team"]
    assert labels["entity"]
    assert rule["alert"] in DETECTION_ALERTS or labels["kind"] == "health"
    assert ann["summary"] and ann["description"]
    # The runbook link points at a runbook that exists in this repository.
    url = ann["runbook_url"]
    m = re.search(r"/docs/runbooks/([A-Za-z]+\.md)$", url)
    assert m and m.group(1) == f"{rule['alert']}.md", url
    runbook = REPO / "docs" / "runbooks" / m.group(1)
    assert runbook.is_file(), runbook
    text = runbook.read_text()
    for section in ("## What it means", "## How to confirm", "## What to do"):
        assert section in text, f"{runbook.name} lacks {section!r}"


def test_detection_descriptions_name_the_evidence() -> None:
    for rule in _rules():
        if rule["alert"] in DETECTION_ALERTS:
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
