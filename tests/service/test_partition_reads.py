"""No process reads every partition: the bot workers of a pool share its partitions by lease,
and a gateway reads a partition's log only while it has an interest there.

Real Redis (a node, and the session's cluster where marked), real processes. The long form —
512 partitions on the local cluster, matches played through bot workers and a gateway — is
tests/service/many_partitions.py, run by `make test-many-partitions` (docs/scaling.md,
"Limits").
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from typing import Any

import httpx
import pytest

from engine.rules import Rules
from events.codec import JSON
from events.envelope import Envelope
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.gateway.hub import READ_LINGER_S, Hub
from services.redis.lane import Lane
from services.store.keys import Keys
from services.store.redis import RedisEventStore
from services.store.source import MatchSource
from services.transport.base import DATA
from tests.gateway.conftest import UNCAPPED, free_port, wait_healthy
from tests.service.conftest import read_log, wait_until_over
from tests.service.test_hosted_matches import assert_clean
from tests.service.test_metrics import scrape
from tests.support.matches import random_match
from tests.support.ports import consecutive_free_ports
from tests.support.topology import client_for, is_cluster_url

pytestmark = pytest.mark.service

POOL = "random"
ROLE = f"bots-{POOL}"


def settings_for(url: str, partitions: int, **more: Any) -> Settings:
    """A stack's settings: its own prefix, quick leases and claims, no turn deadlines; the
    watch list slow enough that only a claim can save a turn a dead worker held."""
    base: dict[str, Any] = {
        "redis_url": url,
        "prefix": f"r{uuid.uuid4().hex[:10]}",
        "partitions": partitions,
        "claim_idle_ms": 600,
        "lease_ms": 1500,
        "watch_ms": 60_000,
        "log_level": "warning",
    }
    return Settings(**(base | more))


def holders(url: str, settings: Settings) -> list[str | None]:
    """Who holds each partition of the pool's leases (None: nobody)."""

    async def go() -> list[str | None]:
        redis = client_for(url)
        try:
            keys = Keys(settings.prefix, settings.partitions)
            pipe = redis.pipeline(transaction=False)  # one GET each: a key per cluster slot
            for p in range(settings.partitions):
                pipe.get(keys.lease(p, ROLE))
            return [None if v is None else v.decode() for v in await pipe.execute()]
        finally:
            await redis.aclose()

    return asyncio.run(go())


