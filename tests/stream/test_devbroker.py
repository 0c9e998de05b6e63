"""The local broker: bound to 127.0.0.1 only, installed once, and answering through the real fixture."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import devbroker
import pytest
from click.testing import CliRunner

from fleetepi.stream.cli import dev_group, publish_command, worker_command


def test_properties_listen_on_loopback_only(tmp_path: Path) -> None:
    props = devbroker._properties(tmp_path, 19092, 19093)
    listeners = [line for line in props.splitlines() if "listeners=" in line]
    assert listeners and all("0.0.0.0" not in line and "127.0.0.1" in line for line in listeners)
    assert "group.initial.rebalance.delay.ms=0" in props
    assert "offsets.topic.replication.factor=1" in props


def test_cluster_id_is_kafkas_form() -> None:
    cid = devbroker._cluster_id()
    assert len(cid) == 22 and "=" not in cid


@pytest.mark.integration
def test_format_takes_a_cluster_id_that_starts_with_a_dash(tmp_path: Path) -> None:
    libs = devbroker.install()
    props = tmp_path / "server.properties"
    props.write_text(devbroker._properties(tmp_path, devbroker.free_port(), devbroker.free_port()))
    devbroker.format_storage([devbroker._java(), "-Xmx256m", "-cp", f"{libs}/*"], props, "-" + devbroker._cluster_id()[1:])
    assert "cluster.id=-" in (tmp_path / "logs" / "meta.properties").read_text()


@pytest.mark.integration
def test_install_is_idempotent_and_fast_when_cached() -> None:
    libs = devbroker.install()  # the session broker installed it already, or this does
    t0 = time.perf_counter()
    assert devbroker.install() == libs
    assert time.perf_counter() - t0 < 1.0
    jars = {p.name for p in libs.glob("*.jar")}
    assert any(j.startswith("kafka_2.13-4.") for j in jars)
    assert any(j.startswith("log4j-core-") for j in jars)
    assert any(j.startswith(("log4j-slf4j-impl-", "log4j-slf4j2-impl-")) for j in jars)


@pytest.mark.integration
def test_session_broker_answers(kafka_broker: str) -> None:
    assert kafka_broker.startswith("127.0.0.1:")
    assert devbroker.answers(kafka_broker)


def test_status_of_a_directory_without_broker(tmp_path: Path) -> None:
    result = CliRunner().invoke(dev_group, ["kafka", "status", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert '"running": false' in result.output
    assert not devbroker.stop(tmp_path)


@pytest.mark.parametrize("command", [worker_command, publish_command])
def test_commands_document_their_options(command: Any) -> None:
    result = CliRunner().invoke(command, ["--help"])
    assert result.exit_code == 0 and "--broker" in result.output


def test_publish_reports_an_unreachable_broker(tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text("")
    port = devbroker.free_port()
    result = CliRunner().invoke(publish_command, [str(events), "--broker", f"kafka://127.0.0.1:{port}",
                                                  "--no-create-topics"])
    assert result.exit_code != 0
    assert "cannot reach the broker" in result.output
