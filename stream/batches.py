"""Batches of raw Kafka messages straight from faust's conductor, without a faust stream.

Why: faust's per-record path (conductor -> channel -> ``Event`` -> stream
iterator -> sensors -> ``take_events`` buffer -> one awaited ``ack`` per
event) costs ~100 µs a record here; a bare agent that only counts reaches
~8,500 records/s, which caps a worker far below the input rates of a fleet.
A stage only needs what faust gives it before that path: the messages of
the partitions it owns, with group membership, flow control (fetching
pauses when the queue is full) and offset commits.

So a stage subscribes a :class:`RawTopic`, a ``faust.Topic`` whose
``decode`` hands the conductor's ``Message`` itself to the queue (no
``Event``, no deserialiser), and drains that queue in batches
(:func:`batches`). Once a batch's effects are acknowledged by the broker,
:func:`ack_all` acks its messages to the consumer, which commits them as a
stream would. Messages fetched before a rebalance (another generation) are
dropped unacked, as faust's stream iterator does: the new owner reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fleetepi.stream.faust_adapter import RawTopic


def subscribe(app: Any, topic: str, maxsize: int) -> RawTopic:
    """Register a raw channel for ``topic`` with the conductor (before the worker starts)."""
    chan = RawTopic(app, topics=[topic], value_serializer="raw", key_serializer="raw", is_iterator=True,
                    maxsize=maxsize)
    app.topics.add(chan)
    return chan


async def batches(app: Any, chan: RawTopic, batch_max: int, within_s: float) -> AsyncIterator[list[Any]]:
    """Yield lists of at most ``batch_max`` messages, waiting at most ``within_s`` to fill one.

    The wait starts with a batch's first message, so a quiet topic adds at
    most ``within_s`` of latency, and a busy one fills batches without
    waiting (messages queue up while the previous batch is processed).
    """
    queue = chan.queue
    get_nowait = queue.get_nowait
    consumer = app.consumer
    while True:
        batch = [await queue.get()]
        n = queue.qsize()
        if n < batch_max - 1 and within_s > 0:
            await asyncio.sleep(within_s)
            n = queue.qsize()
        for _ in range(min(n, batch_max - 1)):
            batch.append(get_nowait())
        gen = app.consumer_generation_id
        active = app.flow_control.is_active()
        live = [m for m in batch if active and m.generation_id == gen]
        if not live:
            continue
        track = consumer.track_message
        for m in live:
            track(m)
        yield live


def ack_all(app: Any, messages: Sequence[Any]) -> None:
    """Mark a processed batch's messages as done: the consumer commits up to them."""
    consumer = app.consumer
    for m in messages:
        m.ack(consumer)


__all__ = ["ack_all", "batches", "subscribe"]
