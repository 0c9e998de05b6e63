"""Fixtures of the stream tests: a recorded stream, worker processes, topic readers.

Every test gets its own topic prefix and consumer group on the session's
shared broker (``kafka_broker`` in the root conftest), so tests never see
each other's records. Workers run as real ``fleetepi worker`` processes
(they are killed with SIGKILL in the recovery test, which needs a process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from devbroker import free_port

from fleetepi.stream.topics import TopicNames

ROOT = Path(__file__).resolve().parents[2]

#: Small enough for the whole area to stay within a few minutes, large enough
#: for every detector kind to fire (warm-up is 6 h of event time).
SIM = {"hosts": 300, "days": 2.0, "seed": 5}
#: Partitions of the input topics in these tests.
PARTITIONS = 4


def closing_events(events: Iterable[Any], end_ms: int, partitions: int) -> list[Any]:
    """Events that close a recording: every input partition's event time passes its end.

    Half an hour after ``end_ms``: a cool reading from every host and one
    crash on a host of each crash partition. The workers merge their sources
    in event time (``fleetepi.stream.state``), so they decide the last step
    boundaries only once every source is past them; the embedded engine does
    at once. The crashes share one step: no detector takes them for news.
    """
    from kafka.partitioner.default import murmur2

    from fleetepi.contract import Crash, Telemetry, ts_from_ms

    end = ts_from_ms(end_ms + 1_800_000)
    hosts = sorted({e.host for e in events if type(e).__name__ == "Host"})
    per_partition: dict[int, str] = {}
    for h in hosts:
        per_partition.setdefault((murmur2(h.encode()) & 0x7FFFFFFF) % partitions, h)
    return ([Telemetry(ts=end, host=h, kind="thermal", value=40.0) for h in hosts]
            + [Crash(ts=end, host=h, signature="fleetepi-test!end-of-recording") for h in per_partition.values()])


def last_boundary(path: Path) -> int:
    """The last step boundary at or before the recording's last event (what the embedded run decides)."""
    from fleetepi.contract import decode_event
    from fleetepi.detectors import DetectorConfig

    last = max(decode_event(line).ts_ms for line in path.read_bytes().splitlines() if line.strip())
    step = DetectorConfig().step_ms
    return last - last % step


@pytest.fixture(scope="session")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated fleet's recorded events (JSON lines), hosts first."""
    from fleetepi.contract import encode
    from fleetepi.simulate import SimConfig, simulate, write_jsonl

    path = tmp_path_factory.mktemp("stream-events") / "events.jsonl"
    sim = simulate(SimConfig(**SIM))
    write_jsonl(sim, path)
    with open(path, "ab") as fh:
        for e in closing_events(sim.events(), sim.end_ms, PARTITIONS):
            fh.write(encode(e) + b"\n")
    return path


#: More ``fleetepi worker`` options for every test worker (e.g. ``--fetch-loop faust``), to run the
#: same tests against another configuration: ``FLEETEPI_TEST_WORKER_ARGS="..." pytest tests/stream``.
EXTRA_WORKER_ARGS = os.environ.get("FLEETEPI_TEST_WORKER_ARGS", "").split()


class WorkerProcess:
    """One ``fleetepi worker`` subprocess with its ports and data directory."""

    def __init__(self, bootstrap: str, names: TopicNames, app_id: str, data_dir: Path, log_path: Path,
                 extra: list[str]) -> None:
        self.web_port = free_port()
        self.metrics_port = free_port()
        self.data_dir = data_dir
        self.log_path = log_path
        cmd = [sys.executable, "-m", "fleetepi.cli", "-v", "worker", "--broker", f"kafka://{bootstrap}",
               "--app-id", app_id, "--topic-prefix", names.prefix, "--web-port", str(self.web_port),
               "--metrics-port", str(self.metrics_port), "--data-dir", str(data_dir), *extra]
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def status(self) -> dict[str, Any] | None:
        try:
            return self.get("/fleetepi/status/")
        except OSError:
            return None

    def counts(self) -> dict[str, Any]:
        return self.get("/fleetepi/counts/")

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


