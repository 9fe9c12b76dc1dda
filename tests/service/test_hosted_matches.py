"""Whole matches through the running service: real Redis, real processes (referee, bots)."""

from __future__ import annotations

import asyncio
import signal
import time

import msgspec
import pytest

from engine.game import evolve
from engine.rules import Rules
from engine.state import MatchState
from engine.verify import verify
from events.codec import JSON
from events.model import PlayTile
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from tests.service.conftest import fold, wait_until_over
from tests.support.topology import client_for

pytestmark = pytest.mark.service

FAMILIES = [
    (Rules.make("express"), ["greedy", "random", "greedy", "random"]),
    (Rules.make("express", players=2, top=9), ["greedy", "random"]),
    (Rules.make("express", players=3, next_leader="rotate"), ["random", "greedy", "random"]),
    (Rules.make("straight", players=2), ["greedy", "random"]),
    (Rules.make("straight", players=3, top=9), ["random", "random", "greedy"]),
    (Rules.make("straight", partners=True, target=150), ["greedy", "random", "random", "greedy"]),
]


def create(
    url: str, settings: Settings, specs: list[tuple[Rules, list[str | None]]], deadline_ms: int = 0
) -> list[str]:
    """Open matches through the command streams; return their ids."""

    async def go() -> list[str]:
        redis = client_for(url)
        try:
            client = service_client(redis, settings, sender="test")
            return [await client.create_match(r, s, deadline_ms=deadline_ms) for r, s in specs]
        finally:
            await redis.aclose()

    return asyncio.run(go())


def assert_clean(log: list) -> None:  # type: ignore[type-arg]
    """Versions 1..n with no gap or duplicate, and every event what the rules decide."""
    assert [e.version for e in log] == list(range(1, len(log) + 1))
    assert verify([e.event for e in log]) is None


def test_whole_matches_of_every_family_finish_through_the_service(
    stack: Stack, redis_url: str, settings: Settings
) -> None:
    """Express and Straight, 2-4 players, pairs, double-6 and double-9 (C1, C3, C9)."""
    ids = create(redis_url, settings, [(r, list(s)) for r, s in FAMILIES])
    logs = wait_until_over(redis_url, settings, ids)
    for match_id, log in logs.items():
        assert_clean(log)
        state = fold(log)
        assert state.result is not None
        assert max(state.scores) >= state.rules.target
        assert all(e.match_id == match_id for e in log)
    time.sleep(0.3)  # the bots' last answers
    assert asyncio.run(pending_entries(redis_url, settings)) == 0


async def pending_entries(url: str, settings: Settings) -> int:
    """Entries read but never acknowledged, over every command and turns stream."""
    redis = client_for(url)
    try:
        total = 0
        for p in range(settings.partitions):
            for stream, group in (
                (f"{settings.prefix}:{{p{p}}}:cmd", "referee"),
                (f"{settings.prefix}:{{p{p}}}:turns:greedy", "bots-greedy"),
                (f"{settings.prefix}:{{p{p}}}:turns:random", "bots-random"),
            ):
                if await redis.exists(stream):
                    total += (await redis.xpending(stream, group))["pending"]
        return total
    finally:
        await redis.aclose()


@pytest.mark.both_topologies
def test_a_referee_killed_mid_match_and_restarted_finishes_every_match_cleanly(
    stack: Stack, redis_url: str, settings: Settings
) -> None:
    """SIGKILL the referee while matches run; a new referee claims its pending work."""
    specs = [(Rules.make("express"), ["greedy", "random", "greedy", "random"])] * 10
    specs += [(Rules.make("straight", players=2), ["random", "greedy"])] * 10
    ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
    time.sleep(0.4)
    stack.kill("referee-0", signal.SIGKILL)
    time.sleep(0.3)
    stack.spawn("referee-1", "referee", "--name", "referee-1")
    logs = wait_until_over(redis_url, settings, ids, timeout=90)
    for log in logs.values():
        assert_clean(log)


def test_a_killed_bot_workers_turns_are_taken_over(redis_url: str, settings: Settings) -> None:
    """Two workers share the greedy pool; SIGKILL one and the other claims its turns."""
    with Stack(redis_url, settings, pools={"greedy": 2, "random": 1}) as stack:
        specs = [(Rules.make("straight", players=2), ["greedy", "random"])] * 12
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        time.sleep(0.3)
        stack.kill("bots-greedy-0", signal.SIGKILL)
        logs = wait_until_over(redis_url, settings, ids, timeout=90)
    for log in logs.values():
        assert_clean(log)


