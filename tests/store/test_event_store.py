"""The event store contract on each backend: in memory, one Redis node, a Redis Cluster."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from services.redis.connection import node_client
from services.redis.servers import bundled_server_binary, private_server
from services.store import (
    Ack,
    AppendRequest,
    EventStore,
    MemoryEventStore,
    NewEvent,
    OutboxEntry,
    RedisEventStore,
    Schedule,
    open_store,
    partition_of,
)
from tests.store.contract import EventStoreContract, events, matches_in_partition

pytestmark = [pytest.mark.store, pytest.mark.anyio]


class TestMemoryEventStore(EventStoreContract):
    @pytest.fixture
    def store(self) -> EventStore:
        return MemoryEventStore()

    @pytest.fixture
    def second_writer(self, store: EventStore) -> EventStore:
        return store

    async def snapshot(self, store: EventStore) -> Any:
        # Acknowledgements are checked on their own (`acknowledged`), as on Redis, where they
        # live in a group's pending entries rather than in the stream.
        assert isinstance(store, MemoryEventStore)
        kept = {k: copy.deepcopy(v) for k, v in vars(store).items() if k != "streams"}
        return kept | {"streams": store.streams.contents()}

    async def pending_command(self, store: EventStore, stream: str, group: str) -> str:
        self.delivered = getattr(self, "delivered", 0) + 1
        return f"1712345-{self.delivered}"

    async def acknowledged(self, store: EventStore, stream: str, group: str, entry_id: str) -> bool:
        assert isinstance(store, MemoryEventStore)
        return entry_id in store.acked(stream, group)

    async def clock_ms(self, store: EventStore) -> int:
        assert isinstance(store, MemoryEventStore)
        return int(store.clock() * 1000)


async def redis_snapshot(store: EventStore) -> dict[bytes, Any]:
    """Every key under the store's prefix with its full content."""
    assert isinstance(store, RedisEventStore)
    client = store.client
    content: dict[bytes, Any] = {}
    async for key in client.scan_iter(match=f"{store.keys.prefix}:*"):
        kind = await client.type(key)
        if kind == b"stream":
            content[key] = list(await client.xrange(key) or [])
        elif kind == b"hash":
            content[key] = await client.hgetall(key)
        else:
            content[key] = (kind, await client.dump(key))
    return content


class RedisStoreContract(EventStoreContract):
    """Checks that only make sense on Redis, run on a node and on a cluster."""

    url: str

    async def snapshot(self, store: EventStore) -> Any:
        return await redis_snapshot(store)

    async def pending_command(self, store: EventStore, stream: str, group: str) -> str:
        assert isinstance(store, RedisEventStore)
        client = store.client
        with contextlib.suppress(ResponseError):  # BUSYGROUP: made by an earlier call
            await client.xgroup_create(stream, group, id="0", mkstream=True)
        entry_id = await client.xadd(stream, {"__data__": b"command"})
        reply = await client.xreadgroup(group, "consumer", {stream: ">"}, count=1)
        [[_, [(delivered, _)]]] = reply
        assert delivered == entry_id
        return entry_id.decode()

    async def acknowledged(self, store: EventStore, stream: str, group: str, entry_id: str) -> bool:
        assert isinstance(store, RedisEventStore)
        pending = await store.client.xpending_range(stream, group, "-", "+", 1000)
        return entry_id.encode() not in {p["message_id"] for p in pending}

    async def clock_ms(self, store: EventStore) -> int:
        assert isinstance(store, RedisEventStore)
        seconds, micros = await store.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def test_a_wrong_typed_ack_stream_fails_the_append_before_any_write(
        self, store: EventStore
    ) -> None:
        assert isinstance(store, RedisEventStore)
        not_a_stream = f"{self.commands(store, 'm1')}:string"
        await store.client.set(not_a_stream, b"x")
        before = await self.snapshot(store)

        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await store.append("m1", events("a"), 0, "c1", ack=Ack(not_a_stream, "g", "1-0"))

        assert await self.snapshot(store) == before

    async def test_an_append_that_fails_leaves_the_others_of_its_partition_whole(
        self, store: EventStore
    ) -> None:
        """The appends of a partition share one script: one that fails (its match stream is
        not a stream) fails the batch, and every other is applied with its schedule and ack,
        as when each append had a script of its own."""
        assert isinstance(store, RedisEventStore)
        m1, m2, m3 = matches_in_partition(partition_of("m1", 8), 3)
        stream = self.commands(store, m1)
        deadlines = self.deadlines(store, m1)
        await store.client.set(store.keys.match(m2), b"x")
        entries = [await self.pending_command(store, stream, "referee") for _ in range(3)]

        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await store.append_many(
                [
                    AppendRequest(
                        match_id, events("a"), 0, "c1", (), [Schedule(deadlines, match_id, 5)], ack
                    )
                    for match_id, ack in zip(
                        (m1, m2, m3), (Ack(stream, "referee", e) for e in entries), strict=True
                    )
                ]
            )

        assert [await store.version(m) for m in (m1, m3)] == [1, 1]
        assert sorted(await store.scheduled(deadlines)) == sorted([(m1, 5), (m3, 5)])
        acked = [await self.acknowledged(store, stream, "referee", e) for e in entries]
        assert acked == [True, False, True]

    async def test_match_stream_entry_ids_are_the_versions(self, store: EventStore) -> None:
        assert isinstance(store, RedisEventStore)
        await store.append("m1", events("a", "b", "c"), 0, "c1")

        entries = await store.client.xrange(store.keys.match("m1")) or []

        assert [entry_id for entry_id, _ in entries] == [b"0-1", b"0-2", b"0-3"]

    async def test_log_entries_carry_the_event_in_the_data_field_for_stream_consumers(
        self, store: EventStore
    ) -> None:
        partition = partition_of("m1", 8)
        await store.append("m1", [NewEvent("played", b'{"tile":[6,6]}')], 0, "c1")

        [entry] = await store.read_stream(store.keys.log(partition))

        assert entry.fields == {
            b"match": b"m1",
            b"version": b"1",
            b"type": b"played",
            b"__data__": b'{"tile":[6,6]}',
        }

    async def test_appends_survive_a_server_that_lost_its_scripts(self, store: EventStore) -> None:
        assert isinstance(store, RedisEventStore)
        turns = store.keys.turns(partition_of("m1", 8))
        await store.append("m1", events("a"), 0, "c1")

        await store.client.script_flush()
        await store.append("m1", events("b"), 1, "c2", [OutboxEntry(turns, b"t")])
        await store.client.script_flush()
        await store.append("m1", events("c"), 2, "c3")
        await store.client.script_flush()

        results = await store.append_many(
            [AppendRequest(f"m{n}", events("a"), 0, "c1") for n in range(2, 40)]
        )

        assert [r.type for r in await store.read("m1")] == ["a", "b", "c"]
        assert all(not isinstance(r, Exception) for r in results)
        assert await store.version("m39") == 1


