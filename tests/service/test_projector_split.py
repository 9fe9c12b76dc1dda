"""Projectors share the partitions by lease (docs/architecture.md, "Projections split by
partition"): however the partitions are split, and whichever projector dies mid-batch, the
projections equal one projector's rebuild from the logs, and a partition is folded by one
projector at a time."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import pytest

from engine.rules import Rules
from events.model import CreateMatch
from services.cli.supervisor import Stack, projector_name
from services.config import Settings
from services.projections.accounts import AccountFeeds
from services.projections.app import ROLE, every_projection, projector_leases
from services.redis.connection import Client
from services.store.base import START
from services.store.keys import Keys
from services.store.projection import RedisCheckpoints, WriteOp
from services.store.redis import RedisEventStore
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import create
from tests.service.test_projections import store_match
from tests.support.checks import projection_snapshot, projections_behind
from tests.support.topology import client_for, sync_client_for

pytestmark = pytest.mark.service

Holders = dict[int, str | None]
"""Each partition's projector, as its lease names it (None: nobody holds it)."""


class Sampler:
    """Reads every partition's projector lease, again and again, in a thread of its own: what
    the leases said over a run, each reading with the moment it was taken."""

    def __init__(self, url: str, settings: Settings) -> None:
        keys = Keys(settings.prefix, settings.partitions)
        self.keys = [keys.lease(p, ROLE) for p in range(settings.partitions)]
        self.url = url
        self.samples: list[tuple[float, Holders]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with sync_client_for(self.url) as redis:
            while not self._stop.is_set():
                raw = [redis.get(key) for key in self.keys]
                held = {p: None if v is None else bytes(v).decode() for p, v in enumerate(raw)}
                self.samples.append((time.monotonic(), held))
                self._stop.wait(0.02)

    def latest(self) -> Holders:
        """The last reading."""
        return self.samples[-1][1] if self.samples else {}

    def wait(self, what: str, ok: Callable[[Holders], bool], timeout: float = 30.0) -> float:
        """Wait for a reading for which ``ok`` holds; return when it was taken."""
        deadline = time.monotonic() + timeout
        seen = len(self.samples)
        while time.monotonic() < deadline:
            for at, held in self.samples[seen:]:
                if ok(held):
                    return at
            seen = len(self.samples)
            time.sleep(0.05)
        pytest.fail(f"the leases never showed {what} in {timeout} s: last {self.latest()}")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def shared_by(names: Sequence[str]) -> Callable[[Holders], bool]:
    """Every partition held, by exactly ``names``, each with an even share."""

    def ok(held: Holders) -> bool:
        counts = Counter(held.values())
        return set(counts) == set(names) and max(counts.values()) - min(counts.values()) <= 1

    return ok


async def rebuilt(url: str, settings: Settings) -> None:
    """One projector's rebuild of every projection from the logs (the projectors stopped)."""
    redis = client_for(url)
    try:
        await every_projection(redis, settings).rebuild()
    finally:
        await redis.aclose()


def wait_caught_up(url: str, settings: Settings, timeout: float = 30.0) -> None:
    """Until every projection of every partition is at its log's last entry."""
    deadline = time.monotonic() + timeout
    while behind := asyncio.run(projections_behind(url, settings.prefix, settings.partitions)):
        if time.monotonic() > deadline:
            pytest.fail(f"the projections did not catch up in {timeout} s: {behind[:3]}")
        time.sleep(0.1)


SPECS: list[tuple[Rules, list[str | None]]] = [
    (Rules.make("express"), ["random"] * 4),
    (Rules.make("straight", players=2), ["random"] * 2),
] * 4


@pytest.mark.both_topologies
def test_projectors_share_the_partitions_and_one_killed_mid_play_loses_and_doubles_nothing(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Three projectors share the partitions while matches play; one SIGKILLed while they go
    on keeps its partitions until its leases run out, then the others fold them on from its
    checkpoints; a fourth started after takes its share without a restart of the others. The
    projections then equal one projector's rebuild from the logs, and no partition was ever
    folded by two projectors at once."""
    # leases long beside a round, even on a loaded machine: none runs out on a live projector
    settings = msgspec.structs.replace(settings, partitions=6, lease_ms=3000)
    logs = tmp_path / "logs"
    first, second, third, fourth = (projector_name(k) for k in range(4))
    survivors = {second: [first, third], third: [first, second]}
    keys = Keys(settings.prefix, settings.partitions)
    stack = Stack(redis_url, settings, pools={"random": 1}, projectors=3, log_dir=logs)
    with stack, Sampler(redis_url, settings) as leases:
        ids = create(redis_url, settings, SPECS[:4])
        leases.wait("three projectors sharing", shared_by([first, second, third]))
        playing = create(redis_url, settings, SPECS)  # the kill comes while these play
        ids += playing
        where = Counter(leases.latest()[keys.partition_of(m)] for m in playing)
        victim = max([second, third], key=lambda name: where[name])  # the most of them
        kept = [p for p, name in leases.latest().items() if name == victim]
        stack.kill(victim)
        killed_at = time.monotonic()
        with sync_client_for(redis_url) as redis:
            left_ms = [int(redis.pttl(leases.keys[p])) for p in kept]
            folded = {p: redis.get(keys.projection("summary", p)) for p in kept}
        stack.spawn(fourth, "projector", "--name", fourth)  # it starts as the leases run out
        taken_at = leases.wait(
            "the killed one's partitions taken",
            lambda held: None not in held.values() and victim not in held.values(),
        )
        leases.wait("the fourth taking its share", shared_by([*survivors[victim], fourth]))
        wait_until_over(redis_url, settings, ids, timeout=90)
        wait_caught_up(redis_url, settings)
        live = asyncio.run(projection_snapshot(redis_url, settings.prefix))
        with sync_client_for(redis_url) as redis:
            after = {p: redis.get(keys.projection("summary", p)) for p in kept}
    assert after != folded, f"no event came to partitions {kept} after the kill: {folded}"
    asyncio.run(rebuilt(redis_url, settings))
    assert asyncio.run(projection_snapshot(redis_url, settings.prefix)) == live
    assert live

    # nobody took a lease of the killed one before it ran out (the reading lags by ~20 ms)
    assert kept and min(left_ms) > 0
    first_taken = min(
        at
        for at, held in leases.samples
        if at > killed_at and any(held[p] not in (victim, None) for p in kept)
    )
    assert first_taken - killed_at >= min(left_ms) / 1000 - 0.1
    held_by = {name for _, held in leases.samples for name in held.values()}
    assert held_by <= {first, second, third, fourth, None}
    assert all(victim not in held.values() for at, held in leases.samples if at > taken_at)
    # two projectors folding one partition at once: one's commit is refused, and it says so
    for log in logs.glob("projector*.log"):
        assert "moved by another writer" not in log.read_text(errors="replace"), log.name


class Stalling(RedisCheckpoints):
    """Checkpoints whose commits of the projection ``stall_on`` never reach Redis: a projector
    stopped there is one killed between its commits of a batch."""

    def __init__(self, redis: Client, settings: Settings, stall_on: str) -> None:
        super().__init__(redis, partitions=settings.partitions, prefix=settings.prefix)
        self.stall_on = stall_on
        self.stalled = asyncio.Event()

    async def commit(
        self,
        name: str,
        partition: int,
        expected: str,
        position: str,
        ops: Sequence[WriteOp] = (),
    ) -> None:
        """Commit as Redis would, except the stalled projection's: that one waits forever."""
        if name == self.stall_on:
            self.stalled.set()
            await asyncio.Event().wait()
        await super().commit(name, partition, expected, position, ops)


ANN, BEA = "u-aaaaaaaaaaaa", "u-bbbbbbbbbbbb"


@pytest.mark.both_topologies
def test_a_projector_killed_between_the_commits_of_a_batch_is_folded_on_from_its_checkpoints(
    redis_url: str, settings: Settings
) -> None:
    """A projector stops for good after committing a batch's summaries, results and ratings
    but not its accounts' feeds, which it has already told (as a SIGKILL there would leave
    it). Another takes none of its partitions while its leases run, all of them after; the
    projections then equal one projector's rebuild, and each account is told of each of its
    matches' ends once."""

    async def scenario() -> None:
        redis = client_for(redis_url)
        try:
            store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
            feeds = AccountFeeds(redis, store.keys)
            rules = Rules.make("straight", players=2, target=60)
            rng = random.Random(5)
            for account, name in ((ANN, "ann"), (BEA, "bea")):
                await redis.hset(store.keys.account(account), mapping={"name": name})
            ids = [f"m-{k}" for k in range(8)]
            for k, match_id in enumerate(ids):
                await feeds.started(ANN, match_id, {})
                await feeds.started(BEA, match_id, {})
                create = CreateMatch(
                    rules=rules, players=("ann", "bea"), bots=(None, None), accounts=(ANN, BEA)
                )
                await store_match(store, match_id, create, rng, 1000.0 + 10 * k)

            killed = every_projection(redis, settings)
            stalling = Stalling(redis, settings, stall_on="accounts")
            killed.checkpoints = stalling
            round_ = asyncio.create_task(
                killed.catch_up_held(projector_leases(redis, settings, "killed"))
            )
            await asyncio.wait_for(stalling.stalled.wait(), 20)
            round_.cancel()  # no lease given back, nothing more written: as a SIGKILL
            with contextlib.suppress(asyncio.CancelledError):
                await round_
            p = min(store.keys.partition_of(m) for m in ids)  # the first it folded
            positions = {n: await stalling.position(n, p) for n in killed.names()}
            assert positions["ratings"] == await store.last_position(p)
            assert positions["accounts"] == positions["archive"] == START  # mid-batch

            heir = every_projection(redis, settings)
            leases = projector_leases(redis, settings, "heir")
            running = [
                await redis.pttl(store.keys.lease(q, ROLE)) for q in range(settings.partitions)
            ]
            assert min(running) > 0, (
                f"the killed one's leases ran out before the heir came: {running}"
            )
            assert await heir.catch_up_held(leases) == 0 and not leases.owned
            deadline = time.monotonic() + 20
            while len(leases.owned) < settings.partitions:
                assert time.monotonic() < deadline, f"the heir holds only {leases.owned}"
                await heir.catch_up_held(leases)
                await asyncio.sleep(0.05)
            await heir.catch_up_held(leases)
            await leases.release_all()

            for account in (ANN, BEA):
                feed = [msgspec.json.decode(raw) for _, raw in await feeds.read(account, 0)]
                told = [e["match_id"] for e in feed if e["type"] == "match_finished"]
                assert sorted(told) == ids, account  # each match's end told once
                assert await feeds.live(account) == []
        finally:
            await redis.aclose()

    asyncio.run(scenario())
    wait_caught_up(redis_url, settings)
    live = asyncio.run(projection_snapshot(redis_url, settings.prefix))
    asyncio.run(rebuilt(redis_url, settings))
    assert asyncio.run(projection_snapshot(redis_url, settings.prefix)) == live
