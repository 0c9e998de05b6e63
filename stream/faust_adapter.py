"""Every place fleetepi reaches into faust or aiokafka internals, in one module.

faust-streaming gives the workers group membership, rebalances, flow control
and offset commits; fleetepi replaces three of its internals for speed and
uses one private method (``OVERRIDES`` below, each with the why). An upgrade
of faust or aiokafka that changes any of them must be read before it ships:
``tests/stream/test_faust_adapter.py`` hashes the upstream source each
override was written against and fails, naming the override, when it
changes. ``--fetch-loop faust`` runs the worker without the first override.

The fetch loop (:class:`FastConsumer`) --

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
from typing import Any, NamedTuple

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


class RawTopic(faust.Topic):
    """A topic channel whose queue holds the conductor's messages themselves (``fleetepi.stream.batches``)."""

    def _compile_decode(self) -> None:
        # faust.Topic compiles ``decode`` from its schema into an instance attribute
        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return message

        self.decode = decode  # type: ignore[method-assign]


async def partitions_for(app: Any, topic: str) -> set[int]:
    """The partitions of ``topic`` as the app's own producer knows them (no second client)."""
    return set(await app.producer._ensure_producer().partitions_for(topic))


class Override(NamedTuple):
    """One reach into faust/aiokafka: what is replaced or used, by what, and the upstream source's hash."""

    upstream: str  # module:qualified.name in faust or aiokafka
    ours: str  # what in this module replaces or uses it
    why: str
    sha256: str  # of inspect.getsource(upstream) when this override was written and checked


#: The upstream code each override depends on (faust-streaming 0.15.3, aiokafka 0.14.0 when last checked).
OVERRIDES: tuple[Override, ...] = (
    Override("faust.transport.drivers.aiokafka:Consumer._drain_messages", "FastConsumer._drain_messages",
             "faust races four tasks per record to honour suspend_flow; ours checks it per record (~40 % of "
             "a consumer's time)", "44a2500309e83c630493f6828af50166ec8d96a0b3e4fb2bab735f704ae93417"),
    Override("faust.app.base:App._new_transport", "FastApp._new_transport",
             "the transport (FastTransport) that builds our consumer for kafka:// brokers", "42db531312dd776fc3937154a32f19eeb9ad7d4ebc2722a92d081a2d271baea1"),
    Override("faust.topics:Topic._compile_decode", "RawTopic._compile_decode",
             "a stage takes the conductor's messages themselves, without faust's Event and deserialiser "
             "(~100 us a record)", "6474178f8c211c056192d1b1a470cd9a617a3d7c59babf9b9297b24e3e507c26"),
    Override("faust.transport.drivers.aiokafka:Producer._ensure_producer", "partitions_for",
             "the partition count of a topic from the producer faust already holds", "5592a4bbdf2513253f98233a4eac931ded2a531a86f269cddcc33bc3f5827db5"),
)


__all__ = ["OVERRIDES", "FastApp", "FastConsumer", "FastTransport", "Override", "RawTopic", "partitions_for"]