class TestRedisEventStore(RedisStoreContract):
    @pytest.fixture
    async def store(self, redis_url: str, key_prefix: str) -> AsyncIterator[EventStore]:
        async with await open_store(redis_url, cluster=False, prefix=key_prefix) as store:
            yield store

    @pytest.fixture
    async def second_writer(self, redis_url: str, key_prefix: str) -> AsyncIterator[EventStore]:
        async with await open_store(redis_url, prefix=key_prefix) as store:
            yield store


@pytest.mark.cluster
class TestRedisClusterEventStore(RedisStoreContract):
    @pytest.fixture
    async def store(
        self, redis_cluster_urls: list[str], key_prefix: str
    ) -> AsyncIterator[EventStore]:
        url = redis_cluster_urls[0]
        async with await open_store(url, cluster=True, prefix=key_prefix) as store:
            yield store

    @pytest.fixture
    async def second_writer(
        self, redis_cluster_urls: list[str], key_prefix: str
    ) -> AsyncIterator[EventStore]:
        async with await open_store(redis_cluster_urls[-1], prefix=key_prefix) as store:
            yield store

    async def test_open_store_detects_a_cluster(self, store: EventStore) -> None:
        assert isinstance(store, RedisEventStore)
        assert isinstance(store.client, RedisCluster)

    async def test_partitions_spread_over_the_masters(self, store: EventStore) -> None:
        assert isinstance(store, RedisEventStore)
        assert isinstance(store.client, RedisCluster)
        owners = [
            store.client.get_node_from_key(store.keys.log(p)) for p in range(store.keys.partitions)
        ]
        assert len({node.name for node in owners if node is not None}) == 3


def _servers() -> dict[str, str]:
    """Every redis-server at hand, by version: the bundled 6.2, and whatever is on PATH."""
    found: dict[str, str] = {}
    for binary in (bundled_server_binary(), shutil.which("redis-server")):
        if binary is not None:
            version = subprocess.run([binary, "--version"], capture_output=True, text=True)
            found.setdefault(version.stdout.split()[2].removeprefix("v="), binary)
    return found


@pytest.mark.parametrize("binary", list(_servers().values()), ids=list(_servers()))
async def test_a_deadline_taken_from_the_servers_clock_reaches_its_replica_as_written(
    binary: str,
) -> None:
    """Scripts are replicated by their effects on Redis 6.2 and 7.0 alike, so an append may
    read TIME before it writes: the replica gets the deadline the master computed, not a
    second reading of its own clock."""
    with (
        private_server(appendfsync="no", binary=binary) as master_url,
        private_server(appendfsync="no", binary=binary) as replica_url,
    ):
        master, replica = node_client(master_url), node_client(replica_url)
        try:
            port = int(master_url.rsplit(":", 1)[1])
            await replica.replicaof("127.0.0.1", port)
            for _ in range(200):
                if (await replica.info("replication"))["master_link_status"] == "up":
                    break
                await asyncio.sleep(0.05)
            store = RedisEventStore(master, prefix="replicated")
            deadlines = store.keys.deadlines(store.keys.partition_of("m1"))
            await store.append(
                "m1", events("a"), 0, "c1", schedule=[Schedule.after(deadlines, "m1", 2_000)]
            )
            assert await master.wait(1, 5_000) == 1
            written = await master.zscore(deadlines, "m1")
            assert written is not None and await replica.zscore(deadlines, "m1") == written
        finally:
            await master.aclose()
            await replica.aclose()
