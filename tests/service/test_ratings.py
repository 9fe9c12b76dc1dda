"""Ratings by identity — an account, or a pool of house bots — never by the name a seat was
given (README: "Rules: choices where RULES.md is silent", results and ratings): teams for
partners, rated in the order matches ended, and the same table whether the projection
followed the log live or was rebuilt from it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import msgspec
import pytest

from engine.rules import Rules
from events.codec import JSON
from events.model import MatchCreated, MatchEnded
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.projections.ratings import (
    MatchResult,
    Rating,
    RatingsProjector,
    rate,
    ratings_table,
    read_results,
    result_of,
)
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from tests.support.topology import client_for

pytestmark = pytest.mark.service


def result(
    match_id: str,
    ended: float,
    players: tuple[str, ...],
    winner: int | None,
    scores: tuple[int, ...],
    partners: bool = False,
    *,
    bots: tuple[str | None, ...] | None = None,
    accounts: tuple[str | None, ...] = (),
) -> MatchResult:
    """A finished Express match; by default each seat is played by the house pool it is
    named after."""
    rules = Rules.make("express", players=len(players), partners=partners)
    return MatchResult(
        match_id=match_id,
        ended=ended,
        family="express",
        players=players,
        sides=tuple(rules.side_of(k) for k in range(len(players))),
        winner=winner,
        scores=scores,
        bots=players if bots is None else bots,
        accounts=accounts,
    )


def by_id(r: MatchResult) -> str:
    return r.match_id


def test_partners_are_rated_as_one_team() -> None:
    """Both players of the winning pair gain the same; both of the losing pair lose it (C3)."""
    table = {r.name: r for r in rate([result("m1", 1.0, ("a", "b", "c", "d"), 0, (100, 40), True)])}
    assert table["a"].mu == table["c"].mu > 25 > table["b"].mu == table["d"].mu
    assert all(r.rated == 1 for r in table.values())
    assert table["a"].won == table["c"].won == 1 and table["b"].won == 0


def test_a_bot_partnered_with_itself_is_one_name_on_one_team() -> None:
    table = {
        r.name: r for r in rate([result("m1", 1.0, ("search", "greedy") * 2, 0, (100, 40), True)])
    }
    assert table["search"].rated == 1 and table["search"].won == 1
    assert table["search"].mu > table["greedy"].mu


def test_a_pool_on_two_sides_leaves_the_match_unrated() -> None:
    assert rate([result("m1", 1.0, ("greedy", "greedy"), 0, (100, 40))]) == []


def test_ratings_are_kept_by_house_pool_not_by_the_name_the_seat_was_given() -> None:
    """The seat named "greedy" is played by the random pool and loses; the seat named "random"
    is played by the greedy pool and wins: greedy's rating goes up."""
    swapped = result("m1", 1.0, ("greedy", "random"), 1, (40, 100), bots=("random", "greedy"))
    table = {r.key: r for r in rate([swapped])}
    assert set(table) == {"house:greedy", "house:random"}
    assert table["house:greedy"].name == "greedy" and table["house:greedy"].won == 1
    assert table["house:greedy"].mu > 25 > table["house:random"].mu


def test_two_accounts_with_the_same_name_have_separate_ratings() -> None:
    """Both seats are called "ann"; they are two accounts, one winning, one losing."""
    ann, other_ann = "u-aaaaaaaaaaaa", "u-bbbbbbbbbbbb"
    games = [
        result(f"m{k}", float(k), ("ann", "ann"), 0, (100, 20), accounts=(ann, other_ann))
        for k in range(3)
    ]
    table = {r.key: r for r in rate(games)}
    assert set(table) == {ann, other_ann}
    assert table[ann].name == table[other_ann].name == "ann"
    assert (table[ann].won, table[other_ann].won) == (3, 0)
    assert table[ann].mu > 25 > table[other_ann].mu


def test_an_account_is_shown_under_the_name_it_last_played_as() -> None:
    ann = "u-aaaaaaaaaaaa"
    first, later = (
        result(f"m{k}", float(k), (name, "greedy"), 0, (100, 20), accounts=(ann, None))
        for k, name in ((1, "ann"), (2, "annie"))
    )
    table = {r.key: r for r in rate([later, first])}  # rated in the order they ended
    assert table[ann].name == "annie" and table[ann].rated == 2


