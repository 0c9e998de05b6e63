"""Every worker reads all of ``fleetepi.hosts``: one inventory for metrics, a log for the engines.

Each partition's Engine has an inventory of its own, fed from :attr:`HostFeed.entries`
up to the event time it has reached (``fleetepi.stream.state``): cohort sizes are those *at
that time*, as in the embedded run, even though the worker read every
announcement (including next week's BIOS upgrade) at start-up. The shared
``inventory`` serves the metrics (host count, telemetry by rack).

Why not a faust ``GlobalTable``: the inventory is an event-time history per
host (``fleetepi.detectors.Inventory``), not a key -> latest value map, and global
tables restore through a changelog topic of their own. Here the compacted
source topic *is* the changelog: a private consumer without a group reads
every partition from the beginning, forever. Stages wait on :attr:`ready`
(the end offsets seen at start have been read) before their first batch,
so no crash is judged against an empty inventory at start-up.

Announcements and events travel on different topics, read by different
consumers, so an event can be fetched before an announcement that was
produced ahead of it. Folded then, the event would meet an unknown host
(dropped from its cohort) in one run and a known one in another. So a
detector stage calls :meth:`HostFeed.sync` before each batch: it reads the
hosts topic's end offsets and waits until the feed has read that far. An
announcement produced before an event was fetched is therefore always in
force for it, whichever run folds it; only one produced *after* the event
(with an earlier time) can still land on either side.

Validation and dead-lettering of host records happen once, in the group's
``hosts`` agent; this reader silently skips what does not decode.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from fleetepi.contract import TOPIC_HOSTS, Host, decode_event
from fleetepi.detectors import Inventory
from fleetepi.exceptions import InvalidMessage

log = logging.getLogger(__name__)


class HostFeed:
    """Tail ``topic`` into ``inventory``.

    :param bootstrap: broker address ``host:port``.
    :param inventory: the worker's shared inventory.
    :param on_change: called with the inventory size after each batch that added hosts.
    """

    def __init__(self, bootstrap: str, inventory: Inventory, topic: str = TOPIC_HOSTS,
                 on_change: object | None = None) -> None:
        self.bootstrap = bootstrap
        self.inventory = inventory
        self.topic = topic
        self.on_change = on_change
        self.ready = asyncio.Event()
        self.read = 0
        #: Every announcement read, ``(ts_ms, host, attributes)``, in arrival order. Append-only:
        #: partition states keep a cursor into it and bring announcements into force in event
        #: time themselves (``fleetepi.stream.state``).
        self.entries: list[tuple[int, str, dict[str, str]]] = []
        #: Next offset to read, per partition of the topic (advanced after each fetch).
        self.positions: dict[int, int] = {}
        #: Set (and replaced) after every fetch: :meth:`sync` waits on it.
        self._fetched = asyncio.Event()
        #: Client for ListOffsets only (see ``run``).
        self._consumer: Any = None
        self._tps: list[Any] = []

    async def run(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", client_id="fleetepi-hostfeed",
                                    max_partition_fetch_bytes=16 << 20)
        # ListOffsets on a connection of its own: on the fetching consumer's, it would queue
        # behind a long-polling fetch (up to fetch_max_wait_ms) and delay every detector batch.
        offsets = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                   client_id="fleetepi-hostfeed-offsets")
        await consumer.start()
        await offsets.start()
        try:
            parts = consumer.partitions_for_topic(self.topic)
            while not parts:
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(self.topic)
                if not parts:
                    await asyncio.sleep(0.5)
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            self._consumer, self._tps = offsets, tps
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            target = await consumer.end_offsets(tps)
            announce = self.inventory.announce
            while True:
                batches = await consumer.getmany(timeout_ms=200, max_records=5000)
                for records in batches.values():
                    for rec in records:
                        if rec.value is None:
                            continue
                        try:
                            ev = decode_event(rec.value)
                        except InvalidMessage:
                            continue
                        if isinstance(ev, Host):
                            announce(ev.host, ev.ts_ms, ev.attributes)
                            self.entries.append((ev.ts_ms, ev.host, ev.attributes))
                            self.read += 1
                if batches and callable(self.on_change):
                    self.on_change(len(self.inventory))
                for tp in tps:  # the position, not the last record: compaction leaves holes
                    self.positions[tp.partition] = await consumer.position(tp)
                fetched, self._fetched = self._fetched, asyncio.Event()
                fetched.set()
                if not self.ready.is_set() and all(self.positions[tp.partition] >= target[tp] for tp in tps):
                    log.info("host inventory loaded: %d hosts", len(self.inventory))
                    self.ready.set()
        finally:
            self._consumer = None
            await offsets.stop()
            await consumer.stop()

    async def sync(self, timeout_s: float = 10.0) -> bool:
        """Wait until every announcement produced before this call has been read.

        One ListOffsets request, then as many fetches as it takes (usually
        none: the feed runs ahead). Returns False, after logging, if the
        broker did not let it get there within ``timeout_s``; the caller
        goes on rather than stall the pipeline on a sick broker.
        """
        await self.ready.wait()
        consumer, tps = self._consumer, self._tps
        if consumer is None:
            return False
        deadline = time.monotonic() + timeout_s
        try:
            ends = await asyncio.wait_for(consumer.end_offsets(tps), timeout_s)
            while any(self.positions.get(tp.partition, 0) < end for tp, end in ends.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                await asyncio.wait_for(self._fetched.wait(), left)
        except (TimeoutError, Exception) as exc:  # noqa: BLE001 - a slow feed must not stop the stages
            log.warning("host inventory not synced within %.0f s (%s): folding with what was read",
                        timeout_s, type(exc).__name__)
            return False
        return True


__all__ = ["HostFeed"]
