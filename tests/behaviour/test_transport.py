"""The message transport's contract, on the in-memory backend and on Redis: consumer groups
created at the start, pending work claimed, poison parked, schedules, leases."""

from __future__ import annotations

import asyncio

import pytest

from services.core.leases import PartitionLeases
from services.core.worker import GroupWorker
from services.store.base import NewEvent, Schedule
from services.transport import memory, redis
from services.transport.base import Consumer, Entry, Message
from services.transport.redis import FanIn, RedisConsumer
from tests.support.backends import Backend, redis_backend

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


class SlowWorker(GroupWorker):
    """Handles each batch slowly (far past the claim's idle time), failing the first ``fail``
    batches; records what it was handed."""

    def __init__(self, reader: Consumer, *, claim_idle_ms: int, fail: int = 0) -> None:
        super().__init__()
        self.reader = reader
        self.claim_idle_ms = claim_idle_ms
        self.fail = fail
        self.handed: list[bytes | None] = []
        self.busy = 0
        self.most = 0
        """The most batches handled at once."""

    async def handle(self, entries: list[Entry]) -> None:
        self.handed += [e.data for e in entries]
        self.busy += 1
        self.most = max(self.most, self.busy)
        try:
            await asyncio.sleep(0.3)
        finally:
            self.busy -= 1
        if self.fail:
            self.fail -= 1
            raise RuntimeError("this batch fails")
        await self.reader.ack(entries)


async def test_a_slow_batch_is_not_claimed_back_from_under_the_worker_handling_it(
    backend: Backend,
) -> None:
    """An entry a worker is still handling is idle to Redis, but claiming it back would decide
    it a second time beside the first (a command refused, then applied): its own reclaim loop
    leaves it alone however long it takes, and another consumer's claim would too."""
    stream = backend.store.keys.commands(0)
    reader = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=5)
    worker = SlowWorker(reader, claim_idle_ms=40)
    await reader.start()
    await backend.transport.publish([Message(stream, b"one"), Message(stream, b"two")])
    serving = asyncio.create_task(worker.serve())
    try:
        for _ in range(100):
            if len(worker.handed) >= 2 and not reader.held:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # several reclaim periods more
        assert worker.handed == [b"one", b"two"]
        assert await reader.read(pending=True) == []
    finally:
        worker.stop()
        await serving


async def test_a_batch_that_failed_is_claimed_and_handled_again_by_the_same_worker(
    backend: Backend,
) -> None:
    """Once its handling has ended in failure, a batch left pending is the reclaim loop's."""
    stream = backend.store.keys.commands(0)
    reader = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=5)
    worker = SlowWorker(reader, claim_idle_ms=40, fail=1)
    await reader.start()
    await backend.transport.publish([Message(stream, b"once more")])
    serving = asyncio.create_task(worker.serve())
    try:
        for _ in range(100):
            if len(worker.handed) >= 2 and not reader.held:
                break
            await asyncio.sleep(0.05)
        assert worker.handed == [b"once more", b"once more"]
        assert await reader.read(pending=True) == []
    finally:
        worker.stop()
        await serving


async def test_an_entry_deleted_while_pending_is_acknowledged_by_the_next_claim(
    redis_url: str, key_prefix: str
) -> None:
    """Redis 7 drops it from the group when it is claimed; 6.2 answers it without its id,
    and the claim finds it gone from the stream: either way nothing stays pending for good."""
    async with redis_backend(redis_url, key_prefix) as backend:
        stream = backend.store.keys.commands(0)
        first = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=3)
        other = backend.transport.consumer("g", "c2", [stream], count=10, max_deliveries=3)
        await first.start()
        await backend.transport.publish([Message(stream, b"gone"), Message(stream, b"kept")])
        gone, kept = await first.read()
        assert isinstance(first, RedisConsumer)
        await first.redis.xdel(stream, gone.id)
        await asyncio.sleep(0.01)
        assert [e.data for e in await other.claim(min_idle_ms=1)] == [b"kept"]
        assert [e.id for e in await other.read(pending=True)] == [kept.id]
        assert await first.read(pending=True) == []


