"""A Redis Cluster losing a master, and moving a slot, while a hundred matches play.

Each test starts its own cluster (3 masters with a replica each), a stack on it — two
referees, house bots, the projector and a gateway — and 100 matches of house bots, each
watched through the gateway's public stream. What a spectator was shown is what the service
acknowledged: after the fault every match must finish, pass ``domino verify``, and hold every
event any spectator saw, exactly as it was shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from redis.crc import key_slot

from engine.rules import Rules
from events.codec import JSON
from events.envelope import Envelope
from events.model import TurnTimedOut
from services.cli.clients import open_clients, service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.connection import connect
from services.redis.servers import LocalCluster, local_cluster
from services.store import AppendRequest, NewEvent, RedisEventStore
from services.store.keys import Keys
from tests.gateway.conftest import UNCAPPED, free_port, wait_healthy
from tests.support.watch import Watched, check_logs, spectate

OPEN = {**UNCAPPED, "DOMINO_GATEWAY_STREAMS_PER_CLIENT": str(4 * 100)}

pytestmark = pytest.mark.service

MATCHES = 100
PLAY_BEFORE_FAULT_S = 3.0
FINISH_S = 150.0


@contextlib.contextmanager
def cluster_stack(durability: str) -> Iterator[tuple[LocalCluster, Settings, Stack, str]]:
    """A private cluster with a replica per master, and the whole service on it."""
    with local_cluster(3, replicas=1, node_timeout_ms=1000) as cluster:
        settings = Settings(
            redis_url=cluster.urls[0],
            prefix=f"f{uuid.uuid4().hex[:8]}",
            partitions=8,
            claim_idle_ms=1000,
            lease_ms=2000,
            watch_ms=2000,
            durability=durability,  # type: ignore[arg-type]
            log_level="warning",
        )
        with Stack(
            cluster.urls[0], settings, referees=2, pools={"random": 2, "greedy": 1}
        ) as stack:
            port = free_port()
            os.environ.update(OPEN)
            try:
                stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port))
            finally:
                for name in OPEN:
                    os.environ.pop(name, None)
            gateway = f"http://127.0.0.1:{port}"
            wait_healthy(gateway, stack.processes["gateway"])
            yield cluster, settings, stack, gateway


async def create_matches(settings: Settings, count: int = MATCHES) -> list[str]:
    """``count`` matches of house bots, long enough to be playing when the fault comes."""
    assert settings.redis_url is not None
    async with open_clients(settings.redis_url, settings) as (client, _):
        service = service_client(client, settings, sender="failover-test")
        rules = Rules.make("express", target=100)
        return [
            await service.create_match(rules, ["random", "greedy", "random", "greedy"])
            for _ in range(count)
        ]


async def read_logs(
    url: str, settings: Settings, match_ids: list[str]
) -> dict[str, list[Envelope]]:
    """Every match's log, read through a cluster client that starts at ``url``."""
    async with open_clients(url, settings) as (_, store):
        return {m: [JSON.decode_envelope(r.data) for r in await store.read(m)] for m in match_ids}


def master_with_most_partitions(cluster: LocalCluster, settings: Settings) -> int:
    """The index of the master that owns the most partitions' slots."""
    keys = Keys(settings.prefix, settings.partitions)
    slots = [key_slot(keys.log(p).encode()) for p in range(settings.partitions)]
    counts = []
    for node in cluster.masters:
        owned = node.client.cluster("SLOTS")
        ranges = [(int(r[0]), int(r[1])) for r in owned if r[2][1] == node.port]
        counts.append(sum(any(a <= s <= b for a, b in ranges) for s in slots))
    return counts.index(max(counts))


async def play_through(
    cluster: LocalCluster,
    settings: Settings,
    stack: Stack,
    gateway: str,
    fault: Any,
    matches: int = MATCHES,
) -> tuple[list[str], list[Watched], dict[str, int]]:
    """Create the matches, watch them, run ``fault`` mid-play, and wait for every end."""
    match_ids = await create_matches(settings, matches)
    watched = [Watched(m) for m in match_ids]
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=2 * MATCHES, max_keepalive_connections=2 * MATCHES)
    http = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=30.0), limits=limits)
    spectators = [asyncio.create_task(spectate(http, gateway, w, stop)) for w in watched]
    await asyncio.sleep(PLAY_BEFORE_FAULT_S)
    before = {w.match_id: max(w.seen, default=0) for w in watched}
    await asyncio.to_thread(fault)
    deadline = time.monotonic() + FINISH_S
    while not all(w.over for w in watched) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    stop.set()
    for spectator in spectators:  # one waiting on a quiet stream would wait for its keep-alive
        spectator.cancel()
    await asyncio.gather(*spectators, return_exceptions=True)
    await http.aclose()
    unfinished = [w.match_id for w in watched if not w.over]
    assert not unfinished, f"{len(unfinished)} matches did not finish: {unfinished[:3]}"
    assert not stack.check(), f"processes died: {stack.check()}"
    return match_ids, watched, before


