"""Arenas on a real Redis: create, join, start, what is due, results, standings and the feed."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from itertools import combinations

import pytest
from redis.asyncio import Redis

from engine.rules import Rules
from events.model import MatchEnded
from services.lobby.arena import Pairing
from services.lobby.arenas import ArenaRefused, Arenas, match_id_for
from services.store.keys import Keys
from tests.support.topology import client_for

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio, pytest.mark.both_topologies]

TWO = Rules.make("express", players=2)
PAIRS = Rules.make("express", players=4, partners=True)
T0 = 1_000_000.0


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = client_for(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def arenas(redis: Redis, key_prefix: str) -> Arenas:
    return Arenas(redis, Keys(key_prefix, 4), kept=50, claim_s=30.0)


def won(side: int, sides: int = 2) -> MatchEnded:
    scores = [10] * sides
    scores[side] = 100
    return MatchEnded(winner=side, scores=tuple(scores), reason="target")


async def lines(arenas: Arenas, arena_id: str, after: int = 0) -> list[dict[str, object]]:
    return [json.loads(raw) for _, raw in await arenas.read(arena_id, after, count=1000)]


async def play_out(arenas: Arenas, arena_id: str, now: float) -> list[Pairing]:
    """Start and finish everything due at ``now``, the first side winning; return it."""
    due = await arenas.due(arena_id, now)
    for p in due:
        assert await arenas.started(arena_id, p, match_id_for(arena_id, p), now=now)
    for p in due:
        sides = len(set(p.seats))
        assert await arenas.finished(arena_id, match_id_for(arena_id, p), won(0, sides), now=now)
    return due


async def test_an_operator_creates_an_arena_that_entrants_join_and_leave(arenas: Arenas) -> None:
    arena = await arenas.create("Friday 2p", TWO, "swiss", rounds=3, deadline_ms=5000)
    assert arena.id.startswith("a-") and arena.status == "open"
    assert arena.spec.table.players == 2 and arena.spec.seed is not None
    await arenas.join(arena.id, "u-000000000001", "alpha")
    await arenas.join(arena.id, "house:greedy", "greedy")
    again = await arenas.join(arena.id, "u-000000000001", "alpha")  # harmless
    assert again.present() == ("u-000000000001", "house:greedy")
    left = await arenas.leave(arena.id, "house:greedy")
    assert left.present() == ("u-000000000001",)
    back = await arenas.join(arena.id, "house:greedy", "greedy")
    assert back.present() == ("u-000000000001", "house:greedy")  # back in its first place
    got = await arenas.get(arena.id)
    assert got is not None and got.name == "Friday 2p" and got.deadline_ms == 5000
    assert got.rules == TWO and got.spec == arena.spec
    public = got.public()
    assert public["format"] == "swiss" and public["status"] == "open" and public["entered"] == 2
    assert [e["name"] for e in public["entrants"]] == ["alpha", "greedy"]
    assert [a.id for a in await arenas.latest()] == [arena.id]
    kinds = [line["type"] for line in await lines(arenas, arena.id)]
    assert kinds == ["created", "joined", "joined", "left", "joined"]


async def test_bad_arenas_and_entrants_are_refused_with_a_reason(arenas: Arenas) -> None:
    for kwargs, code in (
        ({"name": "", "format": "swiss", "rounds": 3}, "bad_arena"),
        ({"name": "x", "format": "swiss", "rounds": 0}, "bad_arena"),
        ({"name": "x", "format": "arena"}, "bad_arena"),
        ({"name": "x", "format": "knockout"}, "bad_arena"),
    ):
        with pytest.raises(ArenaRefused) as refused:
            await arenas.create(rules=TWO, **kwargs)
        assert refused.value.code == code and refused.value.status == 422
    arena = await arenas.create("rr", TWO, "round_robin")
    for key in ("", "has space", "{p1}", "x" * 101):
        with pytest.raises(ArenaRefused, match="cannot be an entrant"):
            await arenas.join(arena.id, key, "name")
    with pytest.raises(ArenaRefused) as refused:
        await arenas.leave(arena.id, "u-000000000009")
    assert refused.value.code == "not_entered"
    with pytest.raises(ArenaRefused) as refused:
        await arenas.join("a-nosuch", "u-000000000001", "alpha")
    assert refused.value.code == "no_arena" and refused.value.status == 404
    assert await arenas.get("not an id") is None
    with pytest.raises(ArenaRefused) as refused:
        await arenas.start(arena.id)
    assert refused.value.code == "too_few_entrants"
    assert await arenas.due(arena.id, T0) == []  # not started: nothing is due


async def test_a_round_robin_arena_plays_every_pair_and_ends_with_final_standings(
    arenas: Arenas,
) -> None:
    arena = await arenas.create("rr", TWO, "round_robin", games_per_pairing=2)
    field = [f"u-00000000000{i}" for i in range(5)]
    for i, key in enumerate(field):
        await arenas.join(arena.id, key, f"bot{i}", now=T0 + i)
    started = await arenas.start(arena.id, now=T0 + 10)
    assert started.status == "running" and started.roster == tuple(field)
    with pytest.raises(ArenaRefused) as refused:
        await arenas.join(arena.id, "u-00000000000f", "late")
    assert refused.value.code == "arena_started"
    with pytest.raises(ArenaRefused) as refused:
        await arenas.start(arena.id)
    assert refused.value.code == "not_open"
    played: list[Pairing] = []
    now = T0 + 20
    while (this := await play_out(arenas, arena.id, now)) or not played:
        seated = [e for p in this for e in p.seats]
        assert len(seated) == len(set(seated))  # one table at a time each
        played += this
        now += 1
    met = Counter(frozenset(p.seats) for p in played)
    assert met == {frozenset(pair): 2 for pair in combinations(field, 2)}
    done = await arenas.get(arena.id)
    assert done is not None and done.status == "finished" and done.ended is not None
    feed = await lines(arenas, arena.id)
    assert feed[-1]["type"] == "finished"
    final = feed[-2]
    assert final["type"] == "standings" and final["final"] is True
    table = final["standings"]
    assert isinstance(table, list) and len(table) == 5
    assert all(row["games"] == 8 for row in table)
    assert [row["rank"] for row in table] == [1, 2, 3, 4, 5]
    assert all(0.0 <= row["interval"][0] <= row["rate"] <= row["interval"][1] for row in table)
    assert table == await arenas.standings(arena.id)
    assert await arenas.due(arena.id, now) == []


async def test_what_is_due_is_handed_out_once_until_its_claim_lapses(arenas: Arenas) -> None:
    arena = await arenas.create("rr", TWO, "round_robin")
    for key in ("u-000000000001", "u-000000000002"):
        await arenas.join(arena.id, key, key)
    await arenas.start(arena.id, now=T0)
    first = await arenas.due(arena.id, T0)
    assert len(first) == 1
    assert await arenas.due(arena.id, T0 + 1) == []  # claimed by the first caller
    again = await arenas.due(arena.id, T0 + 31)  # that caller never said it started
    assert again == first
    assert await arenas.started(arena.id, first[0], "m-one")
    assert await arenas.started(arena.id, first[0], "m-one")  # the same report again
    assert not await arenas.started(arena.id, first[0], "m-two")  # a second match: cancel it
    assert await arenas.due(arena.id, T0 + 100) == []  # started: never handed out again
    assert await arenas.finished(arena.id, "m-one", won(1))
    assert not await arenas.finished(arena.id, "m-one", won(1))  # recorded once
    assert not await arenas.finished(arena.id, "m-other", won(1))  # not this arena's
    done = await arenas.get(arena.id)
    assert done is not None and done.status == "finished"
    winner = first[0].seats[1]
    assert (await arenas.standings(arena.id))[0]["key"] == winner
    with pytest.raises(ArenaRefused) as refused:
        await arenas.started(arena.id, Pairing(round=9, board=0, seats=("a", "b")), "m-x")
    assert refused.value.code == "no_pairing"


async def test_two_callers_asking_at_once_never_get_the_same_pairing(arenas: Arenas) -> None:
    arena = await arenas.create("arena", TWO, "arena", duration_s=600)
    for i in range(16):
        await arenas.join(arena.id, f"u-0000000000{i:02d}", f"bot{i}")
    await arenas.start(arena.id, now=T0)
    handed = await asyncio.gather(*(arenas.due(arena.id, T0 + 1) for _ in range(8)))
    pairings = [p for batch in handed for p in batch]
    assert len(pairings) == 8 and len({p.id for p in pairings}) == 8
    seated = [e for p in pairings for e in p.seats]
    assert len(seated) == len(set(seated)) == 16


async def test_a_swiss_arena_gives_byes_and_admits_late_entrants_from_the_next_round(
    arenas: Arenas,
) -> None:
    arena = await arenas.create("swiss", TWO, "swiss", rounds=3, seed=1)
    for i in range(3):
        await arenas.join(arena.id, f"u-00000000000{i}", f"bot{i}")
    await arenas.start(arena.id, now=T0)
    first = await play_out(arenas, arena.id, T0 + 1)
    assert len(first) == 1
    rounds = [line for line in await lines(arenas, arena.id) if line["type"] == "round"]
    assert len(rounds[0]["byes"]) == 1  # type: ignore[arg-type]
    await arenas.join(arena.id, "u-00000000000a", "late")
    second = await play_out(arenas, arena.id, T0 + 2)
    assert len(second) == 2 and "u-00000000000a" in {e for p in second for e in p.seats}
    await play_out(arenas, arena.id, T0 + 3)
    done = await arenas.get(arena.id)
    assert done is not None and done.status == "finished" and len(done.rounds) == 3
    table = {row["key"]: row for row in await arenas.standings(arena.id)}
    assert table["u-00000000000a"]["games"] == 2
    assert sum(row["byes"] for row in table.values()) == 1


async def test_a_timed_arena_pairs_the_idle_until_its_end_then_ends_when_play_stops(
    arenas: Arenas,
) -> None:
    arena = await arenas.create("arena", PAIRS, "arena", duration_s=60)
    for i in range(5):
        await arenas.join(arena.id, f"u-00000000000{i}", f"team{i}")
    await arenas.start(arena.id, now=T0)
    first = await arenas.due(arena.id, T0)
    assert len(first) == 2  # five teams: one waits
    for p in first:
        assert p.seats[0] == p.seats[2] and p.seats[1] == p.seats[3]  # a team holds its side (C3)
        await arenas.started(arena.id, p, match_id_for(arena.id, p), now=T0)
    busy = {e for p in first for e in p.seats}
    await arenas.finished(arena.id, match_id_for(arena.id, first[0]), won(0), now=T0 + 5)
    second = await arenas.due(arena.id, T0 + 5)
    assert len(second) == 1  # the idle waiter and ...
    assert set(second[0].seats) != set(first[0].seats)  # ... not an immediate rematch
    assert not (set(second[0].seats) & (busy - set(first[0].seats)))  # only the idle
    await arenas.started(arena.id, second[0], "m-late", now=T0 + 5)
    assert await arenas.due(arena.id, T0 + 61) == []  # time is up: nothing new
    running = await arenas.get(arena.id)
    assert running is not None and running.status == "running"  # two matches still in play
    await arenas.finished(arena.id, match_id_for(arena.id, first[1]), won(1), now=T0 + 62)
    await arenas.finished(
        arena.id, "m-late", MatchEnded(winner=None, scores=(0, 0), reason="cancelled"), now=T0 + 63
    )
    done = await arenas.get(arena.id)
    assert done is not None and done.status == "finished" and done.ended == T0 + 63
    assert done.summary()["ends_at"] == T0 + 60
    table = {row["key"]: row for row in await arenas.standings(arena.id)}
    assert sum(row["games"] for row in table.values()) == 4  # the cancelled match counts not


async def test_the_feed_is_bounded_and_resumes_after_an_id(arenas: Arenas) -> None:
    arena = await arenas.create("feed", TWO, "swiss", rounds=1)
    for i in range(300):
        await arenas.join(arena.id, f"u-000000000{i:03d}", f"bot{i}")
    assert await arenas.last(arena.id) == 301
    kept = await arenas.read(arena.id, 0, count=1000)
    # trimmed (by whole blocks of entries, MAXLEN ~) to about the latest 50
    assert 50 <= len(kept) < 301 and kept[0][0] > 1 and kept[-1][0] == 301
    after = await arenas.read(arena.id, 299)
    assert [n for n, _ in after] == [300, 301]
    line = json.loads(after[-1][1])
    assert line == {
        "id": 301,
        "type": "joined",
        "ts": line["ts"],
        "entrant": {"key": "u-000000000299", "name": "bot299"},
    }


async def test_names_keep_their_letters(arenas: Arenas) -> None:
    arena = await arenas.create("Τουρνουά ντόμινο", TWO, "round_robin")
    await arenas.join(arena.id, "u-000000000001", "Ayşe")
    got = await arenas.get(arena.id)
    assert got is not None and got.name == "Τουρνουά ντόμινο"
    assert got.public()["entrants"][0]["name"] == "Ayşe"


async def test_only_running_arenas_are_in_the_runners_index(arenas: Arenas) -> None:
    """The arenas' runner looks at running arenas only, however many have been held."""
    waiting = await arenas.create("waiting", TWO, "round_robin", now=T0)
    playing = await arenas.create("playing", TWO, "round_robin", now=T0)
    for entrant in ("u-000000000001", "u-000000000002"):
        await arenas.join(playing.id, entrant, entrant[-1], now=T0)
    await arenas.start(playing.id, now=T0)
    assert [a.id for a in await arenas.running()] == [playing.id]
    while await play_out(arenas, playing.id, T0 + 1):
        pass
    assert (await arenas.get(playing.id)).status == "finished"  # type: ignore[union-attr]
    assert await arenas.running() == []
    assert waiting.id not in {a.id for a in await arenas.running()}
