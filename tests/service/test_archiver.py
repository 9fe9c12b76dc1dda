"""The archiver, step by step on real Redis: command ids go first, then the match (copy
written and checked, then deleted in one script), repeating a move after a crash finishes it,
a match whose archived copy disagrees stays in Redis, and two archivers share the partitions
without ever holding the same one."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from engine.rules import Rules
from events.model import CreateMatch
from services.projections.archiver import ArchiveQueue, Archiver, Retention
from services.projections.projector import Projector
from services.store.archive import DirectoryArchive, encode_log
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from services.store.source import MatchSource
from tests.service.test_projections import store_match
from tests.support.topology import client_for

pytestmark = pytest.mark.service

END = 1000.0  # the stored matches end at about this time (their envelopes' clock)


async def _scenario(url: str, prefix: str, root: Path) -> None:
    redis = client_for(url)
    try:
        store = RedisEventStore(redis, partitions=4, prefix=prefix)
        checkpoints = RedisCheckpoints(redis, partitions=4, prefix=prefix)
        archive = DirectoryArchive(root)
        rules = Rules.make("straight", players=2, target=30)
        ids = [f"m-{k}" for k in range(4)]
        for k, match_id in enumerate(ids):
            create = CreateMatch(rules=rules, players=("a", "b"), bots=("greedy", "greedy"))
            await store_match(store, match_id, create, random.Random(k), END)
        source = MatchSource(store, archive)
        queue = ArchiveQueue(checkpoints)
        projector = Projector(store, checkpoints, also=[queue], source=source, archive=archive)
        await projector.catch_up()
        retention = Retention(archive_after_s=60, dedupe_keep_s=30, log_keep_s=0)
        archiver = Archiver(
            redis, store, checkpoints, archive, projector.names(), "a1", retention=retention
        )
        logs = {m: await store.read(m) for m in ids}
        # a crash after the copy of m-0 was written: the next round finishes the move
        await archive.put("m-0", encode_log(logs["m-0"]))
        # m-1's copy disagrees (a bug, or tampering): m-1 stays in Redis
        await archive.put("m-1", encode_log(logs["m-1"][:-1]))

        await archiver.tick(now=END + 40)  # command ids go, the logs stay
        for m in ids:
            assert not await redis.exists(store.keys.dedupe(m)) and await store.version(m)
        assert await archiver.tick(now=END + 70) == 3
        assert await store.version("m-1") == len(logs["m-1"])
        for m in ("m-0", "m-2", "m-3"):
            assert await store.version(m) == 0
            assert await source.read(m) == logs[m]  # read there as it was here
        assert await archiver.tick(now=END + 80) == 0  # nothing more to do: a no-op
        for p in range(4):  # behind every projection: nothing left but the last read
            assert await redis.xlen(store.keys.log(p)) <= 1

        other = Archiver(
            redis, store, checkpoints, archive, projector.names(), "a2", retention=retention
        )
        await other.tick(now=END + 90)
        await archiver.tick(now=END + 90)  # gives back what is beyond its share
        await other.tick(now=END + 90)
        assert archiver.owned and other.owned
        assert not set(archiver.owned) & set(other.owned)
        assert set(archiver.owned) | set(other.owned) == set(range(4))
    finally:
        await redis.aclose()


def test_the_archiver_moves_matches_safely_and_shares_the_partitions(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    asyncio.run(_scenario(redis_url, key_prefix, tmp_path / "archive"))
