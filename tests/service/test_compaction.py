"""Compacted ratings: the results of archived matches folded into a table as of a checkpoint and
dropped from Redis, the players' older results read from the archive — and the ratings equal
to rating every result from the start, however the compaction went."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import httpx
import msgspec
import pytest

from engine.rules import Rules
from services.cli.supervisor import Stack
from services.config import Settings
from services.projections.compaction import CompactionConflict, Compactor, Pending
from services.projections.history import played
from services.projections.ratings import (
    Compacted,
    MatchResult,
    RatingsProjector,
    order_of,
    rate,
    ratings_table,
    read_compacted,
    read_results,
    standings,
)
from services.redis.connection import Client
from services.store import open_archive
from services.store.archive import Archive, ArchiveError, DirectoryArchive, check_page, page_name
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from tests.gateway.conftest import free_port, wait_healthy
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import create
from tests.support.cli import run_domino
from tests.support.topology import client_for

pytestmark = pytest.mark.service

POOLS = ("random", "greedy", "search")
ACCOUNTS = ("a-ann", "a-bob", "a-cy")


def some_results(n: int, seed: int) -> list[MatchResult]:
    """``n`` finished matches between house pools and accounts, some with a guest, some
    called off, some with a pool against itself; ends may tie (the id breaks the tie)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        players = rng.choice((2, 4))
        family = rng.choice(("express", "straight"))
        bots: list[str | None] = []
        accounts: list[str | None] = []
        for _ in range(players):
            kind = rng.random()
            bots.append(rng.choice(POOLS) if kind < 0.5 else None)
            accounts.append(rng.choice(ACCOUNTS) if 0.5 <= kind < 0.95 else None)
        sides = tuple(range(players)) if players == 2 else (0, 1, 0, 1)
        scores = tuple(rng.randrange(0, 60) for _ in range(max(sides) + 1))
        out.append(
            MatchResult(
                match_id=f"m-{i:04d}",
                ended=1_700_000_000 + rng.randrange(0, n // 2 + 1) + rng.choice((0.0, 0.25)),
                family=family,
                players=tuple(f"p{k}" for k in range(players)),
                sides=sides,
                winner=None if rng.random() < 0.05 else rng.randrange(0, max(sides) + 1),
                scores=scores,
                bots=tuple(bots),
                accounts=tuple(accounts),
            )
        )
    return out


def test_the_compacted_table_with_the_results_after_it_equals_rating_every_result() -> None:
    results = some_results(300, seed=7)
    whole = standings(results)
    ordered = sorted(results, key=order_of)
    rng = random.Random(3)
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(ordered)), 4))
        table = Compacted()
        start = 0
        for cut in cuts:  # compacted in steps, each on top of the one before
            folded = standings(ordered[start:cut], None, table)
            table = Compacted(
                version=table.version + 1,
                through=order_of(ordered[cut - 1]),
                table=tuple(folded.table),
            )
            table = msgspec.json.decode(msgspec.json.encode(table), type=Compacted)  # as stored
            start = cut
        now = standings(results, None, table)  # every result given: those folded passed over
        assert now.table == whole.table
        for key, points in now.history.items():  # the history after the checkpoint, the same
            assert points == whole.history[key][-len(points) :]


def _projector(redis: Client, settings: Settings) -> RatingsProjector:
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    return RatingsProjector(store, checkpoints)


async def _seed(redis: Client, projector: RatingsProjector, results: list[MatchResult]) -> None:
    """The results in the ratings projection, as the projector writes them, of matches that
    are no longer in Redis (archived)."""
    store = projector.store
    for result in results:
        p = store.keys.partition_of(result.match_id)
        await redis.hset(projector.results_key(p), result.match_id, msgspec.json.encode(result))
        for key in dict.fromkeys(result.keys()):
            await redis.zadd(projector.played_key(p, key), {result.match_id: result.ended})


