"""Projection checkpoints on each backend: position and data move together, exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
from redis.crc import key_slot

from services.store import START, EventStore, MemoryEventStore, Recorded, RedisEventStore
from services.store import open_store as open_event_store
from services.store.projection import (
    Checkpoints,
    MemoryCheckpoints,
    ProjectionConflict,
    RedisCheckpoints,
    WriteOp,
    catch_up,
    catch_up_together,
    op,
)
from tests.store.contract import events, matches_in_partition

pytestmark = [pytest.mark.store, pytest.mark.anyio]

PARTITION = 2
NAME = "counts"


class Crash(Exception):
    """Stands for a projector process dying between reading a batch and committing it."""


def counting(checkpoints: Checkpoints, crash_on_call: int | None = None, name: str = NAME) -> Any:
    """A handler counting events per match and listing them in the order applied."""
    calls = 0

    async def handle(entries: Sequence[tuple[str, Recorded]]) -> list[WriteOp]:
        nonlocal calls
        calls += 1
        if calls == crash_on_call:
            raise Crash
        counts = checkpoints.key(name, PARTITION, "events")
        order = checkpoints.key(name, PARTITION, "order")
        ops = [op("HINCRBY", counts, r.match_id, 1) for _, r in entries]
        ops.append(op("RPUSH", order, *(f"{r.match_id}:{r.version}" for _, r in entries)))
        return ops

    return handle


class CheckpointsContract:
    @pytest.fixture
    def store(self) -> EventStore:
        raise NotImplementedError

    @pytest.fixture
    def checkpoints(self) -> Checkpoints:
        raise NotImplementedError

    @pytest.fixture
    def restarted(self) -> Checkpoints:
        """Checkpoints of the same data as seen by a freshly started process."""
        raise NotImplementedError

    async def read_hash(self, checkpoints: Checkpoints, key: str) -> dict[bytes, bytes]:
        raise NotImplementedError

    async def read_list(self, checkpoints: Checkpoints, key: str) -> list[bytes]:
        raise NotImplementedError

    async def fill(self, store: EventStore, per_match: int = 4) -> list[str]:
        """Append `per_match` events to each of three matches of PARTITION, interleaved."""
        match_ids = matches_in_partition(PARTITION, 3)
        for version in range(per_match):
            for match_id in match_ids:
                base = await store.version(match_id)
                await store.append(match_id, events(f"e{version}"), base, f"c{base}")
        return match_ids

    async def expected_order(self, store: EventStore) -> list[bytes]:
        entries = await store.read_log(PARTITION, START, 10_000)
        return [f"{r.match_id}:{r.version}".encode() for _, r in entries]

    async def test_a_new_projection_starts_at_the_log_start(self, checkpoints: Checkpoints) -> None:
        assert await checkpoints.position(NAME, PARTITION) == START

    async def test_a_commit_saves_the_position_with_the_data(
        self, checkpoints: Checkpoints
    ) -> None:
        wins = checkpoints.key(NAME, PARTITION, "wins")

        await checkpoints.commit(NAME, PARTITION, START, "7", [op("HINCRBY", wins, "ann", 2)])

        assert await checkpoints.position(NAME, PARTITION) == "7"
        assert await self.read_hash(checkpoints, wins) == {b"ann": b"2"}
        assert await checkpoints.position(NAME, PARTITION + 1) == START
        assert await checkpoints.position("other", PARTITION) == START

    async def test_a_commit_from_a_stale_position_is_refused_and_writes_nothing(
        self, checkpoints: Checkpoints, restarted: Checkpoints
    ) -> None:
        wins = checkpoints.key(NAME, PARTITION, "wins")
        await checkpoints.commit(NAME, PARTITION, START, "5", [op("HINCRBY", wins, "ann", 1)])

        with pytest.raises(ProjectionConflict) as raised:
            await restarted.commit(NAME, PARTITION, START, "6", [op("HINCRBY", wins, "ann", 1)])

        assert (raised.value.expected, raised.value.actual) == (START, "5")
        assert await checkpoints.position(NAME, PARTITION) == "5"
        assert await self.read_hash(checkpoints, wins) == {b"ann": b"1"}

    async def test_a_crash_between_batches_neither_skips_nor_double_applies(
        self, store: EventStore, checkpoints: Checkpoints, restarted: Checkpoints
    ) -> None:
        match_ids = await self.fill(store)

        with pytest.raises(Crash):
            await catch_up(store, checkpoints, NAME, PARTITION, counting(checkpoints, 3), batch=5)
        saved = await restarted.position(NAME, PARTITION)
        assert [p for p, _ in await store.read_log(PARTITION, START, 10)][-1] == saved

        applied = await catch_up(store, restarted, NAME, PARTITION, counting(restarted), batch=5)
        await store.append(match_ids[0], events("late"), 4, "late")
        applied += await catch_up(store, restarted, NAME, PARTITION, counting(restarted), batch=5)

        assert applied == 3
        order = await self.read_list(restarted, restarted.key(NAME, PARTITION, "order"))
        assert order == await self.expected_order(store)
        counts = await self.read_hash(restarted, restarted.key(NAME, PARTITION, "events"))
        assert counts == {m.encode(): b"5" if m == match_ids[0] else b"4" for m in match_ids}

    async def test_projections_read_together_each_apply_every_entry_once_from_their_own_position(
        self, store: EventStore, checkpoints: Checkpoints, restarted: Checkpoints
    ) -> None:
        """One read of the log feeds projections that stand at different positions."""
        match_ids = await self.fill(store)
        await catch_up(store, checkpoints, NAME, PARTITION, counting(checkpoints), batch=5)
        await store.append(match_ids[1], events("late"), 4, "late")  # NAME is one entry behind

        members = [(NAME, counting(restarted)), ("fresh", counting(restarted, name="fresh"))]
        read = await catch_up_together(store, restarted, PARTITION, members, batch=5)

        assert read == 13  # from the earliest position: the start of the log
        expected = await self.expected_order(store)
        for name in (NAME, "fresh"):
            order = await self.read_list(restarted, restarted.key(name, PARTITION, "order"))
            assert order == expected
        assert await catch_up_together(store, restarted, PARTITION, members) == 0

    async def test_a_limited_catch_up_stops_after_the_batch_that_reaches_it_and_goes_on_later(
        self, store: EventStore, checkpoints: Checkpoints
    ) -> None:
        """A projector holding a partition by lease reads a bounded share of it a round."""
        await self.fill(store)  # 12 entries
        members = [(NAME, counting(checkpoints))]
        assert (
            await catch_up_together(store, checkpoints, PARTITION, members, batch=5, limit=6) == 10
        )
        assert (
            await catch_up_together(store, checkpoints, PARTITION, members, batch=5, limit=6) == 2
        )
        order = await self.read_list(checkpoints, checkpoints.key(NAME, PARTITION, "order"))
        assert order == await self.expected_order(store)

    async def test_two_projectors_from_one_position_apply_a_batch_once(
        self, store: EventStore, checkpoints: Checkpoints, restarted: Checkpoints
    ) -> None:
        await self.fill(store, per_match=1)
        entries = await store.read_log(PARTITION, START, 10)
        first = counting(checkpoints)
        second = counting(restarted)

        await checkpoints.commit(NAME, PARTITION, START, entries[-1][0], await first(entries))
        with pytest.raises(ProjectionConflict):
            await restarted.commit(NAME, PARTITION, START, entries[-1][0], await second(entries))

        order = await self.read_list(checkpoints, checkpoints.key(NAME, PARTITION, "order"))
        assert order == await self.expected_order(store)

    async def test_reset_deletes_position_and_data_so_a_rebuild_matches(
        self, store: EventStore, checkpoints: Checkpoints
    ) -> None:
        await self.fill(store)
        other = checkpoints.key("other", PARTITION, "kept")
        await checkpoints.commit("other", PARTITION, START, "1", [op("SET", other, "yes")])
        await catch_up(store, checkpoints, NAME, PARTITION, counting(checkpoints), batch=4)
        order_key = checkpoints.key(NAME, PARTITION, "order")
        built = await self.read_list(checkpoints, order_key)

        await checkpoints.reset(NAME, PARTITION)

        assert await checkpoints.position(NAME, PARTITION) == START
        assert await self.read_list(checkpoints, order_key) == []
        assert await checkpoints.position("other", PARTITION) == "1"
        await catch_up(store, checkpoints, NAME, PARTITION, counting(checkpoints), batch=7)
        assert await self.read_list(checkpoints, order_key) == built

    @pytest.mark.parametrize(
        "bad",
        [
            op("FLUSHALL", "x"),
            op("EVAL", "x", "return 1", 0),
            op("SET", "elsewhere", "1"),
            op("SET", "PROJ:other:wins", "1"),
            op("SET", "PROJ:counts:_keys", "1"),
            op("SET", "PROJ:counts:wins"),
            op("HSET", "PROJ:counts:wins", "field"),
            op("HINCRBY", "PROJ:counts:wins", "field", 1, 2),
            op("HINCRBY", "PROJ:counts:wins", "field", "1"),
            op("ZADD", "PROJ:counts:wins", "XX", "1"),
            op("ZADD", "PROJ:counts:wins", 1, "a", "2", "b"),
            op("INCRBY", "PROJ:counts:wins", True),
        ],
        ids=repr,
    )
    async def test_writes_that_are_not_allowed_on_the_projection_are_rejected(
        self, checkpoints: Checkpoints, bad: WriteOp
    ) -> None:
        own = checkpoints.key(NAME, PARTITION, "wins")
        projection_root = own.removesuffix(":counts:wins")
        bad = WriteOp(bad.command, bad.key.replace("PROJ", projection_root), bad.args)

        with pytest.raises(ValueError):
            await checkpoints.commit(NAME, PARTITION, START, "1", [op("SET", own, "1"), bad])

        assert await checkpoints.position(NAME, PARTITION) == START

    async def test_every_allowed_write_behaves_like_redis(self, checkpoints: Checkpoints) -> None:
        def key(part: str) -> str:
            return checkpoints.key(NAME, PARTITION, part)

        ops = [
            op("SET", key("s"), "v"),
            op("INCRBY", key("n"), 5),
            op("HSET", key("h"), "a", "1", "b", "2"),
            op("HDEL", key("h"), "b"),
            op("HINCRBY", key("h"), "a", 3),
            op("SADD", key("set"), "x", "y"),
            op("SREM", key("set"), "y"),
            op("ZADD", key("z"), 1.5, "p", 2, "q"),
            op("ZINCRBY", key("z"), 2, "p"),
            op("ZREM", key("z"), "q"),
            op("RPUSH", key("l"), "1", "2"),
            op("SET", key("gone"), "soon"),
            op("DEL", key("gone")),
        ]

        await checkpoints.commit(NAME, PARTITION, START, "1", ops)

        assert await self.values(checkpoints, key) == {
            "s": b"v",
            "n": b"5",
            "h": {b"a": b"4"},
            "set": {b"x"},
            "z": {b"p": 3.5},
            "l": [b"1", b"2"],
            "gone": None,
        }

    async def values(self, checkpoints: Checkpoints, key: Any) -> dict[str, Any]:
        raise NotImplementedError


class TestMemoryCheckpoints(CheckpointsContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return MemoryEventStore()

    @pytest.fixture
    def checkpoints(self) -> Checkpoints:
        return MemoryCheckpoints()

    @pytest.fixture
    def restarted(self, checkpoints: Checkpoints) -> Checkpoints:
        return checkpoints

    async def read_hash(self, checkpoints: Checkpoints, key: str) -> dict[bytes, bytes]:
        return dict(cast(MemoryCheckpoints, checkpoints).data.get(key, {}))

    async def read_list(self, checkpoints: Checkpoints, key: str) -> list[bytes]:
        return list(cast(MemoryCheckpoints, checkpoints).data.get(key, []))

    async def values(self, checkpoints: Checkpoints, key: Any) -> dict[str, Any]:
        data = cast(MemoryCheckpoints, checkpoints).data
        return {part: data.get(key(part)) for part in ("s", "n", "h", "set", "z", "l", "gone")}


class RedisCheckpointsContract(CheckpointsContract):
    async def read_hash(self, checkpoints: Checkpoints, key: str) -> dict[bytes, bytes]:
        client = cast(RedisCheckpoints, checkpoints).client
        return cast(dict[bytes, bytes], await client.hgetall(key))

    async def read_list(self, checkpoints: Checkpoints, key: str) -> list[bytes]:
        client = cast(RedisCheckpoints, checkpoints).client
        return cast(list[bytes], await client.lrange(key, 0, -1))

    async def values(self, checkpoints: Checkpoints, key: Any) -> dict[str, Any]:
        client = cast(RedisCheckpoints, checkpoints).client
        return {
            "s": await client.get(key("s")),
            "n": await client.get(key("n")),
            "h": await client.hgetall(key("h")),
            "set": await client.smembers(key("set")),
            "z": dict(
                cast(
                    list[tuple[bytes, float]], await client.zrange(key("z"), 0, -1, withscores=True)
                )
            ),
            "l": await client.lrange(key("l"), 0, -1),
            "gone": await client.get(key("gone")),
        }

    async def test_all_projection_keys_share_the_partition_slot(
        self, checkpoints: Checkpoints, store: EventStore
    ) -> None:
        keys = [
            checkpoints.keys.projection(NAME, PARTITION),
            checkpoints.key(NAME, PARTITION, "wins"),
            store.keys.log(PARTITION),
        ]
        assert len({key_slot(k.encode()) for k in keys}) == 1


class TestRedisCheckpoints(RedisCheckpointsContract):
    @pytest.fixture
    async def store(self, redis_url: str, key_prefix: str) -> AsyncIterator[EventStore]:
        async with await open_event_store(redis_url, prefix=key_prefix) as store:
            yield store

    @pytest.fixture
    async def checkpoints(self, store: EventStore) -> Checkpoints:
        assert isinstance(store, RedisEventStore)
        return RedisCheckpoints(store.client, prefix=store.keys.prefix)

    @pytest.fixture
    async def restarted(self, redis_url: str, key_prefix: str) -> AsyncIterator[Checkpoints]:
        async with await open_event_store(redis_url, prefix=key_prefix) as other:
            assert isinstance(other, RedisEventStore)
            yield RedisCheckpoints(other.client, prefix=key_prefix)


@pytest.mark.cluster
class TestRedisClusterCheckpoints(RedisCheckpointsContract):
    @pytest.fixture
    async def store(
        self, redis_cluster_urls: list[str], key_prefix: str
    ) -> AsyncIterator[EventStore]:
        async with await open_event_store(redis_cluster_urls[0], prefix=key_prefix) as store:
            yield store

    @pytest.fixture
    async def checkpoints(self, store: EventStore) -> Checkpoints:
        assert isinstance(store, RedisEventStore)
        return RedisCheckpoints(store.client, prefix=store.keys.prefix)

    @pytest.fixture
    async def restarted(
        self, redis_cluster_urls: list[str], key_prefix: str
    ) -> AsyncIterator[Checkpoints]:
        async with await open_event_store(redis_cluster_urls[1], prefix=key_prefix) as other:
            assert isinstance(other, RedisEventStore)
            yield RedisCheckpoints(other.client, prefix=key_prefix)
