"""BAD MESSAGES: garbage, wrong schema and oversized records on every input topic are dead-lettered and counted."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from fleetepi.contract.codec import MAX_MESSAGE_BYTES
from fleetepi.stream.deadletter import decode_letter

pytestmark = [pytest.mark.integration, pytest.mark.timeout(200)]

GOOD_HOST = b'{"schema":"fleetepi.host/v1","ts":"2026-11-01T00:00:00Z","host":"h1","attributes":{"rack":"r1"}}'
GOOD_CRASH = b'{"schema":"fleetepi.crash/v1","ts":"2026-11-01T00:01:00Z","host":"h1","signature":"a!b"}'
GOOD_TELEMETRY = b'{"schema":"fleetepi.telemetry/v1","ts":"2026-11-01T00:01:00Z","host":"h1","kind":"xid","code":79}'

#: (what, bytes, reason): one of each per input topic.
BAD = [
    ("garbage bytes", b"\x00\xff\xfe not json at all", "malformed_json"),
    ("wrong schema", b'{"schema":"fleetepi.crash/v9","ts":"2026-11-01T00:00:00Z","host":"h1"}', "unknown_schema"),
    ("missing field", b'{"schema":"fleetepi.telemetry/v1","ts":"2026-11-01T00:00:00Z"}', "missing_field"),
    ("huge message", b'{"pad":"' + b"x" * (MAX_MESSAGE_BYTES + 10) + b'"}', "too_large"),
]


def test_every_bad_record_is_dead_lettered_and_the_worker_goes_on(stream_env: Any) -> None:
    env = stream_env
    env.create_topics(partitions=2)
    w = env.start_worker("w")
    env.wait_for(lambda: w.status() is not None, what="worker up")
    inputs = {env.names.hosts: GOOD_HOST, env.names.crashes: GOOD_CRASH, env.names.telemetry: GOOD_TELEMETRY}
    for topic, good in inputs.items():
        env.produce_raw(topic, [(b"h1", raw) for _, raw, _ in BAD] + [(b"h1", good)])

    def settled() -> bool:
        st = w.status()
        return bool(st) and sum(st["deadletters"].values()) >= len(BAD) * len(inputs) and \
            st["events"]["crash"] >= 1 and st["events"]["telemetry"] >= 1 and st["events"]["host"] >= 1

    env.wait_for(settled, timeout_s=90, what="dead letters and the good records")
    assert w.alive()
    letters = [decode_letter(r.value) for r in env.read_topic(env.names.deadletter)]
    got = {(dl.topic, dl.reason) for dl in letters}
    want = {(t, reason) for t in inputs for _, _, reason in BAD}
    assert want <= got, sorted(want - got)
    by_key = {(dl.topic, dl.reason): dl for dl in letters}
    garbage = by_key[(env.names.crashes, "malformed_json")]
    assert base64.b64decode(garbage.value_b64) == BAD[0][1]
    assert garbage.partition >= 0 and garbage.offset >= 0 and garbage.detail
    huge = by_key[(env.names.telemetry, "too_large")]
    assert huge.truncated and huge.size > MAX_MESSAGE_BYTES
    metrics = w.metrics_text()
    for topic in inputs:
        line = f'fleetepi_stream_deadletters_total{{reason="too_large",topic="{topic}"}} 1.0'
        assert line in metrics, line
    # one good record per topic went through after the bad ones
    st = w.status()
    assert st["events"]["crash"] == 1 and st["events"]["telemetry"] == 1 and st["events"]["host"] == 1
    assert json.dumps(st)  # the status page still answers
