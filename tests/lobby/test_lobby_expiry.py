"""Storage: a lobby match still waiting for players is short-lived (DOMINO_GATEWAY_LOBBY_TTL_S):
its record, its seat tokens and the holds counted in it expire together and the list forgets
it; once it starts, its record and tokens last as long as a started match's."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from engine.rules import Rules
from services.gateway.limits import Cap
from services.lobby.tables import Lobby
from services.store.keys import Keys
from tests.support.topology import client_for

# What expires is the same on a cluster (each token key is expired in its own slot); run in a
# test's own event loop, redis-py's cluster client reused a connection of another loop after a
# transaction pipeline (Lobby.create), which the gateway process, one loop for its life, never
# meets: the node only.
pytestmark = [pytest.mark.service]


def test_a_lobby_match_nobody_fills_expires_with_its_tokens_and_holds(redis_url: str) -> None:
    asyncio.run(_nobody_fills(redis_url))


async def _nobody_fills(redis_url: str) -> None:
    redis = client_for(redis_url)
    keys = Keys(f"l{uuid.uuid4().hex[:8]}", 4)
    lobby = Lobby(redis, keys, ttl_s=3600, lobby_ttl_s=2)
    cap = Cap("open_matches_per_client", 5, keys, ttl_s=2)
    try:
        rules = Rules.make("straight", players=3)
        hold = await cap.hold(redis, "client-a", "m-wait")
        await lobby.create("m-wait", rules, ("greedy", None, None), ("greedy", "a", "b"), 0)
        _, _, token = await lobby.join("m-wait", None, "ann")
        assert await lobby.resolve(token) is not None
        assert [m.match_id for m in (await lobby.open_page(100))[0]] == ["m-wait"]
        deadline = time.monotonic() + 30
        while await redis.exists(keys.lobby_match("m-wait"), keys.holds("m-wait"), hold.key):
            assert time.monotonic() < deadline, "the waiting match did not expire"
            await asyncio.sleep(0.2)
        assert await lobby.get("m-wait") is None
        assert await lobby.resolve(token) is None
        assert (await lobby.open_page(100))[0] == []
        assert await redis.zcard(keys.lobby(keys.partition_of("m-wait"))) == 0
        assert await redis.exists(keys.seat_token(_digest(token))) == 0
    finally:
        await redis.aclose()


def test_a_lobby_match_that_starts_keeps_its_record_and_tokens(redis_url: str) -> None:
    asyncio.run(_starts(redis_url))


async def _starts(redis_url: str) -> None:
    redis = client_for(redis_url)
    keys = Keys(f"l{uuid.uuid4().hex[:8]}", 4)
    lobby = Lobby(redis, keys, ttl_s=3600, lobby_ttl_s=2)
    try:
        rules = Rules.make("straight", players=2)
        await lobby.create("m-full", rules, ("greedy", None), ("greedy", "a"), 0)
        _, _, token = await lobby.join("m-full", None, "ann")  # the last open seat
        assert await redis.ttl(keys.lobby_match("m-full")) > 3000
        assert await redis.ttl(keys.seat_token(_digest(token))) > 3000
        assert await lobby.resolve(token) == ("m-full", 1)
    finally:
        await redis.aclose()


def _digest(token: str) -> str:
    from services.lobby.tables import token_hash

    return token_hash(token)
