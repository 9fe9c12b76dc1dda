"""Consumer groups as the services use them: created at 0, claimed, dead-lettered, real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from services.streams import GroupReader

pytestmark = pytest.mark.service


def test_a_group_created_late_still_sees_entries_written_before_it(
    redis_url: str, key_prefix: str
) -> None:
    async def scenario() -> list[bytes | None]:
        redis = Redis.from_url(redis_url)
        try:
            stream = f"{key_prefix}:s"
            await redis.xadd(stream, {"__data__": b"early"})
            reader = GroupReader(redis, [stream], "g", "c1", block_ms=10)
            await reader.start()
            return [e.data for e in await reader.read()]
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == [b"early"]


def test_an_entry_that_keeps_failing_is_dead_lettered_with_the_reason(
    redis_url: str, key_prefix: str
) -> None:
    """Claimed by another consumer each time it idles; past the limit, parked and acked."""

    async def scenario() -> None:
        redis = Redis.from_url(redis_url)
        try:
            stream, dead = f"{key_prefix}:s", f"{key_prefix}:dead"
            first = GroupReader(
                redis, [stream], "g", "c1", block_ms=10, dead_letters=dead, max_deliveries=3
            )
            other = GroupReader(
                redis, [stream], "g", "c2", block_ms=10, dead_letters=dead, max_deliveries=3
            )
            await first.start()
            await redis.xadd(stream, {"__data__": b"poison"})
            assert [e.data for e in await first.read()] == [b"poison"]  # delivery 1, never acked
            deliveries = []
            for _ in range(4):
                other._claim_cursor.clear()
                deliveries.append([e.deliveries for e in await other.claim(min_idle_ms=0)])
            assert deliveries == [[2], [3], [], []]  # the 4th delivery is parked instead
            parked = await redis.xrange(dead)
            assert len(parked) == 1
            fields = parked[0][1]
            assert fields[b"__data__"] == b"poison"
            assert b"delivered 4 times" in fields[b"reason"]
            assert (await redis.xpending(stream, "g"))["pending"] == 0
        finally:
            await redis.aclose()

    asyncio.run(scenario())
