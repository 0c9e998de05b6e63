"""One set of default ports and one default broker, the same in the CLI, README, Helm, systemd and Prometheus.

A default that disagrees between two places is a page that never arrives:
Prometheus scraping the worker on a port the worker does not listen on, or
the README's ``--broker`` pointing at a broker ``dev kafka start`` put elsewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import msgspec
import yaml

from fleetepi.brokers import DEFAULT_BROKER, DEFAULT_KAFKA_PORT
from fleetepi.demo import demo_command
from fleetepi.hook.config import HookConfig
from fleetepi.stream.cli import publish_command, worker_command

ROOT = Path(__file__).resolve().parents[1]
WORKER, HOOK, AGENT = 9108, 9109, 9110


def _default(cmd: click.Command, name: str) -> object:
    return next(p.default for p in cmd.params if p.name == name)


def test_cli_defaults_are_the_documented_ports() -> None:
    assert _default(worker_command, "metrics_port") == WORKER
    assert _default(demo_command, "port") == WORKER          # the embedded pipeline stands in for a worker
    assert next(f.default for f in msgspec.structs.fields(HookConfig) if f.name == "listen").endswith(f":{HOOK}")
    assert _default(worker_command, "broker") == _default(publish_command, "broker") == DEFAULT_BROKER
    assert DEFAULT_BROKER.endswith(f":{DEFAULT_KAFKA_PORT}")


def test_helm_systemd_and_prometheus_use_the_same_ports() -> None:
    values = yaml.safe_load((ROOT / "helm/fleetepi/values.yaml").read_text())
    assert (values["worker"]["metrics"]["port"], values["hook"]["port"], values["agent"]["metrics"]["port"]) == (
        WORKER, HOOK, AGENT)
    env = (ROOT / "deploy/systemd/fleetepi.env.example").read_text()
    assert f"FLEETEPI_WORKER_METRICS_PORT={WORKER}" in env
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.example.yml").read_text())
    targets = {job["job_name"]: [t for sc in job.get("static_configs", []) for t in sc["targets"]]
               for job in prom["scrape_configs"]}
    assert targets["fleetepi-worker"] and all(t.endswith(f":{WORKER}") for t in targets["fleetepi-worker"])
    assert all(t.endswith(f":{HOOK}") for t in targets["fleetepi-hook"])


def test_readme_brokers_are_the_default() -> None:
    """Every ``--broker`` of the README names the broker ``dev kafka start`` starts (or a placeholder host)."""
    readme = (ROOT / "README.md").read_text()
    brokers = re.findall(r"--broker (kafka://\S+)", readme)
    assert brokers
    local = [b for b in brokers if "127.0.0.1" in b or "localhost" in b]
    assert local and all(b == DEFAULT_BROKER for b in local), local
