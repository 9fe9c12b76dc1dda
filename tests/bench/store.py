"""Event store appends against a bare Lua append and raw XADD, on a private Redis without AOF.

`store.append` is the store's full append (dedupe, version check, match stream, notification
log, command id record) of one event; its baseline is a Lua script that only checks the
version and XADDs the same event, measured in the same run. Variants alternate in short
rounds so background load affects them alike. Both go through the services' client
(`services.redis.connection`, commands packed by hiredis), as the referee's appends do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from services.redis.connection import node_client
from services.redis.lua import Call, LuaScript
from services.store import AppendRequest, NewEvent, RedisEventStore
from tests.bench import replay
from tests.support.redis_env import redis_server

EVENT = NewEvent("tile_played", b'{"type":"tile_played","seat":1,"tile":[6,4],"end":"left"}' * 3)
MATCHES = 100
BATCH = 100
ROUNDS = 3
ROUND_SECONDS = 0.4

BARE_APPEND = LuaScript(
    """
if redis.call('XLEN', KEYS[1]) ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('XADD', KEYS[1], '*', 'type', ARGV[2], '__data__', ARGV[3])
return 1
"""
)

Step = Callable[[], Awaitable[int]]
"""One unit of work; returns how many operations it did."""


def run() -> Iterator[dict[str, Any]]:
    """Yield the append and XADD figures for one client, one at a time and pipelined, then
    the replay speeds (tests/bench/replay.py)."""
    with redis_server(appendfsync="no", env_var=None) as url:
        for mode in ("single", "pipelined"):
            appends, baseline = asyncio.run(_compare_appends(url, mode))
            yield {
                "bench": "store.append",
                "mode": mode,
                "appends_per_s": round(appends),
                "baseline": "lua-append",
                "baseline_per_s": round(baseline),
                "ratio": round(appends / baseline, 2),
            }
        for mode in ("single", "pipelined"):
            rate = asyncio.run(_xadd(url, mode))
            yield {"bench": "store.xadd", "mode": mode, "xadd_per_s": round(rate)}
    yield from replay.run()


async def _compare_appends(url: str, mode: str) -> tuple[float, float]:
    client = node_client(url)
    store = RedisEventStore(client, prefix=f"bench-{mode}")
    match_ids = [f"match-{n}" for n in range(MATCHES)]
    versions = dict.fromkeys(match_ids, 0)
    baseline_versions = dict.fromkeys(match_ids, 0)
    turn = 0

    async def append_one() -> int:
        nonlocal turn
        match_id = match_ids[turn % MATCHES]
        turn += 1
        expected = versions[match_id]
        await store.append(match_id, [EVENT], expected, f"c{expected}")
        versions[match_id] = expected + 1
        return 1

    async def append_batch() -> int:
        batch = [
            AppendRequest(m, [EVENT], versions[m], f"c{versions[m]}") for m in match_ids[:BATCH]
        ]
        results = await store.append_many(batch)
        for m in match_ids[:BATCH]:
            versions[m] += 1
        assert not any(isinstance(r, Exception) for r in results)
        return len(batch)

    def bare_call(match_id: str) -> tuple[list[str], list[bytes | str | int]]:
        return [f"bench-bare-{mode}:{{p0}}:m:{match_id}"], [
            baseline_versions[match_id],
            EVENT.type,
            EVENT.data,
        ]

    async def bare_one() -> int:
        nonlocal turn
        match_id = match_ids[turn % MATCHES]
        turn += 1
        keys, args = bare_call(match_id)
        assert await BARE_APPEND(client, keys, args) == 1
        baseline_versions[match_id] += 1
        return 1

    async def bare_batch() -> int:
        replies = await BARE_APPEND.many(client, [bare_call(m) for m in match_ids[:BATCH]])
        for m in match_ids[:BATCH]:
            baseline_versions[m] += 1
        assert all(reply == 1 for reply in replies)
        return BATCH

    try:
        steps = (append_one, bare_one) if mode == "single" else (append_batch, bare_batch)
        appends, baseline = await _race(*steps)
        return appends, baseline
    finally:
        await client.aclose()


async def _xadd(url: str, mode: str) -> float:
    client = node_client(url)
    key = f"bench-xadd-{mode}"
    fields: dict[FieldT, EncodableT] = {"type": EVENT.type, "__data__": EVENT.data}

    async def one() -> int:
        await client.xadd(key, fields)
        return 1

    async def batch() -> int:
        pipe = client.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.xadd(key, fields)
        await pipe.execute()
        return BATCH

    try:
        [rate] = await _race(one if mode == "single" else batch)
        return rate
    finally:
        await client.aclose()


async def _race(*steps: Step) -> list[float]:
    """Operations per second of each step, run in alternating rounds after a warm-up."""
    for step in steps:
        await step()
    done = [0] * len(steps)
    spent = [0.0] * len(steps)
    for _ in range(ROUNDS):
        for i, step in enumerate(steps):
            start = time.perf_counter()
            deadline = start + ROUND_SECONDS
            while (now := time.perf_counter()) < deadline:
                done[i] += await step()
            spent[i] += now - start
    return [n / s for n, s in zip(done, spent, strict=True)]


async def bare_append_rate(url: str, seconds: float = 2.0, prefix: str = "bench-ceiling") -> float:
    """Bare version-checked Lua appends per second, pipelined across MATCHES matches: the
    ceiling any append path through one client can reach on this Redis."""
    client = Redis.from_url(url)
    versions = dict.fromkeys(range(MATCHES), 0)
    calls_done = 0
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            calls: list[Call] = [
                ([f"{prefix}:{{p0}}:m:{m}"], [versions[m], EVENT.type, EVENT.data])
                for m in range(BATCH)
            ]
            replies = await BARE_APPEND.many(client, calls)
            assert all(reply == 1 for reply in replies)
            for m in range(BATCH):
                versions[m] += 1
            calls_done += BATCH
        return calls_done / (time.perf_counter() - start)
    finally:
        await client.aclose()