class FailingOnce(DirectoryArchive):
    """A directory archive that refuses the first page written: a compactor stopped between
    writing the table and writing the players' pages."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failed = False

    async def put_page(self, identity: str, page: str, data: bytes) -> None:
        if not self.failed:
            self.failed = True
            raise ArchiveError("the archive is away")
        await super().put_page(identity, page, data)


@pytest.mark.both_topologies
def test_a_compaction_stopped_midway_is_finished_by_the_next_round_losing_and_doubling_nothing(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    results = some_results(120, seed=11)
    whole = rate(results)

    async def go() -> None:
        redis = client_for(redis_url)
        projector = _projector(redis, settings)
        await _seed(redis, projector, results)
        archive = FailingOnce(tmp_path / "archive")
        compactor = Compactor(redis, projector, archive, margin_s=0.0, every_s=0.0)
        with pytest.raises(ArchiveError):
            await compactor.round()
        table = await read_compacted(redis, projector)
        assert table.through == order_of(max(results, key=order_of))  # the table is written,
        assert table.indexed is None  # the pages are not, and every result is still in Redis
        assert len(await read_results(redis, projector)) == len(results)
        assert await ratings_table(redis, projector) == whole  # already the same table
        another = Compactor(redis, projector, archive, margin_s=0.0, every_s=0.0)
        assert await another.round() == 0  # nothing new to fold: it finishes the pages, drops
        table = await read_compacted(redis, projector)
        assert table.indexed == table.through
        assert await read_results(redis, projector) == []
        assert await ratings_table(redis, projector) == whole
        for identity in {
            k for r in results for k in MatchResult.keys(r)
        }:  # each player's matches once
            mine = sorted(
                (r for r in results if identity in MatchResult.keys(r)), key=order_of, reverse=True
            )
            found, cursor = await played(redis, projector, archive, identity, 7)
            while cursor is not None:
                more, cursor = await played(redis, projector, archive, identity, 7, cursor)
                found += more
            assert found == mine, identity
        stale = Compactor(redis, projector, archive, margin_s=0.0, every_s=0.0)
        await _seed(redis, projector, results)  # as a rebuild puts them back
        assert await stale.round() == 0 and await read_results(redis, projector) == []
        assert await ratings_table(redis, projector) == whole
        await redis.aclose()

    asyncio.run(go())


@pytest.mark.both_topologies
def test_results_a_lagging_partition_can_still_add_before_are_not_compacted(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    async def go() -> None:
        redis = client_for(redis_url)
        projector = _projector(redis, settings)
        await _seed(redis, projector, some_results(20, seed=5))
        # partition 1's log has an entry its ratings have not read: it has passed nothing yet
        await redis.xadd(projector.store.keys.log(1), {"x": "1"})
        compactor = Compactor(redis, projector, DirectoryArchive(tmp_path), margin_s=0.0)
        assert await compactor.horizon() < 1.0
        assert await compactor.round() == 0
        assert (await read_compacted(redis, projector)).through is None
        await redis.aclose()

    asyncio.run(go())


def compacting(settings: Settings) -> Settings:
    """Matches archived a second after they end and compacted at once."""
    return msgspec.structs.replace(
        settings,
        archive_after_s=1.0,
        dedupe_keep_s=0.5,
        log_keep_s=0.5,
        trim_every_s=0.3,
        compact_every_s=0.3,
        compact_margin_s=0.5,
    )


async def _left(url: str, settings: Settings, ids: list[str]) -> dict[str, int]:
    """What the matches still have in Redis: keys named after them, their results, the
    players' indexes' entries, and the bytes of the ratings' per-match keys."""
    redis = client_for(url)
    try:
        projector = _projector(redis, settings)
        named = 0
        async for key in redis.scan_iter(match=f"{settings.prefix}:*", count=1000):
            named += any(m.encode() in key for m in ids)
        results = indexed = memory = 0
        for p in range(settings.partitions):
            results += int(await redis.hlen(projector.results_key(p)))
            memory += int(await redis.memory_usage(projector.results_key(p)) or 0)
            pattern = projector.checkpoints.key(projector.name, p, "played") + ":*"
            async for key in redis.scan_iter(match=pattern, count=1000):
                indexed += int(await redis.zcard(key))
                memory += int(await redis.memory_usage(key) or 0)
        compacted = await read_compacted(redis, projector)
        done = compacted.indexed is not None and all(compacted.indexed >= (0.0, m) for m in ids)
        return {
            "named": named,
            "results": results,
            "indexed": indexed,
            "bytes": memory,
            "compacted": int(done),
        }
    finally:
        await redis.aclose()