async def test_a_batch_read_while_the_one_before_failed_is_handled_next(
    backend: Backend,
) -> None:
    """The next batch is read while one is handled; if that one fails, the next is still
    handled — dropping it would leave its entries pending and held for good."""
    stream = backend.store.keys.commands(0)
    reader = backend.transport.consumer("g", "c1", [stream], count=10, max_deliveries=5)
    worker = SlowWorker(reader, claim_idle_ms=40, fail=1)
    await reader.start()
    await backend.transport.publish([Message(stream, b"first")])
    serving = asyncio.create_task(worker.serve())
    try:
        for _ in range(100):
            if worker.handed:
                break
            await asyncio.sleep(0.01)
        await backend.transport.publish([Message(stream, b"second")])  # read while it fails
        for _ in range(100):
            if len(worker.handed) >= 3 and not reader.held:
                break
            await asyncio.sleep(0.05)
        assert sorted(d or b"" for d in worker.handed) == [b"first", b"first", b"second"]
        assert await reader.read(pending=True) == []
    finally:
        worker.stop()
        await serving


async def test_batches_are_handled_side_by_side_up_to_the_overlap_and_stop_lets_go(
    backend: Backend,
) -> None:
    """With an overlap of 2 the next batch is handled while one is still in hand, never a
    third beside them; ``stop()`` ends the batches in hand, and what they had not acknowledged
    stays pending for a claim, held by nobody."""
    stream = backend.store.keys.commands(0)
    reader = backend.transport.consumer("g", "c1", [stream], count=1, max_deliveries=5)
    worker = SlowWorker(reader, claim_idle_ms=60_000)
    worker.overlap = 2
    await reader.start()
    await backend.transport.publish([Message(stream, d) for d in (b"a", b"b", b"c")])
    serving = asyncio.create_task(worker.serve())
    try:
        for _ in range(100):
            if len(worker.handed) == 3 and not worker.busy:
                break
            await asyncio.sleep(0.05)
        assert (worker.handed, worker.most) == ([b"a", b"b", b"c"], 2)
        assert await reader.read(pending=True) == []
        await backend.transport.publish([Message(stream, b"cut short")])
        for _ in range(100):
            if worker.busy:
                break
            await asyncio.sleep(0.01)
    finally:
        worker.stop()
        await serving
    assert not reader.held and not worker.busy
    assert [e.data for e in await reader.read(pending=True)] == [b"cut short"]


async def test_a_stream_is_trimmed_below_what_its_groups_have_read_and_acknowledged(
    backend: Backend,
) -> None:
    """Storage: an entry goes once every group has been delivered it and acknowledged it; an
    entry pending with any group, or not yet read by one, stays."""
    stream = backend.store.keys.commands(0)
    first = backend.transport.consumer("g1", "c1", [stream], count=3, max_deliveries=3)
    second = backend.transport.consumer("g2", "c1", [stream], count=10, max_deliveries=3)
    await first.start()
    await second.start()
    await backend.transport.publish([Message(stream, f"m{k}".encode()) for k in range(6)])
    read = await second.read()
    await second.ack(read)
    assert await backend.transport.trim([stream]) == 0  # g1 has read nothing
    mine = await first.read()  # m0 m1 m2
    await first.ack(mine[:1])
    assert await backend.transport.trim([stream]) == 1  # m0 went; m1 is pending with g1
    await first.ack(mine[1:])
    assert await backend.transport.trim([stream]) == 1  # m1; m2, the last g1 read, stays
    left = [e.fields[b"__data__"] for e in await backend.store.read_stream(stream)]
    assert left == [b"m2", b"m3", b"m4", b"m5"]
    assert [e.data for e in await first.read()] == [b"m3", b"m4", b"m5"]  # nothing lost


async def test_a_stream_no_group_reads_is_not_trimmed(backend: Backend) -> None:
    stream = backend.store.keys.commands(1)
    await backend.transport.publish([Message(stream, b"unread")])
    assert await backend.transport.trim([stream, backend.store.keys.commands(2)]) == 0
    assert len(await backend.store.read_stream(stream)) == 1