@pytest.mark.parametrize("durability", ["replica", "primary"])
def test_a_master_killed_mid_play_loses_no_acknowledged_event_when_replicas_confirm(
    durability: str,
) -> None:
    """SIGKILL the master holding the most partitions while 100 matches play: its replica
    takes over, every process recovers on its own, every match finishes and verifies. With
    DOMINO_DURABILITY=replica nothing a spectator was shown is lost; with the default the
    test reports what was (a replica lags its master by what was not yet sent to it)."""
    with cluster_stack(durability) as (cluster, settings, stack, gateway):
        index = master_with_most_partitions(cluster, settings)
        victim = cluster.masters[index]
        survivor = cluster.masters[(index + 1) % len(cluster.masters)]

        def kill() -> None:
            os.kill(victim.process.pid, signal.SIGKILL)

        match_ids, watched, before = asyncio.run(
            play_through(cluster, settings, stack, gateway, kill)
        )
        logs = asyncio.run(read_logs(survivor.url, settings, match_ids))
    lost = check_logs(logs, watched)
    shown_before = sum(before.values())
    print(f"\n{durability}: {shown_before} events shown before the kill, {len(lost)} lost")
    if durability == "replica":
        assert not lost, f"acknowledged events lost: {lost[:5]}"


def _timed_out(envelope: Envelope) -> bool:
    return isinstance(envelope.event, TurnTimedOut)


def test_a_slot_moved_between_masters_mid_play_goes_unnoticed() -> None:
    """Move the slot of partition 0 (its command stream, log, turns and every match's keys)
    to another master while 40 matches play: the services follow ASK and
    MOVED, every match finishes and verifies with nothing shown lost, no turn times out, and
    no command is dead-lettered."""
    with cluster_stack("primary") as (cluster, settings, stack, gateway):
        keys = Keys(settings.prefix, settings.partitions)
        slot = key_slot(keys.log(0).encode())
        source = cluster.owner(slot)
        target = next(m for m in cluster.masters if m is not source)
        moved: list[int] = []

        def move() -> None:
            moved.append(cluster.move_slot(slot, target))

        match_ids, watched, _ = asyncio.run(
            play_through(cluster, settings, stack, gateway, move, matches=40)
        )
        logs = asyncio.run(read_logs(cluster.urls[0], settings, match_ids))
        assert cluster.owner(slot) is target
        with redis.RedisCluster.from_url(cluster.urls[0]) as client:
            dead = client.xlen(keys.dead_letters)
    assert moved and moved[0] > 0
    assert not check_logs(logs, watched)
    timed_out = [
        m for m, log in logs.items() if any(isinstance(e.event, TurnTimedOut) for e in log)
    ]
    assert not timed_out, f"turns timed out: {timed_out[:3]}"
    assert dead == 0


def test_replicated_appends_stop_waiting_for_a_replica_that_died() -> None:
    """DOMINO_DURABILITY=replica follows the cluster's replicas as they come and go. The
    store reads the cluster's layout again after a WAIT that fell short: a replica that joined
    after the client read the layout is waited for from then on (one read before it was
    listed waited for none, for good), and once a replica is SIGKILLed and marked failed its
    master is no longer waited for, instead of every append waiting out ``replica_wait_ms``
    (after a failover, a hundred matches on a loaded machine did not finish in 150 s)."""
    with local_cluster(3, replicas=1, node_timeout_ms=1000) as cluster:
        asyncio.run(_appends_after_a_replica_dies(cluster))


async def _appends_after_a_replica_dies(cluster: LocalCluster) -> None:
    store = RedisEventStore(
        await connect(cluster.urls[0], cluster=True), prefix="relearn", replicas=1
    )
    match_id = "m-relearn01"
    slot = key_slot(store.keys.log(store.keys.partition_of(match_id)).encode())
    master = cluster.owner(slot)
    (replica,) = [
        r for r in cluster.replicas if r.client.info("replication")["master_port"] == master.port
    ]
    version = 0

    async def append() -> float:
        nonlocal version
        started = time.monotonic()
        event = NewEvent("note", b"{}")
        request = AppendRequest(match_id, [event], version, f"c{version}")
        (result,) = await store.append_many([request])
        assert not isinstance(result, Exception)
        version += 1
        return time.monotonic() - started

    try:
        deadline = time.monotonic() + 30
        while True:  # a cluster just formed may not list its replicas yet: until it does,
            before = store.unconfirmed  # appends are confirmed by none, and the layout is
            await append()  # read again
            if store.unconfirmed == before:
                break
            assert time.monotonic() < deadline, "no append was ever confirmed by the replica"
            await asyncio.sleep(0.5)
        os.kill(replica.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while "fail" not in _flags_of(master, replica.port):
            assert time.monotonic() < deadline, "the cluster never marked the replica failed"
            await asyncio.sleep(0.2)
        unconfirmed = store.unconfirmed
        took = [await append() for _ in range(6)]
        assert took[0] >= 0.9  # waited for the dead replica, then read the layout again
        assert max(took[1:]) < 0.5, took
        assert store.unconfirmed == unconfirmed + 6  # each one is on no replica, and said so
    finally:
        await store.client.aclose()


def _flags_of(node: Any, port: int) -> str:
    """The flags ``node`` gives the cluster node on ``port`` (CLUSTER NODES)."""
    for address, about in node.client.cluster("NODES").items():
        if address.split("@")[0].endswith(f":{port}"):
            return str(about["flags"])
    return ""