def test_finished_matches_leave_nothing_in_redis_once_archived_and_compacted(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    settings = compacting(settings)
    specs = [(Rules.make("express", players=2, target=20), ["greedy", "random"])] * 4
    specs += [(Rules.make("straight", players=2, target=20), ["random", "greedy"])] * 4
    port = free_port()
    base = f"http://127.0.0.1:{port}/api/v1"
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}) as stack:
        stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port))
        wait_healthy(base.removesuffix("/api/v1"), stack.processes["gateway"], timeout=120)
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        wait_until_over(redis_url, settings, ids)
        deadline = time.monotonic() + 90
        while (left := asyncio.run(_left(redis_url, settings, ids)))["compacted"] != 1 or left[
            "named"
        ] + left["results"] + left["indexed"]:
            assert time.monotonic() < deadline, f"not archived and compacted: {left}"
            time.sleep(0.3)
        # ~0 per finished match: no key is named after one, no result nor index entry is left
        assert left == {"named": 0, "results": 0, "indexed": 0, "bytes": 0, "compacted": 1}
        with httpx.Client(base_url=base, timeout=30) as http:
            shown = {
                f: http.get("/ratings", params={"family": f}).json()
                for f in ("express", "straight")
            }
            pages = []
            cursor = None
            while True:
                params = {"limit": "3"} | ({} if cursor is None else {"cursor": cursor})
                answer = http.get("/players/house:random", params=params)
                assert answer.status_code == 200, answer.text
                pages += [m["match_id"] for m in answer.json()["recent"]]
                cursor = answer.json()["next"]
                if cursor is None:
                    break
            history = answer.json()["history"]
        env = stack.env()

    # domino ratings finds the player's matches too, all of them in the archive now
    shown_there = run_domino(
        "ratings", "--player", "house:random", "--limit", "50", env=env | {"COLUMNS": "200"}
    )
    assert shown_there.returncode == 0, shown_there.stderr
    assert all(m in shown_there.stdout for m in pages), shown_there.stdout
    rebuilt = run_domino("projections", "rebuild", env=env, timeout=120)
    assert rebuilt.returncode == 0, rebuilt.stderr

    async def after_rebuild() -> None:
        redis = client_for(redis_url)
        projector = _projector(redis, settings)
        everything = await read_results(redis, projector)  # the rebuild folded them all back
        assert sorted(r.match_id for r in everything) == sorted(ids)
        scratch = standings(everything)
        table = await ratings_table(redis, projector)  # the compacted table, results passed over
        assert table == scratch.table
        for family, answer in shown.items():  # what the gateway showed, from the compacted
            rows = [r for r in scratch.table if r.family == family]
            assert answer["ratings"] == msgspec.to_builtins(rows)
        mine = sorted(scratch.played["house:random"], key=order_of, reverse=True)
        assert pages == [r.match_id for r in mine]  # every match, once, newest first
        assert history == msgspec.to_builtins(scratch.history["house:random"])
        archive: Archive = open_archive(settings.archive_at())
        compactor = Compactor(redis, projector, archive, margin_s=0.0)
        await compactor.round()  # the results the rebuild put back leave again
        assert await read_results(redis, projector) == []
        assert await ratings_table(redis, projector) == scratch.table
        await redis.aclose()

    asyncio.run(after_rebuild())
    assert os.path.isdir(Path(settings.archive_at()) / "players")


def test_a_players_pages_are_named_in_the_order_of_their_checkpoints_whatever_the_match_id(
    tmp_path: Path,
) -> None:
    ids = ["m-1", "a~b", "é" * 128, "x" * 128, "sp ace"[:2] + "%/?"]
    checkpoints = sorted((1_700_000_000 + i * 0.000001, m) for i, m in enumerate(ids))
    names = [page_name(*c) for c in checkpoints]
    assert names == sorted(names) and all(check_page(n) == n for n in names)
    assert all(len(n) < 200 for n in names)  # a file name, whatever the id

    async def go() -> None:
        archive = DirectoryArchive(tmp_path)
        for n in reversed(names):
            await archive.put_page("guest:Zoë", n, n.encode())
        assert await archive.pages("guest:Zoë") == names
        assert await archive.page("guest:Zoë", names[0]) == names[0].encode()
        assert await archive.pages("guest:nobody") == []
        with pytest.raises(ArchiveError):
            await archive.page("guest:Zoë", "../../etc")

    asyncio.run(go())


def test_a_compactor_that_read_an_older_table_writes_nothing(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    results = some_results(40, seed=13)

    async def go() -> None:
        redis = client_for(redis_url)
        projector = _projector(redis, settings)
        await _seed(redis, projector, results)
        archive = DirectoryArchive(tmp_path)
        stale = Compactor(redis, projector, archive, margin_s=0.0)
        fresh = Compactor(redis, projector, archive, margin_s=0.0)
        read = await read_compacted(redis, projector)  # what the stale one read
        assert await fresh.round() == len(results)
        table = await read_compacted(redis, projector)
        with pytest.raises(CompactionConflict):  # its lease ran out unseen: the table stays
            await stale._write(read, Compacted(version=read.version + 1), Pending())
        with pytest.raises(CompactionConflict):  # nor does it write a page of another's range
            await stale._index(msgspec.structs.replace(read, through=(0.0, "m-0")), results)
        assert await read_compacted(redis, projector) == table
        assert await ratings_table(redis, projector) == rate(results)
        await redis.aclose()

    asyncio.run(go())