class StreamEnv:
    """A test's private corner of the broker: topic prefix, group, workers, readers."""

    def __init__(self, bootstrap: str, tmp: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.bootstrap = bootstrap
        self.names = TopicNames(f"t{tag}.")
        self.app_id = f"fleetepi-test-{tag}"
        self.tmp = tmp
        self.workers: list[WorkerProcess] = []

    def create_topics(self, partitions: int = 4) -> None:
        from fleetepi.stream.topics import ensure_topics, topic_specs

        ensure_topics(self.bootstrap, topic_specs(self.names, partitions))

    def start_worker(self, name: str = "w", extra: list[str] | None = None, data_dir: Path | None = None
                     ) -> WorkerProcess:
        data = data_dir or self.tmp / f"data-{name}"
        w = WorkerProcess(self.bootstrap, self.names, self.app_id, data, self.tmp / f"{name}.log",
                          ["--checkpoint-interval", "0", "--idle-release", "0", *EXTRA_WORKER_ARGS, *(extra or [])])
        self.workers.append(w)
        return w

    def publish(self, path: Path) -> int:
        from fleetepi.stream.publish import publish_file

        return publish_file(path, self.bootstrap, self.names).total

    def produce_raw(self, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
        from kafka import KafkaProducer

        prod = KafkaProducer(bootstrap_servers=self.bootstrap, max_request_size=16 << 20, acks=1)
        try:
            for key, value in records:
                prod.send(topic, key=key, value=value)
            prod.flush()
        finally:
            prod.close()

    def read_topic(self, topic: str, timeout_s: float = 20.0) -> list[Any]:
        """Every record of ``topic`` now (to the end offsets at the time of the call)."""
        from kafka import KafkaConsumer, TopicPartition

        cons = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_bytes=64 << 20,
                             max_partition_fetch_bytes=16 << 20)
        try:
            parts = cons.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            if not tps:
                return []
            cons.assign(tps)
            cons.seek_to_beginning(*tps)
            end = cons.end_offsets(tps)
            out: list[Any] = []
            deadline = time.monotonic() + timeout_s
            while any(cons.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
                for recs in cons.poll(timeout_ms=500).values():
                    out.extend(recs)
            return out
        finally:
            cons.close()

    def alerts(self) -> list[Any]:
        from fleetepi.contract import decode_alert

        return [decode_alert(r.value) for r in self.read_topic(self.names.alerts)]

    def wait_for(self, pred: Callable[[], bool], timeout_s: float = 120.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if pred():
                return
            for w in self.workers:
                if not w.alive() and w.proc.returncode not in (-9, 0, -15):
                    raise AssertionError(f"worker died ({w.proc.returncode}): {w.log_tail()}")
            time.sleep(0.5)
        logs = "\n".join(w.log_tail(1500) for w in self.workers)
        raise AssertionError(f"timed out waiting for {what}\n{logs}")

    def end_offsets(self) -> dict[str, int]:
        """Total records per input/internal topic now."""
        from kafka import KafkaConsumer, TopicPartition

        cons = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            out = {}
            for t in (self.names.crashes, self.names.telemetry, self.names.fleet):
                tps = [TopicPartition(t, p) for p in sorted(cons.partitions_for_topic(t) or ())]
                out[t] = sum(cons.end_offsets(tps).values()) if tps else 0
            return out
        finally:
            cons.close()

    def decided(self, upto_ms: int, workers: list[WorkerProcess] | None = None) -> bool:
        """Has the fleet stage decided every step boundary up to ``upto_ms``?

        Drained positions are not enough at the end of a recording: the fleet
        partition releases the last events once the quiet crash partitions
        say they were read to their end (caught-up marks, a timer), and
        decides a boundary once event time passed it.
        """
        for w in workers or [w for w in self.workers if w.alive()]:
            st = w.status()
            if st is not None and st.get("decided_ms") is not None and st["decided_ms"] >= upto_ms:
                return True
        return False

    def drained(self, workers: list[WorkerProcess] | None = None) -> bool:
        """Have the (live) workers together folded every record of every stage, for good?

        An input stage counts a record as folded when it has handed the
        forwarded bundle to the producer, a moment before the bundle lands in
        the internal topic; read then, the internal topics look drained one
        bundle early. So the check must hold twice, a second apart, with the
        topics' end offsets unchanged in between.
        """
        first = self.end_offsets()
        if not self._drained_at(first, workers):
            return False
        time.sleep(1.0)
        return self.end_offsets() == first and self._drained_at(first, workers)

    def _drained_at(self, ends: dict[str, int], workers: list[WorkerProcess] | None) -> bool:
        stage_topic = {"crashes": self.names.crashes, "telemetry": self.names.telemetry,
                       "fleet": self.names.fleet}
        done: dict[str, dict[str, int]] = {}
        for w in workers or [w for w in self.workers if w.alive()]:
            st = w.status()
            if st is None:
                return False
            for key, off in st["positions"].items():
                stage, p = key.split("/")
                done.setdefault(stage_topic[stage], {})
                done[stage_topic[stage]][p] = max(off, done[stage_topic[stage]].get(p, 0))
        return all(sum(done.get(t, {}).values()) >= n for t, n in ends.items())

    def close(self) -> None:
        for w in self.workers:
            w.stop()


@pytest.fixture(scope="session")
def reference_run(kafka_broker: str, events_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One uninterrupted worker over the recorded stream: its alerts, counts and status.

    The reference of the recovery and rebalance tests (and the one-worker
    parity case). Counts are compared with a worker's, not with the embedded
    engine's, because a worker holds back the events newer than its slowest
    source partition (see ``fleetepi.stream.state``): equal prefixes, equal counts.
    """
    env = StreamEnv(kafka_broker, tmp_path_factory.mktemp("stream-reference"))
    try:
        env.create_topics(partitions=PARTITIONS)
        w = env.start_worker("reference")
        env.wait_for(lambda: w.status() is not None, what="worker up")
        sent = env.publish(events_file)
        env.wait_for(lambda: env.drained() and env.decided(last_boundary(events_file)), timeout_s=240,
                     what="the reference worker to drain and decide the last boundary")
        return {"sent": sent, "alerts": env.alerts(), "counts": w.counts()["detectors"], "status": w.status()}
    finally:
        env.close()


@pytest.fixture
def stream_env(kafka_broker: str, tmp_path: Path) -> Iterator[StreamEnv]:
    env = StreamEnv(kafka_broker, tmp_path)
    try:
        yield env
    finally:
        env.close()


def replay_alerts(path: Path) -> list[Any]:
    """Alerts of the embedded path over a recording (one Engine over the file: what ``fleetepi replay`` runs)."""
    from fleetepi.contract import decode_event
    from fleetepi.detectors import Engine
    from fleetepi.exceptions import InvalidMessage

    engine = Engine()
    out: list[Any] = []
    with open(path, "rb") as fh:
        for line in fh:
            try:
                out.extend(engine.process(decode_event(line)))
            except InvalidMessage:
                continue
    return out


@pytest.fixture(scope="session")
def embedded_alerts(events_file: Path) -> list[Any]:
    """Alerts of the embedded path over the recorded stream."""
    return replay_alerts(events_file)


#: Firing times may differ by one evaluation step (each partition has its own event-time clock).
STEP_MS = int(__import__("fleetepi.detectors", fromlist=["DetectorConfig"]).DetectorConfig().step_s * 1000)


def firing(alerts: list[Any]) -> dict[str, list[int]]:
    """Alert key -> sorted distinct firing times (a re-sent alert is the same record again)."""
    out: dict[str, set[int]] = {}
    for a in alerts:
        if a.state == "firing":
            out.setdefault(a.key, set()).add(a.ts_ms)
    return {k: sorted(v) for k, v in out.items()}


def _assert_parity(embedded: list[Any], streamed: list[Any]) -> None:
    want, got = firing(embedded), firing(streamed)
    assert want, "the recorded stream must make alerts fire, or parity proves nothing"
    assert set(got) == set(want), f"missing: {sorted(set(want) - set(got))}\nextra: {sorted(set(got) - set(want))}"
    for key, times in want.items():
        assert len(got[key]) == len(times), f"{key}: fired {len(got[key])} times, embedded {len(times)}"
        for t_want, t_got in zip(times, got[key]):
            assert abs(t_want - t_got) <= STEP_MS, f"{key}: fired at {t_got}, embedded at {t_want}"


@pytest.fixture
def assert_parity() -> Callable[[list[Any], list[Any]], None]:
    """Same firing alerts (kind and entity), each firing time within one evaluation step."""
    return _assert_parity


def count_diff(got: dict[str, dict[str, float]], want: dict[str, dict[str, float]]) -> list[str]:
    """Per detector, the keys whose counts differ: ``detector key: got != want`` (empty: equal)."""
    out = []
    for det in sorted(set(got) | set(want)):
        g, w = got.get(det, {}), want.get(det, {})
        for key in sorted(set(g) | set(w)):
            if g.get(key) != w.get(key):
                out.append(f"{det} {key}: {g.get(key)} != {w.get(key)}")
    return out
