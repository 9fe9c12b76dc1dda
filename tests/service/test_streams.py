"""Consumer groups as the services use them: created at 0, claimed, dead-lettered, real Redis."""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis

from engine.game import apply
from engine.rules import Rules
from engine.views import View, view_for
from events.codec import JSON
from events.model import CreateMatch, Move
from events.wire import TurnMessage
from services.bots.worker import BotWorker
from services.config import Settings
from services.core.dealer import deal
from services.redis.groups import GroupReader
from services.store.keys import Keys

pytestmark = pytest.mark.service


def test_a_group_created_late_still_sees_entries_written_before_it(
    redis_url: str, key_prefix: str
) -> None:
    async def scenario() -> list[bytes | None]:
        redis = Redis.from_url(redis_url)
        try:
            stream = f"{key_prefix}:s"
            await redis.xadd(stream, {"__data__": b"early"})
            reader = GroupReader(redis, [stream], "g", "c1", block_ms=10)
            await reader.start()
            return [e.data for e in await reader.read()]
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == [b"early"]


def test_an_entry_that_keeps_failing_is_dead_lettered_with_the_reason(
    redis_url: str, key_prefix: str
) -> None:
    """Claimed by another consumer each time it idles; past the limit, parked and acked."""

    async def scenario() -> None:
        redis = Redis.from_url(redis_url)
        try:
            stream, dead = f"{key_prefix}:s", f"{key_prefix}:dead"
            first = GroupReader(
                redis, [stream], "g", "c1", block_ms=10, dead_letters=dead, max_deliveries=3
            )
            other = GroupReader(
                redis, [stream], "g", "c2", block_ms=10, dead_letters=dead, max_deliveries=3
            )
            await first.start()
            await redis.xadd(stream, {"__data__": b"poison"})
            assert [e.data for e in await first.read()] == [b"poison"]  # delivery 1, never acked
            deliveries = []
            for _ in range(4):
                other._claim_cursor.clear()
                deliveries.append([e.deliveries for e in await other.claim(min_idle_ms=0)])
            assert deliveries == [[2], [3], [], []]  # the 4th delivery is parked instead
            parked = await redis.xrange(dead)
            assert len(parked) == 1
            fields = parked[0][1]
            assert fields[b"__data__"] == b"poison"
            assert b"delivered 4 times" in fields[b"reason"]
            assert (await redis.xpending(stream, "g"))["pending"] == 0
        finally:
            await redis.aclose()

    asyncio.run(scenario())


def test_a_strategy_that_raises_still_answers_its_turn_with_the_first_legal_move(
    redis_url: str, key_prefix: str
) -> None:
    """A bug in one strategy call must not stall the batch: the turn is answered and acked."""

    class Broken:
        name = "broken"

        def choose(self, view: View) -> Move:
            raise RuntimeError("bug")

    async def scenario() -> None:
        redis = Redis.from_url(redis_url)
        settings = Settings(prefix=key_prefix, partitions=2)
        state, _ = apply(
            None, CreateMatch(rules=Rules.make("express", players=2), players=("a", "b"))
        )
        state, _ = apply(state, deal(state.rules, random.Random(1)))
        view = view_for(state, state.turn)
        worker = BotWorker(settings, redis, Broken(), "broken", "w1")
        try:
            topo = Keys(key_prefix, 2)
            stream = topo.turns(topo.partition_of("m-1"), "broken")
            turn = TurnMessage(
                match_id="m-1",
                seat=state.turn,
                version=state.version,
                pool="broken",
                deadline=None,
                caused_at=0.0,
                view=view,
            )
            await worker.reader.start()
            await redis.xadd(stream, {"__data__": JSON.encode(turn)})
            await worker.handle(await worker.reader.read())
            commands = topo.commands(topo.partition_of("m-1"))
            [(_, fields)] = await redis.xrange(commands)
            sent = JSON.decode_command_envelope(fields[b"__data__"])
            assert sent.command == view.legal[0]
            assert (await redis.xpending(stream, "bots-broken"))["pending"] == 0
        finally:
            await redis.aclose()

    asyncio.run(scenario())
