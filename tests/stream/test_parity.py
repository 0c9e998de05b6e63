"""PARITY: a recorded stream gives the same alerts through the workers as through the embedded engine."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from detectors import DetectorConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

#: Firing times may differ by one evaluation step (each partition has its own event-time clock).
STEP_MS = int(DetectorConfig().step_s * 1000)


def firing(alerts: list[Any]) -> dict[str, list[int]]:
    """Alert key -> sorted distinct firing times (a re-sent alert is the same record again)."""
    out: dict[str, set[int]] = defaultdict(set)
    for a in alerts:
        if a.state == "firing":
            out[a.key].add(a.ts_ms)
    return {k: sorted(v) for k, v in out.items()}


def assert_parity(embedded: list[Any], streamed: list[Any]) -> None:
    want, got = firing(embedded), firing(streamed)
    assert want, "the recorded stream must make alerts fire, or parity proves nothing"
    assert set(got) == set(want), f"missing: {sorted(set(want) - set(got))}\nextra: {sorted(set(got) - set(want))}"
    for key, times in want.items():
        assert len(got[key]) == len(times), f"{key}: fired {len(got[key])} times, embedded {len(times)}"
        for t_want, t_got in zip(times, got[key]):
            assert abs(t_want - t_got) <= STEP_MS, f"{key}: fired at {t_got}, embedded at {t_want}"


@pytest.mark.parametrize("n_workers", [1, 2], ids=["one-worker", "two-workers"])
def test_same_alerts_as_embedded(stream_env: Any, events_file: Any, embedded_alerts: list[Any], n_workers: int) -> None:
    env = stream_env
    env.create_topics(partitions=4)
    workers = [env.start_worker(f"w{i}") for i in range(n_workers)]
    env.wait_for(lambda: all(w.status() is not None for w in workers), what="workers up")
    sent = env.publish(events_file)
    assert sent > 0
    env.wait_for(env.drained, timeout_s=240, what="workers to drain the stream")
    assert_parity(embedded_alerts, env.alerts())
    merged: dict[str, int] = defaultdict(int)
    for w in workers:
        for kind, n in w.status()["events"].items():
            merged[kind] += n
    assert merged["crash"] + merged["telemetry"] + merged["host"] == sent
