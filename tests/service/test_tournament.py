"""Tournaments: seats turned between matches, standings with intervals, and short tournaments
played by ``domino tournament`` through the real service (referee, bot workers, Redis): a line-up,
a round robin and a Swiss event."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest

from events.codec import JSON
from events.model import MatchCreated
from services.cli.supervisor import Stack
from services.cli.tournament import Played, seatings, standings
from services.config import Settings
from services.store.base import START
from services.store.redis import RedisEventStore
from tests.support.topology import client_for

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


def test_standings_count_a_pair_once_and_each_single_seat_apart() -> None:
    pairs = Played("m1", ("s", "g", "s", "g"), (0, 1, 0, 1), 0, (101, 60), 3, 90)
    singles = Played("m2", ("s", "g", "s", "g"), (0, 1, 2, 3), 2, (10, 20, 100, 30), 2, 50)
    called_off = Played("m3", ("s", "g"), (0, 1), None, (0, 0), 1, 3)
    rows = {r.entrant: r for r in standings([pairs, singles, called_off])}
    assert (rows["s"].games, rows["s"].wins) == (3, 2)
    assert (rows["g"].games, rows["g"].wins) == (3, 0)
    assert rows["s"].score_for == 101 + 10 + 100
    assert rows["s"].score_against == 60 + 150 + 60
    assert [r.entrant for r in standings([pairs, singles])] == ["s", "g"]


async def _created(url: str, settings: Settings) -> list[tuple[str, ...]]:
    """The players by seat of every match in the store."""
    redis = client_for(url)
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
    done = _run(env, "--workers", "1", *args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def refused(redis_url: str, settings: Settings, *args: str) -> str:
    """Run ``domino tournament ARGS``, which must fail; return what it printed."""
    done = _run(Stack(redis_url, settings).env(), *args, timeout=60)
    assert done.returncode != 0
    return done.stderr + done.stdout


def _run(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", "tournament", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


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


def test_search_beats_greedy_in_a_short_tournament_through_the_service(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Express with partners, search against greedy, pairs swapped each match. Search tries 50
    deals a move (2-3 ms on an idle core; it won 34 of 40 such matches in process) within a
    budget it does not reach: a time budget alone buys a loaded machine's search a handful of
    deals, and a coin toss against greedy."""
    out = tournament(
        redis_url,
        settings,
        tmp_path,
        *("--rules", "express", "--players", "4", "--partners"),
        *("--matches", "12", "--seats", "search,greedy,search,greedy"),
        *("--budget-ms", "1000", "--samples", "50"),
    )
    assert "or 50 deals, whichever comes first" in " ".join(out.split()), out
    search, greedy = row(out, "search"), row(out, "greedy")
    assert int(search[2]) + int(greedy[2]) == 12
    assert int(search[2]) >= 7, out
    assert Counter(asyncio.run(_created(redis_url, settings))) == {
        ("search", "greedy", "search", "greedy"): 6,
        ("greedy", "search", "greedy", "search"): 6,
    }


def test_a_round_robin_tournament_plays_every_pair_of_strategies_with_the_sides_turned(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Three strategies, two seats: each pair plays twice, once from each seat, and the
    standings rank them by points."""
    out = tournament(
        redis_url,
        settings,
        tmp_path,
        *("--rules", "express", "--players", "2", "--target", "30", "--format", "round_robin"),
        *("--seats", "greedy,random,search", "--budget-ms", "2"),
    )
    said = " ".join(out.split())
    assert "round robin" in said and "2 matches a pairing, sides turned (6 matches)" in said
    rows = [row(out, name) for name in ("greedy", "random", "search")]
    assert all(r[1] == "4" for r in rows)  # two matches against each of two others
    assert sum(int(r[2]) for r in rows) == 6
    assert [float(r[7]) for r in rows] == [int(r[2]) for r in rows]  # a point a win
    assert Counter(asyncio.run(_created(redis_url, settings))) == {
        pair: 1
        for a, b in combinations(("greedy", "random", "search"), 2)
        for pair in ((a, b), (b, a))
    }


def test_a_swiss_tournament_plays_its_rounds_and_gives_the_odd_strategy_a_bye(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    """Three strategies, two seats, three rounds: one pairing a round, and each strategy rests
    once (the bye goes to one that has not had one)."""
    out = tournament(
        redis_url,
        settings,
        tmp_path,
        *("--rules", "straight", "--players", "2", "--target", "30", "--format", "swiss"),
        *("--rounds", "3", "--matches", "1", "--seats", "greedy,random,search"),
        *("--budget-ms", "2"),
    )
    assert (
        "swiss of straight (2 players, to 30) between greedy, random, search: 3 rounds, 1 match "
        "a pairing (3 matches)" in " ".join(out.split())
    )
    rows = [row(out, name) for name in ("greedy", "random", "search")]
    assert sum(int(r[1]) for r in rows) == 6  # three matches of two
    assert sum(int(r[8]) for r in rows) == 3  # one bye a round, never twice to one strategy
    assert all(r[8] == "1" for r in rows)
    assert len(asyncio.run(_created(redis_url, settings))) == 3


def test_a_format_without_enough_strategies_to_fill_a_table_is_refused(
    redis_url: str, settings: Settings
) -> None:
    """Checked before anything starts: three seats of their own need three strategies."""
    out = refused(
        redis_url,
        settings,
        *("--format", "round_robin", "--players", "3", "--seats", "greedy,random,greedy"),
    )
    assert "2 entrants cannot fill a table of 3 sides" in out


@pytest.mark.parametrize(
    "flags, said",
    [
        (("--samples", "0"), "--samples must be at least 1"),
        (("--budget-ms", "-5"), "--budget-ms must be positive"),
    ],
)
def test_a_search_that_could_not_think_is_refused_before_anything_starts(
    redis_url: str, settings: Settings, flags: tuple[str, str], said: str
) -> None:
    assert said in refused(redis_url, settings, "--seats", "search", *flags)
