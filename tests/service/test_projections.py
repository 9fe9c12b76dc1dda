"""Projections follow the logs live, and rebuilding them from scratch gives the same data;
results are kept by account, house bot pool or guest, never by a name alone."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time

import msgspec
import pytest

from engine.game import legal_moves
from engine.rules import Rules
from events.envelope import CommandEnvelope
from events.model import Abort, AnyCommand, CancelMatch, CreateMatch
from services.cli.supervisor import Stack
from services.config import Settings
from services.core.decision import Decision, append_request, decide_command
from services.projections.projector import Projector, Summary
from services.projections.queries import Queries, ResultLine
from services.store.keys import partition_of
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from tests.service.conftest import fold, wait_until_over
from tests.service.test_hosted_matches import create
from tests.support.checks import projection_snapshot
from tests.support.topology import client_for

pytestmark = pytest.mark.service


@pytest.mark.both_topologies
def test_projections_rebuilt_from_the_log_equal_the_live_ones(
    redis_url: str, settings: Settings
) -> None:
    """Summaries, match lists and results by bot: live, then rebuilt with one command."""
    specs = [(Rules.make("express"), ["greedy", "random", "greedy", "random"])] * 3
    specs += [(Rules.make("straight", players=2), ["random", "greedy"])] * 3
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}):
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        logs = wait_until_over(redis_url, settings, ids)

        async def finished() -> list[str]:
            redis = client_for(redis_url)
            try:
                return [s.match_id for s in await Queries(redis, settings).matches(True)]
            finally:
                await redis.aclose()

        deadline = time.monotonic() + 20
        while sorted(asyncio.run(finished())) != sorted(ids):
            assert time.monotonic() < deadline, "the projector did not catch up"
            time.sleep(0.1)
    live = asyncio.run(projection_snapshot(redis_url, settings.prefix))

    async def results() -> list[ResultLine]:
        redis = client_for(redis_url)
        try:
            return await Queries(redis, settings).results()
        finally:
            await redis.aclose()

    table = {line.key: line for line in asyncio.run(results())}
    wins = {"house:greedy": 0, "house:random": 0}
    for log in logs.values():
        state = fold(log)
        assert state.result is not None
        for seat, pool in enumerate(state.bots):
            wins[f"house:{pool}"] += state.rules.side_of(seat) == state.result.winner
    assert {key: table[key].won for key in wins} == wins
    assert {line.name for line in table.values()} == {"greedy", "random"}
    assert sum(line.played for line in table.values()) == 3 * 4 + 3 * 2

    env = Stack(redis_url, settings).env()
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "projections", "rebuild"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "rebuilt" in done.stdout
    assert asyncio.run(projection_snapshot(redis_url, settings.prefix)) == live


@pytest.mark.both_topologies
def test_a_match_list_reads_only_the_latest_of_each_partition(
    redis_url: str, settings: Settings
) -> None:
    """GET /matches?status=finished used to read every finished match ever (an amplification
    a hostile client could use); a list now reads at most ``limit`` a partition."""

    async def scenario() -> list[str]:
        redis = client_for(redis_url)
        try:
            queries = Queries(redis, settings)
            key = queries.checkpoints.key
            for n in range(30):
                match_id = f"m-{n:02d}"
                p = partition_of(match_id, settings.partitions)
                summary = Summary(
                    match_id=match_id, status="finished", family="express", players=("a", "b"),
                    round=1, version=10, scores=(0, 0), turn=None, ends=(), updated=float(n),
                )  # fmt: skip
                await redis.hset(
                    key("summary", p, "matches"), match_id, msgspec.json.encode(summary)
                )
                await redis.zadd(key("summary", p, "finished"), {match_id: float(n)})
            return [s.match_id for s in await queries.matches(finished=True, limit=5)]
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == [f"m-{n:02d}" for n in range(25, 30)]


ANN, BEA = "u-aaaaaaaaaaaa", "u-bbbbbbbbbbbb"


async def store_match(
    store: RedisEventStore,
    match_id: str,
    create: CreateMatch,
    rng: random.Random,
    now: float,
    stop: tuple[int, AnyCommand] | None = None,
) -> None:
    """Decide and append a whole match as the referee would: random legal moves to the end,
    or ``stop`` (command n, the command) to end it early."""
    state = None
    command: AnyCommand = create
    for n in range(10_000):
        envelope = CommandEnvelope(match_id=match_id, command_id=f"c{n}", command=command)
        decision = decide_command(state, envelope, now=now + n / 1000, rng=rng, from_stream=False)
        assert isinstance(decision, Decision), decision
        partition = store.keys.partition_of(match_id)
        [appended] = await store.append_many([append_request(decision, store.keys, partition)])
        assert not isinstance(appended, Exception)
        state = decision.state
        if state.phase == "over":
            return
        command = stop[1] if stop and stop[0] == n + 1 else rng.choice(legal_moves(state))
    raise AssertionError(f"{match_id} did not end")


async def _results_of_stored_matches(
    url: str, settings: Settings
) -> tuple[dict[str, ResultLine], list[Summary]]:
    redis = client_for(url)
    try:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        rng = random.Random(11)
        rules = Rules.make("straight", players=2, target=60)

        def create(
            players: tuple[str, str],
            bots: tuple[str | None, str | None],
            accounts: tuple[str | None, str | None] = (None, None),
        ) -> CreateMatch:
            return CreateMatch(rules=rules, players=players, bots=bots, accounts=accounts)

        matches: list[tuple[CreateMatch, tuple[int, AnyCommand] | None]] = [
            (create(("ann", "greedy"), (None, "greedy"), (ANN, None)), None),
            (create(("annie", "ann"), (None, None), (ANN, None)), None),  # a guest called ann
            (create(("annie", "greedy"), (None, "greedy"), (BEA, None)), (1, Abort(seat=0))),
            (create(("random", "greedy"), ("random", "greedy")), (3, CancelMatch())),
        ]
        for k, (command, stop) in enumerate(matches):
            await store_match(store, f"m-{k}", command, rng, 1000.0 + 100 * k, stop)
        checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        await Projector(store, checkpoints).catch_up()
        queries = Queries(redis, settings)
        lines = {line.key: line for line in await queries.results()}
        return lines, await queries.matches(finished=True)
    finally:
        await redis.aclose()


def test_results_are_kept_by_account_house_pool_or_guest_and_called_off_matches_apart(
    redis_url: str, settings: Settings
) -> None:
    """README (results and ratings): an account is one line under the name it last played as,
    whatever names others use; a guest is a line of its own under its name, marked guest; a
    house pool is a line under its name; aborted and cancelled matches are counted as such,
    not as played, and their summaries say so."""
    lines, summaries = asyncio.run(_results_of_stored_matches(redis_url, settings))
    assert set(lines) == {ANN, BEA, "house:greedy", "house:random", "guest:ann"}
    ann, bea, guest = lines[ANN], lines[BEA], lines["guest:ann"]
    assert (ann.name, ann.kind, ann.played) == ("annie", "account", 2)
    assert (bea.name, bea.kind, bea.played, bea.aborted) == ("annie", "account", 0, 1)
    assert (guest.name, guest.kind, guest.played) == ("ann", "guest", 1)
    greedy, random_ = lines["house:greedy"], lines["house:random"]
    assert (greedy.name, greedy.kind) == ("greedy", "house")
    assert (greedy.played, greedy.aborted, greedy.cancelled) == (1, 1, 1)
    assert (random_.played, random_.cancelled) == (0, 1)
    assert ann.won + greedy.won + guest.won == 2  # one winner in each match played out
    ended = {s.match_id: (s.reason, s.winner) for s in summaries}
    assert ended["m-2"] == ("aborted", None) and ended["m-3"] == ("cancelled", None)
    assert ended["m-0"][0] == ended["m-1"][0] == "target"