def wait_shared(url: str, settings: Settings, workers: set[str], timeout: float = 60.0) -> None:
    """Wait until ``workers``, and they only, hold the pool's partitions, each its share."""
    share = -(-settings.partitions // len(workers))
    deadline = time.monotonic() + timeout
    while True:
        held = holders(url, settings)
        if set(held) == workers and all(held.count(w) <= share for w in workers):
            return
        assert time.monotonic() < deadline, f"leases {held}, wanted {sorted(workers)}"
        time.sleep(0.1)


def create(url: str, settings: Settings, ids: list[str], target: int = 30) -> list[str]:
    """Open two-player matches of the pool's house bots under ``ids`` (short ones: to
    ``target`` points), through the command streams."""

    async def go() -> list[str]:
        redis = client_for(url)
        try:
            client = service_client(redis, settings, sender="test")
            rules = Rules.make("straight", players=2, target=target)
            return [await client.create_match(rules, [POOL, POOL], match_id=m) for m in ids]
        finally:
            await redis.aclose()

    return asyncio.run(go())


def ids_in(settings: Settings, partitions: set[int], count: int) -> list[str]:
    """``count`` fresh match ids, spread over ``partitions``."""
    keys = Keys(settings.prefix, settings.partitions)
    out: list[str] = []
    while len(out) < count:
        match_id = f"m-{uuid.uuid4().hex[:10]}"
        if keys.partition_of(match_id) in partitions:
            out.append(match_id)
    return out


def pending_by_consumer(url: str, settings: Settings) -> dict[str, int]:
    """The pool's pending turns, by the worker they wait on, over every partition."""

    async def go() -> dict[str, int]:
        redis = client_for(url)
        try:
            keys = Keys(settings.prefix, settings.partitions)
            out: dict[str, int] = {}
            for stream in keys.all_turns(POOL):
                if not await redis.exists(stream):
                    continue
                summary = await redis.xpending(stream, ROLE)
                for row in summary.get("consumers") or []:
                    name = row["name"].decode() if isinstance(row["name"], bytes) else row["name"]
                    out[name] = out.get(name, 0) + int(row["pending"])
            return out
        finally:
            await redis.aclose()

    return asyncio.run(go())


def test_the_workers_of_a_pool_share_its_partitions_and_every_match_ends(redis_url: str) -> None:
    """Two workers of one pool share its partitions; a third started beside them takes its
    share without a restart of the others; each reads its own, and the matches on every
    partition end (C1)."""
    settings = settings_for(redis_url, partitions=6)
    with Stack(redis_url, settings, pools={POOL: 2}, projector=False) as stack:
        wait_shared(redis_url, settings, {f"{POOL}-0", f"{POOL}-1"})
        stack.spawn(f"bots-{POOL}-2", "bots", "--strategy", POOL, "--name", f"{POOL}-2")
        wait_shared(redis_url, settings, {f"{POOL}-{k}" for k in range(3)})
        held = holders(redis_url, settings)
        ids = create(redis_url, settings, ids_in(settings, set(range(6)), 12))
        logs = wait_until_over(redis_url, settings, ids, timeout=90)
        for log in logs.values():
            assert_clean(log)
        time.sleep(0.3)  # the last answers' acknowledgements
        assert sum(pending_by_consumer(redis_url, settings).values()) == 0
        assert holders(redis_url, settings) == held  # nobody took another's partition
        assert not stack.check()  # none of them exited


def test_a_killed_workers_partitions_are_taken_and_the_turns_it_held_are_answered(
    redis_url: str,
) -> None:
    """A worker stopped, turns of its partitions delivered to it (read under its name, as it
    would have read them before dying), then SIGKILLed: the other takes its partitions once
    its leases run out and claims the turns it held; with no deadline and a watch list too
    slow to send them again, every match still ends (no turn lost)."""
    settings = settings_for(redis_url, partitions=4, lease_ms=5000)  # outlasts a loaded setup
    dead = f"{POOL}-0"
    with Stack(redis_url, settings, pools={POOL: 2}, projector=False) as stack:
        wait_shared(redis_url, settings, {dead, f"{POOL}-1"})
        theirs = {p for p, w in enumerate(holders(redis_url, settings)) if w == dead}
        stack.processes[f"bots-{dead}"].send_signal(signal.SIGSTOP)
        others = {*range(settings.partitions)} - theirs
        ids = create(redis_url, settings, ids_in(settings, theirs, 4) + ids_in(settings, others, 2))
        keys = Keys(settings.prefix, settings.partitions)
        streams = [keys.turns(p, POOL) for p in sorted(theirs)]
        deadline = time.monotonic() + 30
        while pending_by_consumer(redis_url, settings).get(dead, 0) < 4:
            assert time.monotonic() < deadline, pending_by_consumer(redis_url, settings)
            asyncio.run(_deliver(redis_url, streams, dead))
            time.sleep(0.05)
        assert holders(redis_url, settings).count(dead) == len(theirs)  # still its own
        stack.kill(f"bots-{dead}", signal.SIGKILL)
        logs = wait_until_over(redis_url, settings, ids, timeout=90)
        assert set(holders(redis_url, settings)) == {f"{POOL}-1"}
        time.sleep(0.3)  # the last answers' acknowledgements
        assert pending_by_consumer(redis_url, settings).get(dead, 0) == 0
    for log in logs.values():
        assert_clean(log)


async def _deliver(url: str, streams: list[str], consumer: str) -> None:
    """Read the new turns of ``streams`` through the pool's group as ``consumer``: pending
    for it from then on (one read per stream: a key per cluster slot)."""
    redis = client_for(url)
    try:
        for stream in streams:
            await redis.xreadgroup(ROLE, consumer, {stream: ">"})
    finally:
        await redis.aclose()


def _gauge(url: str) -> float:
    return scrape(url)["domino_gateway_partitions_read"][()]


async def followed_lines(base: str, match_id: str) -> list[dict[str, Any]]:
    """Every line of one public stream of a match, from its snapshot to its end."""
    lines: list[dict[str, Any]] = []
    path = f"/api/v1/matches/{match_id}/stream"
    async with (
        httpx.AsyncClient(base_url=base, timeout=30) as http,
        http.stream("GET", path) as r,
    ):
        assert r.status_code == 200, await r.aread()
        async for raw in r.aiter_lines():
            if not raw:
                continue
            line = json.loads(raw)
            lines.append(line)
            if line["type"] == "event" and line["event"]["type"] == "match_ended":
                break
    return lines


@pytest.mark.both_topologies
def test_a_gateway_reads_no_partition_without_an_interest_and_a_followed_match_once_each(
    redis_url: str,
) -> None:
    """Matches played with nobody following them through the gateway: it reads no partition's
    log. One followed mid-match: its partition alone is read, and the stream has its snapshot,
    then every later event exactly once, in order, to the end."""
    settings = settings_for(
        redis_url, partitions=8, bot_pace_ms=10, metrics_port=consecutive_free_ports(3)
    )
    public = free_port()
    with Stack(redis_url, settings, pools={POOL: 1}, projector=False) as stack:
        stack.spawn(
            "gateway", "gateway", "--host", "127.0.0.1", "--port", str(public), env=UNCAPPED
        )
        gateway = f"http://127.0.0.1:{public}"
        wait_healthy(gateway, stack.processes["gateway"])
        metrics = f"http://127.0.0.1:{stack.metrics_ports['gateway']}"
        unwatched = create(redis_url, settings, ids_in(settings, set(range(8)), 3))
        wait_until_over(redis_url, settings, unwatched, timeout=90)
        # a read begun for any of them would still be held (READ_LINGER_S)
        assert _gauge(metrics) == 0

        (match_id,) = create(redis_url, settings, ids_in(settings, set(range(8)), 1), target=60)
        deadline = time.monotonic() + 30
        while len(asyncio.run(read_log(redis_url, settings, match_id))) < 5:
            assert time.monotonic() < deadline, "the match did not start"
            time.sleep(0.02)

        async def watch() -> tuple[list[dict[str, Any]], float]:
            following = asyncio.create_task(followed_lines(gateway, match_id))
            await asyncio.sleep(0.5)
            read = await asyncio.to_thread(_gauge, metrics)
            return await following, read

        lines, read_while_following = asyncio.run(watch())
        log = asyncio.run(read_log(redis_url, settings, match_id))
    assert read_while_following == 1
    assert lines[0]["type"] == "snapshot"
    v0 = lines[0]["id"]
    assert v0 >= 5
    events = [line["id"] for line in lines if line["type"] == "event"]
    assert events == list(range(v0 + 1, len(log) + 1))
    assert_clean(log)


def test_a_partition_is_read_from_when_a_move_waits_there_and_let_go_after_it_lapses(
    redis_url: str, key_prefix: str
) -> None:
    """The hub on a real Redis: no read at the start; a move waiting on a partition starts its
    read at once (the read already waiting gives way), so the event appended after resolves it
    in well under the waiting read's second; none once that interest has lapsed READ_LINGER_S."""
    match_id = "m-0123456789"
    created = random_match(Rules.make("straight", players=2), 1)[0]
    event = Envelope(match_id=match_id, version=1, command_id="c1", ts=time.time(), event=created)

    async def go() -> None:
        redis = client_for(redis_url)
        keys = Keys(key_prefix, 8)
        store = RedisEventStore(redis, partitions=8, prefix=key_prefix)
        tail = None if is_cluster_url(redis_url) else Lane(redis_url)
        hub = Hub(redis, MatchSource(store), keys, keys.replies("gw-test"), 1 << 20, tail)
        try:
            await hub.start()
            await asyncio.sleep(0.2)  # the one read is waiting, naming no partition
            assert hub.reading == {}
            fut = hub.expect(match_id, "c1")
            partition = keys.partition_of(match_id)
            assert set(hub.reading) == {partition}
            fields = {"match": match_id, "version": 1, DATA: JSON.encode(event)}
            await redis.xadd(keys.log(partition), fields)  # type: ignore[arg-type]
            began = time.monotonic()
            assert (await hub.outcome(fut, 5.0)).version == 1
            assert time.monotonic() - began < 0.5
            hub.forget(match_id, "c1", fut)
            now = time.monotonic()
            assert hub.let_go(now) == []  # the interest has just lapsed
            assert hub.let_go(now + READ_LINGER_S) == [partition]
            assert hub.reading == {}
        finally:
            await hub.stop()
            if tail is not None:
                await tail.aclose()
            await redis.aclose()

    asyncio.run(go())
