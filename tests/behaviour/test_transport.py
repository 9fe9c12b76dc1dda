"""The message transport's contract, on the in-memory backend and on Redis: consumer groups
created at the start, pending work claimed, poison parked, schedules, leases."""

from __future__ import annotations

import asyncio

import pytest

from services.core.leases import PartitionLeases
from services.transport.base import Entry, Message
from services.transport.redis import FanIn
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


async def test_a_group_created_late_still_sees_entries_written_before_it(
    backend: Backend,
) -> None:
    stream = backend.store.keys.commands(0)
    await backend.transport.publish([Message(stream, b"early")])
    reader = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=3)
    await reader.start()
    assert [e.data for e in await reader.read()] == [b"early"]


async def test_entries_are_read_once_per_group_and_kept_pending_until_acknowledged(
    backend: Backend,
) -> None:
    stream = backend.store.keys.commands(0)
    first = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=3)
    await first.start()
    await backend.transport.publish([Message(stream, b"a"), Message(stream, b"b")])
    read = await first.read()
    assert [e.data for e in read] == [b"a", b"b"]
    assert await first.read() == []  # nothing new
    assert [e.data for e in await first.read(pending=True)] == [b"a", b"b"]  # after a restart
    await first.ack(read[:1])
    assert [e.data for e in await first.read(pending=True)] == [b"b"]


async def test_an_entry_that_keeps_failing_is_dead_lettered_with_the_reason(
    backend: Backend,
) -> None:
    """Claimed by another consumer each time it idles; past the limit, parked and acked."""
    keys = backend.store.keys
    stream = keys.commands(0)
    first = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=3)
    other = backend.transport.consumer("g", "c2", [stream], count=10, max_deliveries=3)
    await first.start()
    await backend.transport.publish([Message(stream, b"poison")])
    assert [e.data for e in await first.read()] == [b"poison"]  # delivery 1, never acked
    deliveries = []
    for _ in range(4):
        if hasattr(other, "_claim_cursor"):
            other._claim_cursor.clear()  # XAUTOCLAIM's cursor: start over each time
        deliveries.append([e.deliveries for e in await other.claim(min_idle_ms=0)])
    assert deliveries == [[2], [3], [], []]  # the 4th delivery is parked instead
    [parked] = await backend.store.read_stream(keys.dead_letters)
    assert parked.fields[b"__data__"] == b"poison"
    assert b"delivered 4 times" in parked.fields[b"reason"]
    assert await other.read(pending=True) == []


async def test_an_answer_sends_messages_and_acknowledges_what_it_answers_together(
    backend: Backend,
) -> None:
    keys = backend.store.keys
    turns, commands = keys.turns(1, "greedy"), keys.commands(1)
    bot = backend.transport.consumer("bots-greedy", "b1", [turns], count=10, max_deliveries=3)
    await bot.start()
    await backend.transport.publish([Message(turns, b"turn")])
    [entry] = await bot.read()
    await bot.answer([Message(commands, b"answer")], [entry])
    assert [e.fields[b"__data__"] for e in await backend.store.read_stream(commands)] == [b"answer"]
    assert await bot.read(pending=True) == []


async def test_a_schedule_gives_its_due_members_soonest_first(backend: Backend) -> None:
    transport, key = backend.transport, backend.store.keys.deadlines(2)
    await transport.reschedule(key, "late", 300)
    await transport.reschedule(key, "early", 100)
    await transport.reschedule(key, "future", 900)
    other = backend.store.keys.deadlines(3)
    await transport.reschedule(other, "elsewhere", 200)
    assert await transport.due([key, other], 500, 10) == [["early", "late"], ["elsewhere"]]
    assert await transport.due([key], 500, 1) == [["early"]]
    await transport.reschedule(key, "early", None)
    assert await transport.due([key], 500, 10) == [["late"]]


async def test_referees_share_the_partitions_and_a_departed_ones_are_taken(
    backend: Backend,
) -> None:
    table = backend.transport.leases()
    partitions = backend.store.keys.partitions
    a = PartitionLeases(table, partitions, "a", ttl_ms=60_000)
    b = PartitionLeases(table, partitions, "b", ttl_ms=60_000)
    assert await a.refresh() == set(range(partitions))  # alone: everything
    await b.refresh()  # b is alive now; a gives back what exceeds its share
    await a.refresh()
    assert len(a.owned) == partitions // 2
    assert await b.refresh() == set(range(partitions)) - a.owned
    assert b.gained == b.owned
    share = set(a.owned)
    await a.release_all()
    assert await b.refresh() == set(range(partitions))
    assert b.gained == share  # it took a's share, and says so


async def test_a_fan_in_hands_over_what_each_stream_brought_and_no_more_until_asked() -> None:
    """On a Redis Cluster a consumer reads each stream on its own (FanIn): a batch takes what
    every read brought, a stream is read again only once its last entries were taken, and
    while every read fails the consumer is told once per batch, not once per failure."""
    reads: dict[str, int] = {}
    failing = False

    async def read_one(stream: str) -> list[Entry]:
        reads[stream] = reads.get(stream, 0) + 1
        if failing:
            raise ConnectionError("Redis is away")
        return [Entry(stream, f"{reads[stream]}-0".encode(), b"x")]

    fan = FanIn(read_one, block_ms=50)
    try:
        first = await fan.read(["a", "b"])
        assert sorted(e.stream for e in first) == ["a", "b"]
        await asyncio.sleep(0.05)
        assert reads == {"a": 2, "b": 2}  # read again once taken, and then held
        await fan.read(["a"])  # b is no longer followed: its read is cancelled
        await asyncio.sleep(0.05)
        assert "b" not in {t.get_name() for t in asyncio.all_tasks()}
        failing = True
        await fan.read(["a"])  # what a's read brought before: it reads again only after this
        await asyncio.sleep(1.2)  # a failing read is retried every half second: two or more
        with pytest.raises(ConnectionError):
            await fan.read(["a"])
        assert fan._errors == []  # the failures were raised as one
    finally:
        await fan.close()
