"""PARITY: a recorded stream gives the same alerts through the workers as through the embedded engine."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from .conftest import PARTITIONS, last_boundary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

def test_one_worker_same_alerts_as_embedded(reference_run: dict[str, Any], embedded_alerts: list[Any],
                                            assert_parity: Any) -> None:
    assert_parity(embedded_alerts, reference_run["alerts"])
    events = reference_run["status"]["events"]
    assert events["crash"] + events["telemetry"] + events["host"] == reference_run["sent"]
    assert reference_run["status"]["rebuilt_records"] == 0
    assert reference_run["status"]["inventory_sync_timeouts"] == 0


def test_two_workers_same_alerts_as_embedded(stream_env: Any, events_file: Any, embedded_alerts: list[Any],
                                             assert_parity: Any) -> None:
    env = stream_env
    env.create_topics(partitions=PARTITIONS)
    workers = [env.start_worker(f"w{i}") for i in range(2)]
    env.wait_for(lambda: all(w.status() is not None for w in workers), what="workers up")
    sent = env.publish(events_file)
    env.wait_for(lambda: env.drained() and env.decided(last_boundary(events_file)), timeout_s=240,
                 what="workers to drain the stream and decide the last boundary")
    assert_parity(embedded_alerts, env.alerts())
    merged: dict[str, int] = defaultdict(int)
    for w in workers:
        for kind, n in w.status()["events"].items():
            merged[kind] += n
    # every record seen (at least once: a partition that moved is counted by both owners)
    assert merged["crash"] + merged["telemetry"] + merged["host"] >= sent
