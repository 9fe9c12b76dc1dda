"""The lean Redis connection (services/redis/lane.py) against a real Redis: replies in order
with errors in their slots, scripts the server forgot loaded again, the URL's (or the
client's) database, raw XREAD entries, an empty batch, a lost connection failing its callers
and then connecting again, and a server that never answers timing its callers out."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.redis.connection import node_client
from services.redis.lane import Lane, close_lane, lane_of
from services.redis.lua import LuaScript

pytestmark = [pytest.mark.service, pytest.mark.anyio]

ECHO = LuaScript("return {KEYS[1], ARGV[1]}")


def key() -> str:
    return f"lane-{uuid.uuid4().hex[:10]}"


async def test_a_batch_gets_its_replies_in_order_with_errors_in_their_slots(
    node_redis_url: str,
) -> None:
    lane = Lane(node_redis_url)
    k = key()
    try:
        replies = await lane.pipeline(
            [("SET", k, "x"), ("GET", k), ("INCR", k), ("GET", key()), ("RPUSH", k, 1)]
        )
        assert replies[:2] == [b"OK", b"x"]
        assert isinstance(replies[2], ResponseError)
        assert replies[3] is None
        assert isinstance(replies[4], ResponseError)  # WRONGTYPE
        with pytest.raises(ResponseError):
            await lane.call("INCR", k)
        batches = await asyncio.gather(*(lane.call("ECHO", str(n)) for n in range(50)))
        assert batches == [str(n).encode() for n in range(50)]
    finally:
        await lane.aclose()


async def test_a_script_the_server_forgot_is_loaded_again(node_redis_url: str) -> None:
    lane = Lane(node_redis_url)
    try:
        await lane.call("SCRIPT", "FLUSH")
        calls = [([f"k{n}"], [n, 1.5]) for n in range(3)]
        assert await lane.run(ECHO, calls) == [
            [f"k{n}".encode(), str(n).encode()] for n in range(3)
        ]
        assert await lane.run(ECHO, calls[:1]) == [[b"k0", b"0"]]
    finally:
        await lane.aclose()


async def test_the_urls_database_is_used(node_redis_url: str) -> None:
    lane = Lane(f"{node_redis_url.rstrip('/')}/3")
    k = key()
    try:
        await lane.call("SET", k, "in three")
        with (
            redis.Redis.from_url(node_redis_url, db=3) as three,
            redis.Redis.from_url(node_redis_url) as zero,
        ):
            assert three.get(k) == b"in three" and zero.get(k) is None
            three.delete(k)
    finally:
        await lane.aclose()


async def test_xread_entries_come_raw(node_redis_url: str) -> None:
    lane = Lane(node_redis_url)
    k = key()
    try:
        entry = await lane.call("XADD", k, "*", "match", "m-1", "__data__", b"{}")
        reply = await lane.call("XREAD", "BLOCK", 100, "STREAMS", k, "0-0")
        assert reply == [[k.encode(), [[entry, [b"match", b"m-1", b"__data__", b"{}"]]]]]
        assert await lane.call("XREAD", "BLOCK", 50, "STREAMS", k, entry) is None
    finally:
        await lane.aclose()


async def test_a_lost_connection_fails_its_callers_and_the_next_call_connects_again(
    node_redis_url: str,
) -> None:
    lane = Lane(node_redis_url)
    name = key()
    try:
        await lane.call("CLIENT", "SETNAME", name)
        waiting = asyncio.create_task(lane.call("BLPOP", key(), 10))
        await asyncio.sleep(0.1)
        with redis.Redis.from_url(node_redis_url) as admin:
            [client] = [c for c in admin.client_list() if c["name"] == name]
            admin.client_kill_filter(_id=client["id"])
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(waiting, 5)
        assert await lane.call("PING") == b"PONG"
    finally:
        await lane.aclose()


async def test_an_unreachable_redis_is_a_connection_error() -> None:
    lane = Lane("redis://127.0.0.1:1/0")
    with pytest.raises(RedisConnectionError):
        await lane.call("PING")


async def test_a_lane_of_a_client_speaks_to_its_node_and_database(node_redis_url: str) -> None:
    client = node_client(f"{node_redis_url.rstrip('/')}/4")
    k = key()
    try:
        lane = lane_of(client)
        assert lane_of(client) is lane  # one lane per client, shared by its users
        assert await lane.call("SET", k, "in four") == b"OK"
        assert await client.get(k) == b"in four"
        assert await lane.pipeline([]) == []  # an empty batch is answered at once
        await client.delete(k)
    finally:
        await close_lane(client)
        await client.aclose()


async def test_a_server_that_never_answers_times_the_callers_out() -> None:
    """A peer that accepts and then says nothing (a Redis paused, a network that dropped the
    route) fails the batches waiting once the lane's timeout passes, like redis-py's socket
    timeout; a blocking command's own wait is added to it."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    lane = Lane(f"redis://127.0.0.1:{port}/0", timeout_s=0.3)
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(RedisTimeoutError):
            await lane.call("PING")
        assert asyncio.get_running_loop().time() - started < 2.0
        started = asyncio.get_running_loop().time()
        with pytest.raises(RedisTimeoutError):  # connects again, and waits out the block too
            await lane.pipeline([("BLPOP", "k", 1)], block_s=1.0)
        assert 1.3 <= asyncio.get_running_loop().time() - started < 3.0
        assert len(accepted) == 2
    finally:
        await lane.aclose()
        server.close()
        for writer in accepted:
            writer.close()
