"""A source partition without traffic does not hold the detectors back forever (idle marks)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HOST = b'{"schema":"fleetepi.host/v1","ts":"2026-11-01T00:00:00Z","host":"h1","attributes":{"rack":"r1"}}'


def telemetry(minute: int) -> bytes:
    return (b'{"schema":"fleetepi.telemetry/v1","ts":"2026-11-01T%02d:%02d:00Z","host":"h1","kind":"ecc_corrected",'
            b'"count":3}' % (minute // 60, minute % 60))


def test_events_behind_a_quiet_partition_are_released(stream_env: Any) -> None:
    env = stream_env
    env.create_topics(partitions=2)  # one host: one telemetry partition and no crash partition ever has traffic
    w = env.start_worker("w", extra=["--idle-release", "1"])
    env.wait_for(lambda: w.status() is not None, what="worker up")
    env.produce_raw(env.names.hosts, [(b"h1", HOST)])
    # 60 error reports, then a cool reading ten minutes later: event time passes the last report's
    # step boundary plus the settle time, so every report is folded
    cool = b'{"schema":"fleetepi.telemetry/v1","ts":"2026-11-01T02:10:00Z","host":"h1","kind":"thermal","value":50.0}'
    env.produce_raw(env.names.telemetry, [(b"h1", telemetry(m)) for m in range(0, 120, 2)] + [(b"h1", cool)])

    def released() -> bool:
        return bool(w.counts()["detectors"].get("telemetry_host"))

    env.wait_for(released, timeout_s=60, what="idle marks to release the held events")
    assert w.counts()["detectors"]["telemetry_host"] == {"h1|ecc_corrected": 180.0}  # 60 events x 3 errors
