"""RECOVERY and REBALANCE: workers that die or move partitions count exactly what an uninterrupted run counts."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .conftest import PARTITIONS, count_diff, last_boundary

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def folded(env: Any, workers: list[Any]) -> int:
    """Input records folded so far by the given workers (crashes + telemetry stages)."""
    total = 0
    for w in workers:
        st = w.status()
        if st:
            total += sum(v for k, v in st["positions"].items() if k.split("/")[0] in ("crashes", "telemetry"))
    return total


def no_storm(alerts: list[Any]) -> None:
    """At-least-once may re-send an alert, but not flood: at most 2 records per (key, state, ts)."""
    per = Counter((a.key, a.state, a.ts_ms) for a in alerts)
    assert max(per.values()) <= 2, per.most_common(3)


def test_kill9_and_restart_counts_exactly(stream_env: Any, events_file: Any, embedded_alerts: list[Any],
                                          reference_run: dict[str, Any], assert_parity: Any) -> None:
    env = stream_env
    env.create_topics(partitions=PARTITIONS)
    data = env.tmp / "data-shared"
    first = env.start_worker("first", extra=["--checkpoint-interval", "1", "--batch-max", "500"], data_dir=data)
    env.wait_for(lambda: first.status() is not None, what="worker up")
    total = env.publish(events_file)
    env.wait_for(lambda: folded(env, [first]) >= total * 0.35, what="a third of the stream")
    first.kill9()
    second = env.start_worker("second", extra=["--checkpoint-interval", "1"], data_dir=data)
    env.wait_for(lambda: env.drained([second]) and env.decided(last_boundary(events_file), [second]),
                 timeout_s=240, what="the restarted worker to drain")
    alerts = env.alerts()
    assert_parity(embedded_alerts, alerts)
    no_storm(alerts)
    diff = count_diff(second.counts()["detectors"], reference_run["counts"])
    assert not diff, "\n".join(diff) + f"\nstatus: {second.status()}"
    # the restart resumed where the first worker's commits were, not from the start of the topics
    st = second.status()
    consumed = st["events"].get("crash", 0) + st["events"].get("telemetry", 0)
    inputs = folded(env, [second])
    assert 0 < consumed < inputs, (consumed, inputs, st)  # 66-75 % of them in two runs here


def test_join_and_leave_mid_stream(stream_env: Any, events_file: Any, embedded_alerts: list[Any],
                                   reference_run: dict[str, Any], assert_parity: Any) -> None:
    env = stream_env
    env.create_topics(partitions=PARTITIONS)
    a = env.start_worker("a", extra=["--batch-max", "500"])
    env.wait_for(lambda: a.status() is not None, what="worker up")
    total = env.publish(events_file)
    env.wait_for(lambda: folded(env, [a]) >= total * 0.25, what="a quarter of the stream")
    b = env.start_worker("b", extra=["--batch-max", "500"])
    env.wait_for(lambda: b.status() is not None and folded(env, [b]) > 0, what="the second worker to take partitions")
    a.stop()  # leaves the group: every partition moves to b, whose state is rebuilt from the log
    env.wait_for(lambda: env.drained([b]) and env.decided(last_boundary(events_file), [b]),
                 timeout_s=240, what="the remaining worker to drain")
    alerts = env.alerts()
    assert_parity(embedded_alerts, alerts)
    no_storm(alerts)
    diff = count_diff(b.counts()["detectors"], reference_run["counts"])
    assert not diff, "\n".join(diff) + f"\nstatus: {b.status()}"
    assert b.status()["rebuilt_records"] > 0


def test_restart_waits_for_partitions_that_were_caught_up(stream_env: Any, events_file: Any,
                                                          embedded_alerts: list[Any], assert_parity: Any) -> None:
    """A worker killed while every partition was read to its end comes back to a backlog on all of them.

    Their last bundles said ``caught_up``: unless the restarted worker claims
    them again first, the backlog of the partition it happens to fetch first
    moves event time hours past the others' and theirs is dropped as out of
    order. With live settings (caught-up marks on, ``--idle-release 10``).
    """
    env = stream_env
    env.create_topics(partitions=PARTITIONS)
    lines = events_file.read_bytes().splitlines(keepends=True)
    cut = len(lines) * 2 // 5
    first_part, rest = env.tmp / "first.jsonl", env.tmp / "rest.jsonl"
    first_part.write_bytes(b"".join(lines[:cut]))
    rest.write_bytes(b"".join(lines[cut:]))
    live = ["--idle-release", "10", "--checkpoint-interval", "1"]
    data = env.tmp / "data-shared"
    a = env.start_worker("a", extra=live, data_dir=data)
    env.wait_for(lambda: a.status() is not None, what="worker up")
    env.publish(first_part)

    def all_caught_up() -> bool:
        st = a.status()
        return bool(st and st["held"]) and all(len(idle) == len(wms) > 0 for _, wms, idle in st["held"].values())

    env.wait_for(lambda: env.drained([a]) and all_caught_up(), timeout_s=180, what="every partition read to its end")
    a.kill9()
    env.publish(rest)  # the backlog lands on every partition while no worker runs
    b = env.start_worker("b", extra=live, data_dir=data)
    env.wait_for(lambda: env.drained([b]) and env.decided(last_boundary(events_file), [b]),
                 timeout_s=240, what="the restarted worker to drain")
    st = b.status()
    assert "out_of_order" not in st["engine_invalid"], st
    assert_parity(embedded_alerts, env.alerts())