def test_turn_deadlines_play_the_default_move_and_survive_a_referee_restart(
    stack: Stack, redis_url: str, settings: Settings
) -> None:
    """Seats nobody plays time out (TurnTimedOut + default move) until the match ends."""
    rules = Rules.make("express", players=2, target=15)
    ids = create(redis_url, settings, [(rules, [None, None])], deadline_ms=30)
    time.sleep(0.5)
    stack.kill("referee-0", signal.SIGKILL)
    stack.spawn("referee-1", "referee", "--name", "referee-1")
    logs = wait_until_over(redis_url, settings, ids, timeout=60)
    log = logs[ids[0]]
    assert_clean(log)
    tags = [e.event.__struct_config__.tag for e in log]
    assert tags.count("turn_timed_out") >= tags.count("tile_played") > 0


def test_no_turn_message_shows_a_tile_its_seat_may_not_see(
    redis_url: str, settings: Settings
) -> None:
    """C8: every turn sent to a bot carries exactly its seat's hand, and no hidden tile."""
    # every turn is read back after the matches: none is trimmed once answered meanwhile
    settings = msgspec.structs.replace(settings, trim_every_s=3600.0)
    with Stack(redis_url, settings, pools={"random": 1}, projector=False):
        specs = [
            (Rules.make("straight", players=3), ["random"] * 3),
            (Rules.make("express"), ["random"] * 4),
        ]
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        logs = wait_until_over(redis_url, settings, ids)

    async def turns() -> list[bytes]:
        redis = client_for(redis_url)
        try:
            out: list[bytes] = []
            for p in range(settings.partitions):
                key = f"{settings.prefix}:{{p{p}}}:turns:random"
                out += [f[b"__data__"] for _, f in await redis.xrange(key)]
            return out
        finally:
            await redis.aclose()

    raw_turns = asyncio.run(turns())
    assert len(raw_turns) > 100
    states: dict[tuple[str, int], MatchState] = {}
    for match_id, log in logs.items():
        state: MatchState | None = None
        for env in log:
            state = evolve(state, env.event)
            states[(match_id, env.version)] = state.copy()
    for raw in raw_turns:
        turn = JSON.decode_turn(raw)
        state = states[(turn.match_id, turn.version)]
        hidden = set(state.stock)
        for seat, hand in enumerate(state.hands):
            if seat != turn.seat:
                hidden |= hand
        view = turn.view
        assert view.seat == turn.seat == state.turn
        assert set(view.hand or ()) == state.hands[turn.seat]
        shown = {m.tile for m in view.legal if isinstance(m, PlayTile)} | set(view.played)
        assert view.played == tuple(state.played)
        assert view.hand_sizes == tuple(len(h) for h in state.hands)
        assert not shown & hidden
        assert not (set(view.hand or ()) & hidden)
        # nothing in the raw bytes names a hidden tile either
        decoded = msgspec.json.decode(raw)
        assert 'stock":[[' not in raw.decode()
        assert decoded["view"]["seat"] == turn.seat


@pytest.mark.both_topologies
def test_two_referees_split_the_partitions_and_the_survivor_takes_over(
    redis_url: str, settings: Settings
) -> None:
    """One writer per partition: leases give each referee half; a dead one's half moves."""

    async def owners() -> list[bytes | None]:
        redis = client_for(redis_url)
        try:
            keys = [f"{settings.prefix}:{{p{p}}}:owner" for p in range(settings.partitions)]
            pipe = redis.pipeline(transaction=False)  # one GET each: a key per cluster slot
            for key in keys:
                pipe.get(key)
            return list(await pipe.execute())
        finally:
            await redis.aclose()

    with Stack(redis_url, settings, referees=2, pools={"random": 1, "greedy": 1}) as stack:
        deadline = time.monotonic() + 60  # two referees start, and each takes its half
        while sorted(set(asyncio.run(owners())), key=str) != [b"referee-0", b"referee-1"]:
            assert time.monotonic() < deadline, asyncio.run(owners())
            time.sleep(0.1)
        assert asyncio.run(owners()).count(b"referee-0") == settings.partitions // 2
        specs = [(Rules.make("straight", players=2), ["greedy", "random"])] * 12
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        time.sleep(0.3)
        stack.kill("referee-0", signal.SIGKILL)
        logs = wait_until_over(redis_url, settings, ids, timeout=60)
        # The matches may all have ended before the dead referee's leases ran out.
        deadline = time.monotonic() + 3 * settings.lease_ms / 1000
        while set(asyncio.run(owners())) != {b"referee-1"}:
            assert time.monotonic() < deadline, asyncio.run(owners())
            time.sleep(0.1)
    for log in logs.values():
        assert_clean(log)
