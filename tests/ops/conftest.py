"""Fixtures of the operations tests: real Prometheus, Alertmanager, hook (tests/ops/servers.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import servers


@pytest.fixture(scope="session")
def ops_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.OpsStack]:
    """The running e2e chain; its ``prometheus`` has scraped a fleet with a sick host."""
    yield from servers.ops_stack_fixture(tmp_path_factory.mktemp("ops-stack"))


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A directory with fake ``kubectl``/``scontrol`` that record their argv."""
    return servers.fake_tools(tmp_path / "bin")