async def test_the_dead_letter_stream_keeps_only_its_latest_entries(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage (docs/operations.md): dead letters are bounded, the oldest dropped first."""
    keys = backend.store.keys
    stream = keys.commands(3)
    reader = backend.transport.consumer("g", "c1", [stream], count=50, max_deliveries=3)
    await reader.start()
    await backend.transport.publish([Message(stream, b"x%d" % k) for k in range(12)])
    entries = await reader.read()
    monkeypatch.setattr(memory, "DEAD_KEPT", 10)
    monkeypatch.setattr(redis, "DEAD_KEPT", 10)
    for entry in entries:
        await reader.dead_letter(entry, "test")
    parked = await backend.store.read_stream(keys.dead_letters)
    assert [e.fields[b"__data__"] for e in parked] == [b"x%d" % k for k in range(2, 12)]


async def test_a_deadline_is_due_only_once_every_command_that_arrived_before_it_is_processed(
    backend: Backend,
) -> None:
    """On the transport's clock (the Redis server's), a deadline that passed waits while a
    command that reached the partition before it is unread or pending: a move queued in time
    is decided before its turn is timed out. A command that came after it holds nothing."""
    keys, transport = backend.store.keys, backend.transport
    commands, deadlines = keys.commands(1), keys.deadlines(1)
    reader = transport.consumer("referee", "r1", [commands], count=10, max_deliveries=3)
    await reader.start()
    await transport.publish([Message(commands, b"queued in time")])
    [first] = await transport.deadlines_due([1], "referee", 10, stall_ms=60_000)
    arrived = first.now_ms  # the command is at least this old
    await transport.reschedule(deadlines, "before", arrived - 10_000)
    while (await transport.deadlines_due([1], "referee", 10, 60_000))[0].now_ms <= arrived + 1:
        await asyncio.sleep(0.005)
    await transport.reschedule(deadlines, "after", arrived + 1)
    unread = (await transport.deadlines_due([1], "referee", 10, 60_000))[0]
    [entry] = await reader.read()
    assert entry.arrived_ms <= arrived
    pending = (await transport.deadlines_due([1], "referee", 10, 60_000))[0]
    await reader.ack([entry])
    await transport.publish([Message(commands, b"came later")])
    processed = (await transport.deadlines_due([1], "referee", 10, 60_000))[0]
    assert (unread.matches, unread.held) == (["before"], 1)
    assert (pending.matches, pending.held) == (["before"], 1)
    assert (processed.matches, processed.held) == (["before", "after"], 0)


async def test_a_gap_in_the_deadline_checks_longer_than_a_stall_pushes_every_deadline_back(
    backend: Backend,
) -> None:
    """Nobody checked the partition's deadlines for longer than a stall (Redis paused, the
    referee stalled or died): the next check first gives every turn still running at the
    last check that time back. A turn whose time was already up then is owed nothing."""
    keys, transport = backend.store.keys, backend.transport
    deadlines = keys.deadlines(2)
    [first] = await transport.deadlines_due([2], "referee", 10, stall_ms=60_000)
    await transport.reschedule(deadlines, "m1", first.now_ms + 300)
    await transport.reschedule(deadlines, "m0", first.now_ms - 100)
    await asyncio.sleep(0.6)
    [again] = await transport.deadlines_due([2], "referee", 10, stall_ms=400)
    gap = again.now_ms - first.now_ms
    assert again.matches == ["m0"] and again.shifted_ms == gap >= 600
    assert await backend.store.scheduled(deadlines) == [
        ("m0", first.now_ms - 100),
        ("m1", first.now_ms + 300 + gap),
    ]
    [soon] = await transport.deadlines_due([2], "referee", 10, stall_ms=60_000)
    assert soon.shifted_ms == 0


async def test_an_append_that_begins_a_turn_sets_its_beginning_and_deadline_from_one_reading(
    backend: Backend,
) -> None:
    """Both are on the store's clock (on Redis the server's), read once by the append."""
    store, keys = backend.store, backend.store.keys
    p = keys.partition_of("m1")
    schedule = [
        Schedule.after(keys.deadlines(p), "m1", 2_000),
        Schedule.after(keys.turn_began(p), "m1", 0),
    ]
    await store.append("m1", [NewEvent("a", b"{}")], 0, "c1", schedule=schedule)
    [(_, began)] = await store.scheduled(keys.turn_began(p))
    assert await store.scheduled(keys.deadlines(p)) == [("m1", began + 2_000)]
