"""Nothing in the referee or the bot workers grows with the matches they have served: finished
matches leave the live cache, and the command and turns streams are trimmed below what their
groups have read and acknowledged (on the in-memory backend and on Redis)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.rules import Rules
from events.model import Resign
from services.core.repository import MatchRepository
from services.referee.service import Referee
from services.store.archive import DirectoryArchive, encode_log
from tests.behaviour.table import Table
from tests.support.backends import Backend, memory_backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


async def test_finished_matches_leave_the_referees_live_cache_for_a_small_one_of_their_own(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    table.referee.matches = MatchRepository(table.store, cache_size=100, finished_size=2)
    for k in range(4):
        await table.create(f"m-{k}", Rules.make("express", players=2, target=20))
        assert (await table.play(f"m-{k}")).phase == "over"
    cache = table.referee.matches.cache
    assert len(cache.live) == 0
    assert cache.finished.ids() == ["m-2", "m-3"]  # the latest ended, at most finished_size


async def test_the_referee_and_the_bots_trim_what_they_have_consumed(backend: Backend) -> None:
    """Storage: after a match is played, the command streams keep only the last command
    the referee read in each partition, and the turns streams only the last turn read."""
    table = await Table(backend).start()
    for k in range(3):
        await table.create(f"m-{k}", Rules.make("express", players=2, target=20))
        await table.play(f"m-{k}")
    keys = table.keys
    commands = [keys.commands(p) for p in range(keys.partitions)]
    turns = keys.all_turns(table.pool)
    before = [len(await table.store.read_stream(s)) for s in commands + turns]
    assert await table.referee.trim() > 0
    assert await table.bots.trim() > 0
    after = [len(await table.store.read_stream(s)) for s in commands + turns]
    assert all(n <= 1 for n in after), after
    assert sum(before) > 100
    await table.create("m-next", Rules.make("express", players=2, target=20))
    assert (await table.play("m-next")).phase == "over"  # nothing needed was trimmed


async def test_a_match_moved_to_the_archive_is_refused_commands_and_never_created_again(
    tmp_path: Path,
) -> None:
    """Its log is out of Redis, but the referee reads it from the archive: a command to it is
    refused as to any finished match, and its id is not free for a new match."""
    async with memory_backend() as played:
        table = await Table(played).start()
        await table.create("m-old", Rules.make("express", players=2, target=20))
        assert (await table.play("m-old")).phase == "over"
        records = await played.store.read("m-old")
    archive = DirectoryArchive(tmp_path)
    await archive.put("m-old", encode_log(records))
    async with memory_backend() as fresh:  # Redis without the match: archived
        table = Table(fresh)
        table.referee = Referee(
            table.settings,
            fresh.store,
            fresh.transport,
            "r-archive",
            rng=random.Random(1),
            clock=table.clock,
            archive=archive,
        )
        await table.start()
        rules = Rules.make("express", players=2, target=20)
        await table.sender.create_match(rules, ("greedy", "greedy"), match_id="m-old")
        await table.send("m-old", Resign(seat=0), "late")
        await table.referee.step()
        assert await fresh.store.version("m-old") == 0
        reasons = {r.command_id: r.rejection.reason for r in await table.rejections()}
        assert reasons["late"] == "match_over"
        assert len(reasons) == 2, reasons
