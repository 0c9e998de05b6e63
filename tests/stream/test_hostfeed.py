"""The host feed: an announcement produced before a detector batch is in force for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fleetepi.contract import Host, encode
from fleetepi.detectors import Inventory
from fleetepi.stream.hostfeed import HostFeed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def announcement(host: str, minute: int) -> bytes:
    from datetime import UTC, datetime, timedelta

    ts = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=minute)
    return encode(Host(ts=ts, host=host, attributes={"rack": "r17", "bios": "2.4"}))


def test_sync_waits_for_what_was_produced_before_it(stream_env: Any) -> None:
    env = stream_env
    env.create_topics(partitions=4)
    env.produce_raw(env.names.hosts, [(b"h0", announcement("h0", 0))])

    async def scenario() -> list[str]:
        feed = HostFeed(env.bootstrap, Inventory(), env.names.hosts)
        task = asyncio.create_task(feed.run())
        try:
            await asyncio.wait_for(feed.ready.wait(), 60)
            assert await feed.sync(timeout_s=30)  # connections up: the next one is one round trip
            # Announcements produced after the feed's first load, with the event loop blocked (the
            # feed cannot fetch meanwhile): only sync's waiting can bring them in before it returns.
            env.produce_raw(env.names.hosts, [(f"h{i}".encode(), announcement(f"h{i}", i)) for i in range(1, 20_000)])
            assert await feed.sync(timeout_s=30)
            return [host for _, host, _ in feed.entries]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    hosts = asyncio.run(scenario())
    assert sorted(hosts) == sorted(f"h{i}" for i in range(20_000))
