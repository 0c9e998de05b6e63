"""The faust app of a stream worker: stages as batch agents over per-partition Engines.

What faust does here: group membership, partition assignment and
rebalancing, fetching, offset commits, the producer, the web server. What
it does not do: state. Per-event ``Table`` updates ran at ~2,000 events/s
on this machine, windowed tables expire on the wall clock and their
changelog is written with acks off, so detector state stays in the
detectors' own event-time structures (``fleetepi.detectors.Engine``), one Engine per
owned partition (``fleetepi.stream.state``), and is recovered from the retained logs
(``fleetepi.stream.recovery``) and local snapshots (``fleetepi.stream.checkpoint``).

Each stage task drains batches of raw messages from its channel
(``fleetepi.stream.batches``: faust's per-record stream path cost ~100 µs a record
here; the fetch loop is faust's without its per-record race, ``fleetepi.stream.faust_adapter``), folds them per
partition, sends forwards, alerts and dead letters, and waits for the
broker to acknowledge all of them before the batch ends, which is when the
batch's messages are acked for commit. So a committed offset always
means "its effects are in Kafka": at-least-once, with alerts keyed by
``Alert.key`` (a re-sent alert is the same record again) and forwards
de-duplicated by their source position.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetepi.brokers import bootstrap_of
from fleetepi.contract import Crash, Host, decode_event, encode
from fleetepi.detectors import DetectorConfig, Inventory
from fleetepi.exceptions import InvalidMessage
from fleetepi.stream.batches import ack_all, batches, subscribe
from fleetepi.stream.checkpoint import CheckpointStore
from fleetepi.stream.deadletter import encode_letter, make_letter
from fleetepi.stream.faust_adapter import FastApp, partitions_for
from fleetepi.stream.hostfeed import HostFeed
from fleetepi.stream.maintenance import WorkerMaintenance
from fleetepi.stream.metrics import StreamMetrics
from fleetepi.stream.partitioning import Stage, bundle, split_bundles, stages
from fleetepi.stream.recovery import catch_up
from fleetepi.stream.state import IDLE_MARK, PartitionState
from fleetepi.stream.topics import TopicNames

log = logging.getLogger(__name__)

#: How often an input partition read to its end tells the detector stages so (when it has not yet).
CAUGHT_UP_INTERVAL_S = 0.2



@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker is started with (validated by the CLI).

    :param broker: ``kafka://HOST:PORT``.
    :param app_id: consumer group and faust app id; workers with the same id share the load.
    :param topic_prefix: prepended to every topic name (tests, several pipelines on one broker).
    :param partitions: of the input topics when the worker creates them.
    :param web_port: faust web server (``/fleetepi/counts``, ``/fleetepi/status``), on ``bind``.
    :param metrics_port: Prometheus ``/metrics`` on ``bind`` (0: a free port; None: off).
    :param bind: listen address of both servers; local only unless asked.
    :param data_dir: faust's directory and the checkpoints.
    :param batch_max: records per batch (``take_events`` max).
    :param batch_within_s: longest wait to fill a batch (bounds the added latency).
    :param checkpoint_interval_s: between two snapshots of a stage's partitions (0: off).
    :param idle_release_s: wall seconds a detector partition may hold events for a quiet source
        before an idle mark releases them (0: never; replays stay exact, live alerts may wait).
    :param fast_consumer: faust's fetch loop without its per-record race (``fleetepi.stream.faust_adapter``,
        ~2x the throughput); False runs faust's own (``--fetch-loop faust``).
    :param config: detector settings.
    :param maintenance_file: maintenance windows (YAML/CSV, ``fleetepi.maintenance``), re-read when it changes.
    :param alertmanager_url: an Alertmanager whose silences naming hosts or places are maintenance windows.
    :param maintenance_refresh_s: wall seconds between two reads of the file and the silences.
    :param ticket_ttl_s: event time a ticket's alert series stays up (tickets never resolve; 0: forever).
    """

    broker: str = "kafka://127.0.0.1:9092"
    app_id: str = "fleetepi"
    topic_prefix: str = ""
    partitions: int = 4
    web_port: int = 6066
    metrics_port: int | None = 9108
    bind: str = "127.0.0.1"
    data_dir: str = "./fleetepi-worker-data"
    batch_max: int = 2000
    batch_within_s: float = 0.05
    checkpoint_interval_s: float = 30.0
    idle_release_s: float = 10.0
    fast_consumer: bool = True
    config: DetectorConfig = field(default_factory=DetectorConfig)
    maintenance_file: str | None = None
    alertmanager_url: str | None = None
    maintenance_refresh_s: float = 60.0
    ticket_ttl_s: float = 86_400.0

    @property
    def bootstrap(self) -> str:
        return bootstrap_of(self.broker)

    @property
    def topics(self) -> TopicNames:
        return TopicNames(self.topic_prefix)


