"""KafkaPublisher against the shipped FakeProducer: spool first, resend in order, restarts."""

from __future__ import annotations

import json

import pytest

from fleetepi.agents.exceptions import SpoolFull
from fleetepi.agents.publish import JsonlPublisher, open_publisher
from fleetepi.agents.publish.fake import FakeProducer
from fleetepi.agents.publish.kafka import KafkaPublisher
from fleetepi.brokers import parse_brokers
from fleetepi.contract import Host, Telemetry, decode_event, ts_from_ms


def events(n: int, host: str = "gpu-a-001") -> list:
    out: list = [Host(ts=ts_from_ms(0), host=host, attributes={"rack": "r17"})]
    out += [Telemetry(ts=ts_from_ms(i), host=host, kind="xid", code=13, message=f"n={i}") for i in range(1, n)]
    return out


def publisher(tmp_path, producer, registry=None, **kw) -> KafkaPublisher:
    pub = KafkaPublisher("kafka://127.0.0.1:1", tmp_path / "spool", producer=producer, registry=registry, **kw)
    return pub


def retry_now(pub: KafkaPublisher) -> None:
    pub._next_try = 0.0  # skip the backoff wait: no sleeping in tests


def test_broker_away_then_back_delivers_everything_in_order(tmp_path, registry):
    fake = FakeProducer(down=True)
    pub = publisher(tmp_path, fake, registry)
    evs = events(50)
    for e in evs:
        pub.publish(e)
    pub.flush(timeout_s=1)
    assert fake.records == [] and pub.spool.pending == 50
    assert registry.get_sample_value("fleetepi_agent_spool_messages") == 50
    fake.down = False
    retry_now(pub)
    pub.flush(timeout_s=1)
    assert [decode_event(v) for _, _, v in fake.records] == evs
    assert [t for t, _, _ in fake.records] == ["fleetepi.hosts"] + ["fleetepi.telemetry"] * 49
    assert {k for _, k, _ in fake.records} == {b"gpu-a-001"}  # keyed by host
    assert pub.spool.pending == 0
    assert registry.get_sample_value("fleetepi_agent_published_total", {"topic": "fleetepi.telemetry"}) == 49


def test_partial_failure_resumes_after_the_last_acknowledged(tmp_path):
    fake = FakeProducer(fail_after=10)
    pub = publisher(tmp_path, fake, batch=25)
    evs = events(40)
    for e in evs:
        pub.publish(e)
    pub.flush(timeout_s=1)
    assert len(fake.records) == 10 and pub.spool.pending == 30
    fake.fail_after = None
    retry_now(pub)
    pub.flush(timeout_s=1)
    assert [decode_event(v) for _, _, v in fake.records] == evs  # no gap, no duplicate, same order


def test_restart_with_a_full_spool_resends(tmp_path):
    first = publisher(tmp_path, FakeProducer(down=True))
    evs = events(20)
    for e in evs:
        first.publish(e)
    first.close()  # agent stops with 20 events unsent
    fake = FakeProducer()
    second = publisher(tmp_path, fake)
    assert second.spool.pending == 20
    second.flush(timeout_s=1)
    assert [decode_event(v) for _, _, v in fake.records] == evs


def test_spool_cap_drops_and_counts(tmp_path, registry):
    pub = publisher(tmp_path, FakeProducer(down=True), registry, spool_max_bytes=1 << 16)
    dropped = 0
    for e in events(2000):
        try:
            pub.publish(e)
        except SpoolFull:
            dropped += 1
    assert dropped > 0
    assert registry.get_sample_value("fleetepi_agent_spool_dropped_total") == dropped
    assert pub.spool.pending + dropped == 2000


def test_connection_failure_backs_off(tmp_path):
    attempts = []

    def factory():
        attempts.append(1)
        raise OSError("connection refused")

    pub = publisher(tmp_path, factory)
    pub.publish(events(1)[0])
    pub.flush(timeout_s=0.1)
    pub.flush(timeout_s=0.1)  # within the backoff: no new attempt
    assert len(attempts) == 1 and pub.spool.pending == 1


@pytest.mark.parametrize(("url", "hosts"), [
    ("kafka://k1:9092", ["k1:9092"]), ("kafka://k1:9092,k2:9093/", ["k1:9092", "k2:9093"]),
    ("kafka://k1:9092;kafka://k2:9093", ["k1:9092", "k2:9093"]), ("k1:9092", ["k1:9092"]),
    ("kafka://[::1]:9092", ["[::1]:9092"])])
def test_kafka_urls(url, hosts):
    assert parse_brokers(url) == hosts


@pytest.mark.parametrize("url", ["kafka://", "kafka://nohostport", "http://k:1", "kafka://k:port", "kafka://k:70000", ""])
def test_bad_kafka_urls(url):
    with pytest.raises(ValueError):
        parse_brokers(url)


def test_unknown_kafka_option_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown Kafka option"):
        publisher(tmp_path, FakeProducer(), sasl_colour="red")


def test_open_publisher_file_and_stdout(tmp_path, capsys, validate):
    path = tmp_path / "out" / "events.jsonl"
    pub = open_publisher(str(path))
    assert isinstance(pub, JsonlPublisher)
    evs = events(3)
    for e in evs:
        pub.publish(e)
    pub.close()
    lines = path.read_bytes().splitlines()
    assert [decode_event(line) for line in lines] == evs
    for line in lines:
        validate(decode_event(line))
    out = open_publisher("-")
    out.publish(evs[1])
    out.flush()
    assert json.loads(capsys.readouterr().out)["code"] == 13
    with pytest.raises(ValueError, match="spool_dir"):
        open_publisher("kafka://k:9092")
