"""The example Alertmanager config: valid, and it routes each alert where the issue says."""

from __future__ import annotations

import subprocess

import pytest

from servers import AM_EXAMPLE, require_binary


def _amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_binary("amtool"), *args], capture_output=True, text=True, timeout=60)


def test_amtool_check_config() -> None:
    res = _amtool("check-config", str(AM_EXAMPLE))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


@pytest.mark.parametrize(("labels", "receivers"), [
    # The sick host goes to the quarantine hook AND pages a human (continue: true).
    (["alertname=FleetepiHostSick", "severity=page", "host=gpu-017"], "quarantine-hook,fleet-sre-page"),
    # Hardware correlation and telemetry spikes page.
    (["alertname=FleetepiHardwareCorrelation", "severity=page"], "fleet-sre-page"),
    (["alertname=FleetepiTelemetrySpike", "severity=page"], "fleet-sre-page"),
    # Signature spikes are tickets.
    (["alertname=FleetepiSignatureSpike", "severity=ticket"], "fleet-sre-ticket"),
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
