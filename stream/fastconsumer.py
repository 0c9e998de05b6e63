"""A faust app whose consumer hands fetched records to the conductor without a race per record.

Why: faust's fetch loop delivers each record with ``Service.wait_first(
callback(message), suspend_flow.wait())``, which starts four tasks (the
delivery, the flow-suspension wait, the service's stopped and crashed
waits), ``asyncio.wait``\\ s on them and cancels three: ~40 % of a counting
consumer's time on this machine (py-spy, docs/bench/stream.md). The race
exists so that a rebalance (``suspend_flow``) abandons the rest of a fetch.

:class:`FastConsumer` checks ``suspend_flow`` before each record instead
and awaits the delivery directly; while it is set (a rebalance is under
way) it keeps faust's race, so what is delivered or dropped then is what
faust would. The one difference: a delivery already
blocked in faust's flow control when a rebalance starts stays blocked
until the flow resumes, and then puts a record of the old generation in
the queue, which :func:`fleetepi.stream.batches.batches` drops unacked (as faust's
stream iterator does); nothing is committed for it, and its offset is not
recorded as read (the partition was sought back to its committed offset
meanwhile: recording it made the consumer skip records it fetched again,
which the recovery tests caught). Stopping the worker cancels the fetch
task as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as faust_aiokafka

#: Records delivered between two yields to the event loop (heartbeats, web, timers).
YIELD_EVERY = 100


class FastConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer with a fetch loop that awaits each delivery directly."""

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - runs in the worker
        deliver = self.callback
        consumer_stopped = self._stopped.is_set
        fetcher_stopped = fetcher._stopped.is_set
        suspended = self.suspend_flow.is_set
        read_offset = self._read_offset
        acks_enabled_for = self.app.topics.acks_enabled_for
        commit_every = self._commit_every
        since_yield = 0
        app = self.app
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                records = self.getmany(timeout=1.0)
                await asyncio.sleep(0)
                if self.should_stop:
                    break
                async for tp, message in records:
                    since_yield += 1
                    if since_yield > YIELD_EVERY:
                        since_yield = 0
                        await asyncio.sleep(0)
                    offset = message.offset
                    last = read_offset[tp]
                    if last is not None and offset < last:
                        continue  # before what this partition already delivered (a re-fetch)
                    if last and offset - last > 1 and acks_enabled_for(message.topic):
                        await self._add_gap(tp, last + 1, offset)  # compacted or transactional gaps
                    if commit_every is not None and self._n_acked >= commit_every:
                        self._n_acked = 0
                        await self.commit()
                    if suspended():
                        # a rebalance is under way: faust's own race, so that what it
                        # delivers or drops is exactly what faust would
                        await self.wait_first(deliver(message), self.suspend_flow.wait())
                    else:
                        await deliver(message)
                    if message.generation_id != app.consumer_generation_id:
                        # Fetched before a rebalance that completed while it was being
                        # delivered (blocked in flow control): the partition was sought
                        # back to its committed offset since, and recording this offset
                        # as read would make the consumer skip what it fetches again.
                        break
                    read_offset[tp] = offset
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise


class FastTransport(faust_aiokafka.Transport):
    Consumer = FastConsumer


class FastApp(faust.App):
    """faust.App with :class:`FastConsumer` (for ``kafka://`` brokers)."""

    def _new_transport(self) -> Any:
        url = self.conf.broker_consumer[0]
        if url.scheme in ("kafka", "aiokafka"):
            return FastTransport(self.conf.broker_consumer, self)
        return super()._new_transport()


__all__ = ["FastApp", "FastConsumer", "FastTransport"]