def faust_settings(s: WorkerSettings) -> dict[str, Any]:
    """faust.App keyword settings: short timeouts, local web, raw bytes, no faust-made topics."""
    return {
        "broker": s.broker,
        "value_serializer": "raw",
        "key_serializer": "raw",
        "datadir": str(Path(s.data_dir) / "faust"),
        "web_enabled": True,
        "web_bind": s.bind,
        "web_host": s.bind,
        "web_port": s.web_port,
        "broker_session_timeout": 10.0,
        "broker_heartbeat_interval": 1.0,
        "broker_rebalance_timeout": 10.0,
        "broker_commit_interval": 0.5,
        "consumer_auto_offset_reset": "earliest",
        "consumer_max_fetch_size": 16 << 20,
        "producer_max_request_size": 16 << 20,
        "stream_wait_empty": False,
        "stream_buffer_maxsize": max(4096, 2 * s.batch_max),
        "topic_disable_leader": True,
        "topic_allow_declare": False,
    }


class StreamWorker:
    """Builds the faust app of one worker process and owns its state.

    :param settings: see :class:`WorkerSettings`.
    :param metrics: where to count (a fresh registry by default).
    """

    def __init__(self, settings: WorkerSettings, metrics: StreamMetrics | None = None) -> None:
        import faust

        self.settings = settings
        self.names = settings.topics
        self.inventory = Inventory(max_history=settings.config.inventory_history)
        self.metrics = metrics or StreamMetrics(input_topics=self.names.inputs)
        self.pipeline = self.metrics.pipeline
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.checkpoints = (CheckpointStore(Path(settings.data_dir) / "checkpoints")
                            if settings.checkpoint_interval_s > 0 else None)
        self._last_ckpt: dict[str, float] = {}
        self._key_part: dict[tuple[str, bytes], int] = {}
        #: (topic, partition) this worker owns now; None before the first assignment.
        self.assigned: set[tuple[str, int]] | None = None
        #: Input partitions assigned since this worker last forwarded: their claims are still to be sent.
        self._unclaimed: set[tuple[str, int]] = set()
        self._warming: Any = None
        self._n_parts: dict[str, int] = {}
        self.stages: Sequence[Stage] = stages(self.names)
        self.hostfeed = HostFeed(settings.bootstrap, self.inventory, self.names.hosts,
                                 on_change=self.pipeline.set_hosts)
        # --- maintenance windows (issue 13): file + Alertmanager silences, pushed to the fleet engines
        self.maintenance = WorkerMaintenance(settings.maintenance_file, settings.alertmanager_url, self.pipeline)
        app_class = FastApp if settings.fast_consumer else faust.App
        self.app = app_class(settings.app_id, **faust_settings(settings))
        self.worker_name = f"{settings.app_id}@{settings.web_port}"
        self._install()

    # ------------------------------------------------------------------ wiring
    def _install(self) -> None:
        app = self.app
        for stage in self.stages:
            self._install_stage(stage)
        hosts_chan = subscribe(app, self.names.hosts, self._queue_size)

        async def hosts() -> None:
            async for msgs in batches(app, hosts_chan, self.settings.batch_max, self.settings.batch_within_s):
                await self._hosts_batch(msgs)
                ack_all(app, msgs)

        app.task(hosts)

        async def hostfeed() -> None:
            await self.hostfeed.run()

        app.task(hostfeed)

        async def counts_view(view: Any, request: Any) -> Any:
            return view.json(self.counts())

        async def status_view(view: Any, request: Any) -> Any:
            return view.json(self.status())

        async def on_assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
            tps = {(tp.topic, tp.partition) for tp in assigned}
            self.assigned = tps
            inputs = {s.topic for s in self.stages if not s.framed}
            self._unclaimed = {tp for tp in tps if tp[0] in inputs}
            self._warming = asyncio.ensure_future(self._warm(tps))

        if self.settings.idle_release_s > 0:
            async def idle_marks() -> None:
                await self._idle_marks()

            app.timer(interval=max(0.5, self.settings.idle_release_s / 2))(idle_marks)

            async def caught_up_marks() -> None:
                await self._caught_up_marks()

            app.timer(interval=CAUGHT_UP_INTERVAL_S)(caught_up_marks)

        if self.maintenance.enabled and self.settings.maintenance_refresh_s > 0:
            async def maintenance_refresh() -> None:
                await self.maintenance.refresh(st for st in list(self.states.values()) if st.stage.framed)

            app.timer(interval=self.settings.maintenance_refresh_s)(maintenance_refresh)

        self._on_assigned = on_assigned  # keep a strong reference
        app.on_partitions_assigned.connect(on_assigned)

        app.page("/fleetepi/counts/")(counts_view)
        app.page("/fleetepi/status/")(status_view)

    @property
    def _queue_size(self) -> int:
        return max(4096, 2 * self.settings.batch_max)

    def _install_stage(self, stage: Stage) -> None:
        """One task per stage drains its raw channel in batches (``fleetepi.stream.batches``: no faust stream)."""
        app = self.app
        chan = subscribe(app, stage.topic, self._queue_size)
        batch_max, within = self.settings.batch_max, self.settings.batch_within_s

        async def run_stage() -> None:
            async for msgs in batches(app, chan, batch_max, within):
                if not self.hostfeed.ready.is_set():
                    await self.hostfeed.ready.wait()
                await self._batch(stage, msgs)
                ack_all(app, msgs)

        app.task(run_stage)

    # ------------------------------------------------------------------ state
    def _state(self, stage: Stage, partition: int) -> PartitionState:
        key = (stage.name, partition)
        st = self.states.get(key)
        if st is None:
            on_invalid = self._on_admission if not stage.framed else None
            st = PartitionState(stage, partition, self.settings.config, self.hostfeed.entries, on_invalid)
            if self.checkpoints is not None:
                snap = self.checkpoints.load(stage.name, partition)
                if snap is not None and st.restore(snap):
                    log.info("%s[%d]: checkpoint at offset %d loaded", stage.name, partition, st.next_offset)
            if stage.framed:
                self.maintenance.apply(st.engine)  # the windows known now, not the checkpoint's
            self.states[key] = st
        return st

    async def _idle_marks(self) -> None:
        """Unblock detector partitions whose events wait for a source partition that went quiet.

        A detector stage releases events only up to its slowest source's
        watermark (``fleetepi.stream.state``); an input partition without traffic
        (no crash on its hosts for hours, or no host at all in a small fleet)
        would hold its alerts forever. When an owned partition has held
        events for ``idle_release_s`` of wall time, this writes an *idle
        mark* (a bundle from source ``IDLE_MARK`` carrying the newest source
        watermark) into that very partition: the decision is taken on the
        wall clock, but it is in the log, so a rebuild folds the same.
        """
        now = time.monotonic()
        idle = self.settings.idle_release_s
        send = self.app.producer.send
        for st in self._owned():
            if not st.stage.framed or not st.heap or not st.src_wm or now - st.released_wall < idle:
                continue
            newest = max(st.src_wm.values())
            if min(st.src_wm.values()) >= newest and len(st.src_wm) >= len(st.source_ids):
                continue
            st.released_wall = now  # one mark per idle period
            await send(st.stage.topic, b"idle", bundle(IDLE_MARK, newest, None, []), st.partition, None, None)

    async def _warm(self, assigned: set[tuple[str, int]]) -> None:
        """Rebuild the state of newly assigned partitions up to the group's committed offsets.

        Lazily, a partition's state is rebuilt when its first record arrives;
        a partition with nothing new would keep no state at all, and its
        counts (``/fleetepi/counts/``) would be missing. Only up to the
        *committed* offset: records after it are delivered to the stage and
        must be processed live (their alerts may never have been sent).
        """
        try:
            committed = await self._committed_offsets(assigned)
        except Exception as exc:  # noqa: BLE001 - warming is an optimisation; the lazy path stays exact
            log.warning("cannot read committed offsets (%s): states are rebuilt on first record", exc)
            return
        await self.hostfeed.sync()
        by_topic = {s.topic: s for s in self.stages}
        for topic, p in sorted(assigned):
            stage = by_topic.get(topic)
            upto = committed.get((topic, p))
            if stage is None or not upto:
                continue
            st = self._state(stage, p)
            async with st.lock:
                if (topic, p) not in (self.assigned or ()):
                    return  # a newer rebalance took over
                if stage.framed and not st.source_ids:
                    st.source_ids = await self._source_ids(stage)
                if upto > st.next_offset:
                    self.metrics.rebuilt += await catch_up(self.settings.bootstrap, st, upto)

    async def _committed_offsets(self, tps: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offsets, read by a consumer that names the group but never joins it."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        cons = AIOKafkaConsumer(bootstrap_servers=self.settings.bootstrap, group_id=self.settings.app_id,
                                enable_auto_commit=False, client_id="fleetepi-warm")
        await cons.start()
        try:
            out = {}
            for topic, p in tps:
                off = await cons.committed(TopicPartition(topic, p))
                if off is not None and off >= 0:
                    out[(topic, p)] = off
            return out
        finally:
            await cons.stop()

    def _on_admission(self, reason: str, event: Any, ts_ms: int) -> None:
        self.pipeline.count_invalid(reason)

    # ------------------------------------------------------------------ batches
    async def _batch(self, stage: Stage, messages: Sequence[Any]) -> None:
        t0 = time.perf_counter()
        # announcements produced before these events were fetched must be in force for them
        if stage.framed and not await self.hostfeed.sync():
            self.metrics.inventory_sync_timeouts += 1
        by_part: dict[int, list[Any]] = {}
        for m in messages:
            by_part.setdefault(m.partition, []).append(m)
        send = self.app.producer.send
        alerts_topic = self.names.alerts
        pending: list[Any] = []
        pipeline = self.pipeline
        observe_alert = pipeline.observe_alert
        for p, msgs in by_part.items():
            st = self._state(stage, p)
            async with st.lock:
                if stage.framed and not st.source_ids:
                    st.source_ids = await self._source_ids(stage)
                first = msgs[0].offset
                if first > st.next_offset and stage.framed:
                    self.metrics.rebuilt += await catch_up(self.settings.bootstrap, st, first)
                elif first > st.next_offset:
                    msgs = await self._input_gap(st, first) + msgs
                if stage.framed:
                    alerts = []
                    dropped = st.engine.flags["in_maintenance"]
                    for m in msgs:
                        if m.offset >= st.next_offset:  # else already folded (redelivery)
                            alerts.extend(st.apply_bundle(m.offset, m.value))
                    alerts = self.maintenance.gate((stage.name, p), st.engine, alerts, dropped)
                else:
                    alerts = await self._input_partition(stage, st, p, msgs, pending)
                    pipeline.set_watermark(st.engine.newest_ms)
            for a in alerts:
                observe_alert(a)
                pending.append(await send(alerts_topic, a.key.encode(), encode(a), None, None, None))
            hw = self._highwater(stage.topic, p)
            if hw is not None:
                self.metrics.set_lag(stage.topic, p, hw - st.next_offset)
        if pending:
            await asyncio.gather(*pending)
        self.metrics.batch_seconds.observe(time.perf_counter() - t0)
        await self._maybe_checkpoint(stage)

    async def _input_partition(self, stage: Stage, st: PartitionState, p: int, msgs: list[Any],
                               pending: list[Any]) -> list[Any]:
        """Validate one partition's part of an input batch; dead letters and bundles go to ``pending``."""
        out: list[Any] = []
        forwards = stage.forwards
        fwd: list[dict[int, list[tuple[int, int, bytes]]]] = [{} for _ in forwards]
        pipeline = self.pipeline
        is_crash = stage.event_type is Crash
        attributes_at = self.inventory.attributes_at
        apply = st.apply
        key_of = stage.key_of
        part_of = self._key_part.get
        for m in msgs:
            off = m.offset
            if off < st.next_offset:
                continue  # already folded (redelivery)
            alerts, event, raw, bad = apply(off, m.value)
            if bad is not None:
                pending.append(await self._deadletter(stage.topic, p, off, m.key, m.value, bad))
                continue
            if alerts:
                out.extend(alerts)
            ts = event.ts_ms  # type: ignore[union-attr]
            for i, (topic, key_name) in enumerate(forwards):
                key = key_of(key_name, event)  # type: ignore[arg-type]
                target = part_of((topic, key))
                if target is None:
                    target = await self._partition_of(topic, key)
                fwd[i].setdefault(target, []).append((off, ts, raw))  # type: ignore[arg-type]
            if st.fwd_wm is None or ts > st.fwd_wm:
                st.fwd_wm = ts
            if st.fwd_first is None:
                st.fwd_first = ts
            if is_crash:
                pipeline.count_event("crash")
                pipeline.observe_crash(event, ts)  # type: ignore[arg-type]
            else:
                pipeline.count_event("telemetry")
                pipeline.observe_telemetry(event, attributes_at(event.host, ts))  # type: ignore[arg-type,union-attr]
        await self._forward(stage, st, p, fwd, pending)
        return out

    async def _input_gap(self, st: PartitionState, first: int) -> list[Any]:
        """Records ``[next_offset, first)`` of an input partition, to be processed (and forwarded) again.

        A gap before a batch means records this worker has not processed:
        another owner processed them, or this consumer dropped them in a
        rebalance (fetched in an older generation) and faust did not fetch
        them again. Folding them without forwarding would lose their
        forwards in the second case; forwarding them again costs nothing in
        the first, since the detector stages drop every source offset they
        already folded (dead letters may be sent twice: at least once).
        """
        gap: list[Any] = []
        start = st.next_offset

        def collect(rec: Any) -> None:
            gap.append(rec)
            st.next_offset = rec.offset + 1

        self.metrics.rebuilt += await catch_up(self.settings.bootstrap, st, first, fold=collect)
        st.next_offset = max(start, gap[0].offset) if gap else st.next_offset
        return gap

    def _caught_up(self, topic: str, st: PartitionState) -> bool:
        """Has this worker folded its input partition up to the end of the log (as last fetched)?"""
        if self.settings.idle_release_s <= 0:
            return False  # replays stay exact: the merge waits for every source
        hw = self._highwater(topic, st.partition)
        return hw is not None and st.next_offset >= hw

    async def _forward(self, stage: Stage, st: PartitionState, p: int,
                       fwd: list[dict[int, list[tuple[int, int, bytes]]]], pending: list[Any]) -> None:
        """Send one input partition's bundles: one per internal partition, empty or not (watermark)."""
        send = self.app.producer.send
        if self._unclaimed:
            await self._claim(pending)
        src = stage.source_base + p
        key = b"%d" % src
        caught_up = st.caught_up_sent = self._caught_up(stage.topic, st)
        for i, (topic, _) in enumerate(stage.forwards):
            for target in range(await self._n_partitions(topic)):
                for value in split_bundles(src, st.fwd_wm, st.fwd_first, fwd[i].get(target, []), caught_up):
                    pending.append(await send(topic, key, value, target, None, None))

    async def _claim(self, pending: list[Any]) -> None:
        """Before this worker forwards anything, say that each input partition it was given is not caught up.

        A partition's last bundle may have said ``caught_up`` (read to its
        end) long ago: written by this worker's previous life, killed since,
        or by the partition's previous owner. Records produced to it since
        then are unread, yet the merge would not wait for them, and the
        backlog of a partition forwarded first would move event time past
        them: folded late, or dropped as out of order (seen after kill -9
        under a 5,000 events/s stream). An empty bundle without the flag,
        sent to every internal partition ahead of any other bundle of this
        assignment, makes the merge wait for each partition's own watermark
        again; the partition says ``caught_up`` again once this worker has
        read it to its end. The claim is in the log, so a rebuild folds the
        same.
        """
        claims, self._unclaimed = sorted(self._unclaimed), set()
        send = self.app.producer.send
        by_topic = {s.topic: s for s in self.stages if not s.framed}
        for topic, p in claims:
            stage = by_topic[topic]
            src = stage.source_base + p
            st = self.states.get((topic, p))
            if st is not None:
                st.caught_up_sent = False
            for target_topic, _ in stage.forwards:
                for target in range(await self._n_partitions(target_topic)):
                    pending.append(await send(target_topic, b"%d" % src, bundle(src, None, None, []), target,
                                              None, None))

    async def _caught_up_marks(self) -> None:
        """Tell the detector stages when an owned input partition has been read to its end.

        The event-time merge of a detector stage waits for the slowest
        source partition; a quiet one (crashes are sparse) would hold every
        alert until its next event, or until an idle mark. An input
        partition whose position reached the log end sends (once, until it
        forwards events again) empty bundles flagged ``caught_up``, and the
        merge stops waiting for it (``PartitionState._horizon``), as Kafka
        Streams does not wait for a caught-up partition. The flag is in the
        log: a rebuild folds the same.
        """
        if not self.assigned or not self.hostfeed.ready.is_set():
            return
        pending: list[Any] = []
        for stage in self.stages:
            if stage.framed:
                continue
            for p in range(await self._n_partitions(stage.topic)):
                if (stage.topic, p) not in self.assigned:
                    continue
                st = self._state(stage, p)
                if st.caught_up_sent or st.lock.locked() or not self._caught_up(stage.topic, st):
                    continue  # (a batch in progress sends its own flag)
                async with st.lock:
                    if not st.caught_up_sent and (stage.topic, p) in (self.assigned or ()):
                        await self._forward(stage, st, p, [{} for _ in stage.forwards], pending)
        if pending:
            await asyncio.gather(*pending)

    async def _hosts_batch(self, messages: Sequence[Any]) -> None:
        pending = []
        for m in messages:
            if m.value is None:
                continue  # compaction tombstone: a host removed from the inventory topic
            try:
                event = decode_event(m.value)
            except InvalidMessage as exc:
                pending.append(await self._deadletter(self.names.hosts, m.partition, m.offset, m.key, m.value, exc))
                continue
            if not isinstance(event, Host):
                exc = InvalidMessage("unknown_schema", f"a {type(event).__name__.lower()} message on "
                                                       f"{self.names.hosts}, which carries host messages only")
                pending.append(await self._deadletter(self.names.hosts, m.partition, m.offset, m.key, m.value, exc))
                continue
            self.pipeline.count_event("host")
        if pending:
            await asyncio.gather(*pending)

    async def _deadletter(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                          exc: InvalidMessage) -> Any:
        letter = make_letter(exc.reason, exc.detail, topic, partition, offset, key, value, worker=self.worker_name)
        self.metrics.count_deadletter(topic, exc.reason)
        self.pipeline.count_invalid(exc.reason)
        log.warning("dead letter %s[%d]@%d: %s: %s", topic, partition, offset, exc.reason, exc.detail[:200])
        return await self.app.producer.send(self.names.deadletter, key, encode_letter(letter), None, None, None)

    async def _partition_of(self, topic: str, key: bytes) -> int:
        """Partition of ``key`` (Kafka's murmur2), cached: the pure-Python hash is ~5 µs a call."""
        p = self._key_part.get((topic, key))
        if p is not None:
            return p
        from aiokafka.partitioner import murmur2

        n = await self._n_partitions(topic)
        p = (murmur2(key) & 0x7FFFFFFF) % n
        if len(self._key_part) < 200_000:
            self._key_part[(topic, key)] = p
        return p

    async def _source_ids(self, stage: Stage) -> list[int]:
        """Source ids of the input partitions feeding a framed stage (its merge waits for all of them)."""
        base = {s.topic: s.source_base for s in self.stages if not s.framed}
        return [base[t] + p for t in stage.source_topics for p in range(await self._n_partitions(t))]

    async def _n_partitions(self, topic: str) -> int:
        n = self._n_parts.get(topic)
        if n is None:
            parts = await partitions_for(self.app, topic)
            n = self._n_parts[topic] = len(parts)
        return n

    def _highwater(self, topic: str, partition: int) -> int | None:
        from faust.types import TP

        try:
            return int(self.app.consumer.highwater(TP(topic, partition)))
        except Exception:  # noqa: BLE001 - metrics must never break a batch
            return None

    async def _maybe_checkpoint(self, stage: Stage) -> None:
        if self.checkpoints is None:
            return
        now = time.monotonic()
        last = self._last_ckpt.setdefault(stage.name, now)
        if now - last < self.settings.checkpoint_interval_s:
            return
        self._last_ckpt[stage.name] = now
        blobs = [(p, self.checkpoints.encode(st.snapshot())) for (name, p), st in self.states.items()
                 if name == stage.name]
        store = self.checkpoints
        await asyncio.to_thread(lambda: [store.write(stage.name, p, b) for p, b in blobs])
        self.metrics.checkpointed()

    # ------------------------------------------------------------------ introspection
    def counts(self) -> dict[str, Any]:
        """Per-detector, per-key incidence merged over this worker's partitions, plus positions."""
        merged: dict[str, dict[str, float]] = {}
        for st in self._owned():
            for det, per_key in st.engine.counts().items():
                into = merged.setdefault(det, {})
                for k, v in per_key.items():
                    into[k] = into.get(k, 0) + v
        return {"detectors": merged, "positions": self._positions()}

    def _owned(self) -> list[PartitionState]:
        """States of the partitions assigned to this worker now (others may be stale)."""
        assigned = self.assigned or set()
        return [st for st in list(self.states.values()) if (st.stage.topic, st.partition) in assigned]

    def _positions(self) -> dict[str, int]:
        return {f"{st.stage.name}/{st.partition}": st.next_offset
                for st in sorted(self._owned(), key=lambda s: (s.stage.name, s.partition))}

    def _decided_ms(self) -> int | None:
        """The last step boundary the fleet stage decided (None if this worker does not own it)."""
        got = [st.engine.decided_ms for st in self._owned() if st.stage.framed]
        return max((d for d in got if d is not None), default=None)

    def status(self) -> dict[str, Any]:
        return {"worker": self.worker_name, "hosts": len(self.inventory), "inventory_ready": self.hostfeed.ready.is_set(),
                "inventory_sync_timeouts": self.metrics.inventory_sync_timeouts,
                "events": dict(self.pipeline.events), "invalid": {k: v for k, v in self.pipeline.invalid.items() if v},
                "deadletters": {f"{t}|{r}": n for (t, r), n in self.metrics.deadletters.items() if n},
                "alerts": dict(self.pipeline.alerts), "rebuilt_records": self.metrics.rebuilt,
                "decided_ms": self._decided_ms(),
                "engine_flags": dict(sum((st.engine.flags for st in self._owned() if st.stage.framed), Counter())),
                "engine_invalid": {k: v for k, v in sum((st.engine.invalid for st in self._owned() if st.stage.framed),
                                                        Counter()).items() if v},
                "held": {f"{st.stage.name}/{st.partition}": [len(st.heap), sorted(st.src_wm.items()), sorted(st.src_idle)]
                         for st in self._owned() if st.stage.framed},
                "positions": self._positions()}


__all__ = ["StreamWorker", "WorkerSettings", "faust_settings"]
