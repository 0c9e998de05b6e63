"""Root fixtures shared by every area's tests.

``kafka_broker``: one real single-node Kafka broker (KRaft, 127.0.0.1, free
port) for the whole session, started on first use and stopped at the end.
Set ``FLEETEPI_KAFKA_BOOTSTRAP=127.0.0.1:PORT`` to run against a broker you
started yourself (``fleetepi dev kafka start``) and skip the ~5 s start-up.
Tests that need their own topics should use unique topic names (or the
``kafka_topic_prefix`` they make themselves): the broker is shared.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: tools/ (development tools, not in the package: the local broker) importable as top-level modules
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address ``"127.0.0.1:PORT"`` of a running real Kafka broker."""
    external = os.environ.get("FLEETEPI_KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    import devbroker

    data = tmp_path_factory.mktemp("kafka")
    info = devbroker.start(data_dir=data, fresh=True)
    try:
        yield info.bootstrap
    finally:
        devbroker.stop(data)
