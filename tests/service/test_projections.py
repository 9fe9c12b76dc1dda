"""Projections follow the logs live, and rebuilding them from scratch gives the same data."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import msgspec
import pytest
from redis.asyncio import Redis

from engine.rules import Rules
from services.cli.supervisor import Stack
from services.config import Settings
from services.projections.projector import Summary
from services.projections.queries import Queries
from services.store.keys import partition_of
from tests.service.conftest import fold, wait_until_over
from tests.service.test_hosted_matches import create

pytestmark = pytest.mark.service


async def snapshot(url: str, settings: Settings) -> dict[bytes, object]:
    """Every projection key with its content."""
    redis = Redis.from_url(url)
    try:
        out: dict[bytes, object] = {}
        async for key in redis.scan_iter(match=f"{settings.prefix}:*:proj:*"):
            kind = await redis.type(key)
            if kind == b"hash":
                out[key] = await redis.hgetall(key)
            elif kind == b"zset":
                out[key] = await redis.zrange(key, 0, -1, withscores=True)
            elif kind == b"set":
                out[key] = await redis.smembers(key)
            else:
                out[key] = await redis.get(key)
        return out
    finally:
        await redis.aclose()


def test_projections_rebuilt_from_the_log_equal_the_live_ones(
    redis_url: str, settings: Settings
) -> None:
    """Summaries, match lists and results by bot: live, then rebuilt with one command."""
    specs = [(Rules.make("express"), ["greedy", "random", "greedy", "random"])] * 3
    specs += [(Rules.make("straight", players=2), ["random", "greedy"])] * 3
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}):
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        logs = wait_until_over(redis_url, settings, ids)

        async def finished() -> list[str]:
            redis = Redis.from_url(redis_url)
            try:
                return [s.match_id for s in await Queries(redis, settings).matches(True)]
            finally:
                await redis.aclose()

        deadline = time.monotonic() + 20
        while sorted(asyncio.run(finished())) != sorted(ids):
            assert time.monotonic() < deadline, "the projector did not catch up"
            time.sleep(0.1)
    live = asyncio.run(snapshot(redis_url, settings))

    async def results() -> dict[str, dict[str, int]]:
        redis = Redis.from_url(redis_url)
        try:
            return await Queries(redis, settings).results()
        finally:
            await redis.aclose()

    table = asyncio.run(results())
    wins = {"greedy": 0, "random": 0}
    for log in logs.values():
        state = fold(log)
        assert state.result is not None
        for seat, name in enumerate(state.players):
            wins[name] += state.rules.side_of(seat) == state.result.winner
    assert {n: table[n]["won"] for n in wins} == wins
    assert sum(r["played"] for r in table.values()) == 3 * 4 + 3 * 2

    env = Stack(redis_url, settings).env()
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "projections", "rebuild"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "rebuilt" in done.stdout
    assert asyncio.run(snapshot(redis_url, settings)) == live


def test_a_match_list_reads_only_the_latest_of_each_partition(
    redis_url: str, settings: Settings
) -> None:
    """GET /matches?status=finished used to read every finished match ever (an amplification
    a hostile client could use); a list now reads at most ``limit`` a partition."""

    async def scenario() -> list[str]:
        redis = Redis.from_url(redis_url)
        try:
            queries = Queries(redis, settings)
            key = queries.checkpoints.key
            for n in range(30):
                match_id = f"m-{n:02d}"
                p = partition_of(match_id, settings.partitions)
                summary = Summary(
                    match_id=match_id, status="finished", family="express", players=("a", "b"),
                    round=1, version=10, scores=(0, 0), turn=None, ends=(), updated=float(n),
                )  # fmt: skip
                await redis.hset(
                    key("summary", p, "matches"), match_id, msgspec.json.encode(summary)
                )
                await redis.zadd(key("summary", p, "finished"), {match_id: float(n)})
            return [s.match_id for s in await queries.matches(finished=True, limit=5)]
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == [f"m-{n:02d}" for n in range(25, 30)]