def test_a_match_with_a_guest_at_the_table_is_unrated() -> None:
    """A seat held by no account and no house bot is a guest's: its name proves nothing, so
    the match says nothing about anyone."""
    with_guest = result("m1", 1.0, ("ann", "greedy"), 0, (100, 20), bots=(None, "greedy"))
    assert rate([with_guest]) == []


def test_a_match_called_off_is_unrated() -> None:
    """README (abort, cancel): no winner, no rating."""
    assert rate([result("m1", 1.0, ("greedy", "random"), None, (30, 20))]) == []


def test_a_name_has_one_rating_per_game() -> None:
    """Winning at Express says nothing of Straight: each family has its own table."""
    express = result("m1", 1.0, ("a", "b"), 0, (100, 20))
    straight = msgspec.structs.replace(
        result("m2", 2.0, ("a", "b"), 1, (30, 250)), family="straight"
    )
    table = {(r.family, r.name): r for r in rate([express, straight])}
    assert table["express", "a"].mu > table["express", "b"].mu
    assert table["straight", "b"].mu > table["straight", "a"].mu
    assert table["express", "a"].mu == table["straight", "b"].mu


def test_sides_are_ranked_by_the_winner_then_the_scores() -> None:
    three = result("m1", 1.0, ("a", "b", "c"), 2, (30, 50, 100))
    table = {r.name: r for r in rate([three])}
    assert table["c"].mu > table["b"].mu > table["a"].mu


def test_ratings_follow_the_order_matches_ended_in() -> None:
    """The same results in any order of arrival give the same table; ended in another order,
    another table."""
    results = [
        result(f"m{k}", float(k), ("a", "b"), int(k < 6), (100 * (k >= 6), 100 * (k < 6)))
        for k in range(12)
    ]
    assert rate(results) == rate(list(reversed(results)))
    later = [result(r.match_id, r.ended + 100, r.players, r.winner, r.scores) for r in results[:6]]
    assert rate(results) != rate([*results[6:], *later])


async def _play_and_follow(
    url: str, settings: Settings
) -> tuple[list[MatchResult], list[Rating], list[str]]:
    """Play matches through the service while a ratings projection follows the log live."""
    redis = client_for(url)
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    projector = RatingsProjector(store, checkpoints)
    stop = asyncio.Event()
    follower = asyncio.create_task(projector.run(stop, interval=0.05))
    client = service_client(redis, settings, sender="ratings-test")
    specs: list[tuple[Rules, tuple[str, ...]]] = [
        (Rules.make("express", target=60), ("greedy", "random", "greedy", "random")),
        (Rules.make("straight", players=2, target=100), ("random", "greedy")),
        (Rules.make("express", players=3, target=60), ("greedy", "random", "random")),
    ] * 3
    ids = [await client.create_match(rules, seats, names=seats) for rules, seats in specs]
    try:
        deadline = time.monotonic() + 60
        while True:
            last = [await store.read(m, await store.version(m)) for m in ids]
            if all(r and r[-1].type == "match_ended" for r in last):
                break
            assert time.monotonic() < deadline, "the matches did not finish"
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + 10
        while len(await read_results(redis, projector)) < len(ids):
            assert time.monotonic() < deadline, "the live ratings did not catch up"
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await follower
    live = await read_results(redis, projector)
    live_table = await ratings_table(redis, projector)
    # the results straight from each match's first and last events
    expected = []
    for match_id in ids:
        records = await store.read(match_id)
        first = JSON.decode_envelope(records[0].data).event
        last = JSON.decode_envelope(records[-1].data)
        assert isinstance(first, MatchCreated) and isinstance(last.event, MatchEnded)
        expected.append(result_of(match_id, first, last.event, last.ts))
    assert sorted(live, key=by_id) == sorted(expected, key=by_id)
    await redis.aclose()
    return live, list(live_table), ids


