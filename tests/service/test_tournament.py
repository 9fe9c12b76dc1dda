"""Tournaments: seats turned between matches, standings with intervals, and short tournaments
played by ``domino tournament`` through the real service (referee, bot workers, Redis)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from redis.asyncio import Redis

from engine.strategy import STRATEGIES
from events.codec import JSON
from events.model import MatchCreated
from services.cli.supervisor import Stack
from services.cli.tournament import Played, seatings, standings, wilson
from services.config import Settings
from services.store.base import START
from services.store.redis import RedisEventStore

pytestmark = pytest.mark.service


def test_every_strategy_sits_in_every_seat_as_often_as_the_others() -> None:
    plan = seatings(["search", "greedy", "search", "greedy"], 6)
    assert plan[0] == ("search", "greedy", "search", "greedy")
    assert plan[1] == ("greedy", "search", "greedy", "search")  # the pairs swap (C3)
    for seat in range(4):
        assert Counter(p[seat] for p in plan) == {"search": 3, "greedy": 3}
    three = seatings(["a", "b", "c"], 3)
    assert three == [("a", "b", "c"), ("c", "a", "b"), ("b", "c", "a")]
    assert seatings(["search", "greedy"], 4) == [("search", "greedy"), ("greedy", "search")] * 2


def test_the_wilson_interval_of_a_win_rate() -> None:
    lo, hi = wilson(120, 200)
    assert (round(lo, 3), round(hi, 3)) == (0.531, 0.665)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def test_standings_count_a_pair_once_and_each_single_seat_apart() -> None:
    pairs = Played("m1", ("s", "g", "s", "g"), (0, 1, 0, 1), 0, (101, 60), 3, 90)
    singles = Played("m2", ("s", "g", "s", "g"), (0, 1, 2, 3), 2, (10, 20, 100, 30), 2, 50)
    rows = {r.name: r for r in standings([pairs, singles])}
    assert (rows["s"].played, rows["s"].won) == (3, 2)
    assert (rows["g"].played, rows["g"].won) == (3, 0)
    assert rows["s"].points_for == 101 + 10 + 100
    assert rows["s"].points_against == 60 + 150 + 60
    assert [r.name for r in standings([pairs, singles])] == ["s", "g"]


async def _created(url: str, settings: Settings) -> list[tuple[str, ...]]:
    """The players by seat of every match in the store."""
    redis = Redis.from_url(url)
    try:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        out = []
        for p in range(settings.partitions):
            for _, record in await store.read_log(p, START, 10_000):
                if record.type == "match_created":
                    event = JSON.decode_envelope(record.data).event
                    assert isinstance(event, MatchCreated)
                    out.append(event.players)
        return out
    finally:
        await redis.aclose()


def tournament(redis_url: str, settings: Settings, tmp_path: Path, *args: str) -> str:
    """Run ``domino tournament ARGS`` against the test's Redis; return what it printed."""
    env = Stack(redis_url, settings).env()
    env["DOMINO_DATA_DIR"] = str(tmp_path / "redis")  # its workers' logs go beside it
    env["COLUMNS"] = "120"
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "tournament", "--workers", "1", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def row(out: str, name: str) -> list[str]:
    """The cells of a strategy's line in a printed table."""
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│|]", line) if c.strip()]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no line for {name} in:\n{out}")


def test_a_short_partnership_tournament_turns_the_seats_and_prints_standings(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Eight Express matches, pairs, greedy against random: the pairs swap strategies every
    match, and the standings and ratings are printed."""
    out = tournament(
        redis_url,
        settings,
        tmp_path,
        *("--rules", "express", "--players", "4", "--partners", "--target", "50"),
        *("--matches", "8", "--seats", "greedy,random,greedy,random"),
    )
    assert "Standings" in out and "Ratings" in out
    greedy, random_ = row(out, "greedy"), row(out, "random")
    assert greedy[1] == random_[1] == "8"  # one entry per pair and match
    assert int(greedy[2]) + int(random_[2]) == 8
    assert greedy[5] == random_[6] and greedy[6] == random_[5]  # points for are against
    assert re.search(r"\d+\.\d% – \d+\.\d%", out)
    created = asyncio.run(_created(redis_url, settings))
    assert Counter(created) == {
        ("greedy", "random", "greedy", "random"): 4,
        ("random", "greedy", "random", "greedy"): 4,
    }


@pytest.mark.skipif("search" not in STRATEGIES, reason="search is not in engine.strategy yet")
def test_search_beats_greedy_in_a_short_tournament_through_the_service(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Express with partners, search against greedy at 5 ms a move, pairs swapped each match."""
    out = tournament(
        redis_url,
        settings,
        tmp_path,
        *("--rules", "express", "--players", "4", "--partners"),
        *("--matches", "12", "--seats", "search,greedy,search,greedy", "--budget-ms", "5"),
    )
    search, greedy = row(out, "search"), row(out, "greedy")
    assert int(search[2]) + int(greedy[2]) == 12
    assert int(search[2]) >= 7, out
    assert Counter(asyncio.run(_created(redis_url, settings))) == {
        ("search", "greedy", "search", "greedy"): 6,
        ("greedy", "search", "greedy", "search"): 6,
    }
