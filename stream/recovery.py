"""Close the gap between a partition's state and the first record faust delivers.

See ``fleetepi.stream.state`` for why this is exact. The gap is read with a private
aiokafka consumer (no group, manual assignment), folded in chunks on the
event loop so that the worker's heartbeats keep going during a long
rebuild, and nothing is emitted: the alerts of those records were emitted
by whoever first processed them (or are emitted again by the records after
the last commit, which is the at-least-once part).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from fleetepi.stream.exceptions import RebuildError
from fleetepi.stream.state import PartitionState

log = logging.getLogger(__name__)

#: Records folded between two yields to the event loop.
CHUNK = 2000


async def catch_up(bootstrap: str, state: PartitionState, until_offset: int, timeout_s: float = 300.0,
                   fold: Callable[[Any], None] | None = None) -> int:
    """Fold ``[state.next_offset, until_offset)`` of the state's partition; returns records folded.

    ``fold``: called with each record instead of folding it into the state
    (which must then advance ``state.next_offset`` itself).

    Records before the log start (deleted by retention) are skipped: the
    state then starts at the log start, which is documented as the horizon
    of recovery (retention must exceed the detectors' windows).

    :raises RebuildError: the broker could not be read within ``timeout_s``.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError

    if until_offset <= state.next_offset:
        return 0
    tp = TopicPartition(state.stage.topic, state.partition)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", client_id=f"fleetepi-rebuild-{state.stage.name}",
                                max_partition_fetch_bytes=16 << 20, fetch_max_bytes=64 << 20)
    folded = 0
    t0 = time.monotonic()
    try:
        await consumer.start()
        consumer.assign([tp])
        start = (await consumer.beginning_offsets([tp]))[tp]
        if state.next_offset < start:
            log.warning("%s[%d]: log starts at %d, records [%d, %d) are gone (retention)",
                        state.stage.name, state.partition, start, state.next_offset, start)
            state.next_offset = start
        consumer.seek(tp, state.next_offset)
        fold_record = fold or (lambda rec: state.fold(rec.offset, rec.value))
        while state.next_offset < until_offset:
            if time.monotonic() - t0 > timeout_s:
                raise RebuildError(f"rebuilding {tp.topic}[{tp.partition}] took over {timeout_s:.0f} s "
                                   f"(at {state.next_offset} of {until_offset})")
            batches = await consumer.getmany(tp, timeout_ms=500, max_records=CHUNK)
            for rec in batches.get(tp, ()):
                if rec.offset >= until_offset:
                    break
                if rec.offset >= state.next_offset:
                    fold_record(rec)
                    folded += 1
            pos = await consumer.position(tp)
            if pos >= until_offset and state.next_offset < until_offset:
                state.next_offset = until_offset  # compaction/transaction markers left holes
            await asyncio.sleep(0)
    except KafkaError as exc:
        raise RebuildError(f"rebuilding {tp.topic}[{tp.partition}]: {exc}") from None
    finally:
        await consumer.stop()
    log.info("%s[%d]: rebuilt %d records up to offset %d in %.2f s", state.stage.name, state.partition,
             folded, until_offset, time.monotonic() - t0)
    return folded


__all__ = ["CHUNK", "catch_up"]