async def _rebuilt(url: str, settings: Settings) -> tuple[list[MatchResult], list[Rating]]:
    redis = client_for(url)
    try:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        projector = RatingsProjector(store, checkpoints)
        await projector.rebuild()
        return await read_results(redis, projector), list(await ratings_table(redis, projector))
    finally:
        await redis.aclose()


def test_ratings_rebuilt_from_the_log_equal_the_live_projection(
    redis_url: str, settings: Settings
) -> None:
    """Matches of three kinds through the service, rated live; then rebuilt from the log, and
    by ``domino ratings --rebuild``: the same results, the same table."""
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}, projector=False):
        live, live_table, ids = asyncio.run(_play_and_follow(redis_url, settings))
    assert {r.name for r in live_table} == {"greedy", "random"}
    rebuilt, rebuilt_table = asyncio.run(_rebuilt(redis_url, settings))
    assert sorted(rebuilt, key=by_id) == sorted(live, key=by_id)
    assert rebuilt_table == live_table
    env = Stack(redis_url, settings).env()
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "ratings", "--rebuild"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "greedy" in done.stdout and "random" in done.stdout
    for row in live_table:
        assert f"{row.mu:.2f}" in done.stdout
    assert asyncio.run(_rebuilt(redis_url, settings)) == (rebuilt, rebuilt_table)
    assert len(ids) == 9


async def _swapped(
    url: str, settings: Settings
) -> tuple[int, dict[str, Rating], dict[str, Rating]]:
    """Eight Straight matches between the random and greedy pools, each seat given the other
    pool's name; how many the greedy pool won, the ratings rebuilt from the log, and the
    ratings each pool's own results give, rated in the order the matches ended."""
    redis = client_for(url)
    try:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        client = service_client(redis, settings, sender="swapped")
        rules = Rules.make("straight", players=2, target=100)
        ids = [
            await client.create_match(rules, ("random", "greedy"), names=("greedy", "random"))
            for _ in range(8)
        ]
        deadline = time.monotonic() + 60
        greedy_won = 0
        own: list[MatchResult] = []  # each seat by the pool that played it, not its name
        for match_id in ids:
            while True:
                records = await store.read(match_id)
                env = JSON.decode_envelope(records[-1].data) if records else None
                if env is not None and isinstance(env.event, MatchEnded):
                    greedy_won += env.event.winner == 1  # seat 1 is the greedy pool's
                    own.append(
                        MatchResult(
                            match_id=match_id,
                            ended=env.ts,
                            family="straight",
                            players=("greedy", "random"),
                            sides=(0, 1),
                            winner=env.event.winner,
                            scores=env.event.scores,
                            bots=("random", "greedy"),
                        )
                    )
                    break
                assert time.monotonic() < deadline, "the matches did not finish"
                await asyncio.sleep(0.1)
        projector = RatingsProjector(
            store, RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
        )
        await projector.rebuild()
        table = {r.key: r for r in await ratings_table(redis, projector)}
        return greedy_won, table, {r.key: r for r in rate(own)}
    finally:
        await redis.aclose()


def test_a_pool_seated_under_another_pools_name_is_rated_as_itself(
    redis_url: str, settings: Settings
) -> None:
    """Regression: ratings were kept by the name a seat was given, so matches whose seats were
    named after the other pool moved greedy's rating by random's results. Each pool's rating
    now follows its own results, whatever its seats were called."""
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}, projector=False):
        greedy_won, table, own = asyncio.run(_swapped(redis_url, settings))
    assert set(table) == {"house:greedy", "house:random"}
    greedy, random_ = table["house:greedy"], table["house:random"]
    assert (greedy.name, random_.name) == ("greedy", "random")
    assert (greedy.won, random_.won) == (greedy_won, 8 - greedy_won)
    assert greedy.rated == random_.rated == 8
    # each pool's rating is what its own results give in the order the matches ended (not
    # "above 25 for more wins": five wins then three losses end below it)
    for key in ("house:greedy", "house:random"):
        assert (table[key].mu, table[key].sigma) == pytest.approx((own[key].mu, own[key].sigma))
