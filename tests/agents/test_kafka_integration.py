"""The Kafka publisher against a real Apache Kafka broker: spool while away, resend in order, nothing lost."""

from __future__ import annotations

import time
import uuid

import pytest

from fleetepi.agents.publish.kafka import KafkaPublisher
from fleetepi.contract import HOST_SCHEMA, TELEMETRY_SCHEMA, Host, Telemetry, decode_event, ts_from_ms

pytestmark = pytest.mark.integration


def topics() -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    return {HOST_SCHEMA: f"agenttest-{tag}.hosts", TELEMETRY_SCHEMA: f"agenttest-{tag}.telemetry"}


def make_events(n: int, start: int = 0) -> list:
    out: list = []
    for i in range(start, start + n):
        if i % 10 == 0:
            out.append(Host(ts=ts_from_ms(i), host="gpu-a-001", attributes={"bios": f"2.{i}"}))
        else:
            out.append(Telemetry(ts=ts_from_ms(i), host="gpu-a-001", kind="xid", code=13, message=f"seq {i}"))
    return out


def create_topics(bootstrap: str, names: list[str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="fleetepi-agent-test")
    try:
        admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names])
    finally:
        admin.close()


def consume(bootstrap: str, topic: str, n: int, timeout_s: float = 30.0) -> list:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=1000)
    got: list = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            for rec in consumer:
                assert rec.key == b"gpu-a-001"
                got.append(decode_event(rec.value))
    finally:
        consumer.close()
    return got


def flush_until_empty(pub: KafkaPublisher, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while pub.spool.pending and time.monotonic() < deadline:
        pub._next_try = 0.0  # retry at once instead of waiting out the backoff
        pub.flush(timeout_s=10)
    assert pub.spool.pending == 0, "spool did not drain into the broker"


def publish_and_drain(pub: KafkaPublisher, events: list) -> None:
    for e in events:
        pub.publish(e)
    flush_until_empty(pub)


def dead_address() -> str:
    from devbroker import free_port

    return f"127.0.0.1:{free_port()}"


def split(events: list, t: dict[str, str]) -> dict[str, list]:
    return {t[HOST_SCHEMA]: [e for e in events if isinstance(e, Host)],
            t[TELEMETRY_SCHEMA]: [e for e in events if isinstance(e, Telemetry)]}


def test_agent_restart_resends_the_spool_in_order(kafka_broker, tmp_path):
    t = topics()
    create_topics(kafka_broker, list(t.values()))
    spool = tmp_path / "spool"
    away = KafkaPublisher([dead_address()], spool, topics=t, max_block_ms=500)
    evs = make_events(40)
    for e in evs:
        away.publish(e)
    away.flush(timeout_s=2)
    assert away.spool.pending == 40  # broker unreachable: everything spooled
    away.close()

    back = KafkaPublisher([kafka_broker], spool, topics=t)  # the agent restarts, the broker is there
    assert back.spool.pending == 40
    flush_until_empty(back)
    more = make_events(5, start=40)
    publish_and_drain(back, more)  # and it goes on as usual
    back.close()
    for topic, want in split(evs + more, t).items():
        assert consume(kafka_broker, topic, len(want)) == want  # nothing lost, same order


def test_broker_down_then_started_gets_everything(tmp_path):
    import devbroker

    from fleetepi.stream.exceptions import BrokerError

    port = devbroker.free_port()
    t = topics()
    pub = KafkaPublisher([f"127.0.0.1:{port}"], tmp_path / "spool", topics=t, max_block_ms=1000)
    first = make_events(25)
    for e in first:
        pub.publish(e)
    pub.flush(timeout_s=2)
    assert pub.spool.pending == 25
    data = tmp_path / "broker"
    try:
        try:
            info = devbroker.start(data_dir=data, port=port, fresh=True)
        except BrokerError as exc:
            pytest.fail(f"could not start a Kafka broker: {exc}")
        create_topics(info.bootstrap, list(t.values()))
        flush_until_empty(pub)
        second = make_events(15, start=25)
        publish_and_drain(pub, second)
        pub.close()
        for topic, want in split(first + second, t).items():
            assert consume(info.bootstrap, topic, len(want)) == want
    finally:
        devbroker.stop(data)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_broker_gone_mid_run_leaves_no_producer_behind(tmp_path):
    """Each failed round discards its producer; none may stay alive, retrying, holding records it could
    deliver later behind the resent ones, nor print a traceback into the agent's log when it is collected
    (kafka-python 3.0's ``close`` raises when records are still queued)."""
    import threading

    import devbroker

    port = devbroker.free_port()
    t = topics()
    data = tmp_path / "broker"
    pub = KafkaPublisher([f"127.0.0.1:{port}"], tmp_path / "spool", topics=t, max_block_ms=1000)
    try:
        info = devbroker.start(data_dir=data, port=port, fresh=True)
        create_topics(info.bootstrap, list(t.values()))
        first = make_events(20)
        publish_and_drain(pub, first)
        devbroker.stop(data)
        gone = make_events(30, start=20)
        for i, e in enumerate(gone):
            pub.publish(e)
            if i % 10 == 9:
                pub._next_try = 0.0
                pub.flush(timeout_s=1)
        assert pub.spool.pending == 30
        senders = [th for th in threading.enumerate() if th.name.endswith("-network-thread") and th.is_alive()]
        deadline = time.monotonic() + 10
        while len(senders) > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
            senders = [th for th in senders if th.is_alive()]
        assert len(senders) <= 1, [th.name for th in senders]
        info = devbroker.start(data_dir=data, port=port)
        flush_until_empty(pub)
        pub.close()
        for topic, want in split(first + gone, t).items():
            assert consume(info.bootstrap, topic, len(want)) == want  # each once, in order
    finally:
        devbroker.stop(data)
