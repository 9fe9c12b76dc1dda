"""An arena of two SDK account bots, a bot speaking raw HTTP and a house pool, started by the
operator and played to its end with nobody creating a match by hand; then every entrant is in
the ratings under its own identity (account id, or house pool), whatever names say."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from domino_sdk import Bot, PlayTile, View, register
from domino_sdk.model import Move

from services.projections.ratings import RatingsProjector, ratings_table
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from tests.gateway.conftest import OPERATOR, Gateways
from tests.gateway.test_accounts import final_standings, open_arena, play_account
from tests.support.topology import client_for

pytestmark = [pytest.mark.service, pytest.mark.anyio]


class Heaviest(Bot):
    def choose(self, view: View) -> Move:
        plays = [m for m in view.legal if isinstance(m, PlayTile)]
        return max(plays, key=lambda m: sum(m.tile)) if plays else view.legal[0]


async def ratings(g: Gateways) -> dict[str, Any]:
    redis = client_for(g.redis_url)
    try:
        store = RedisEventStore(redis, partitions=g.settings.partitions, prefix=g.settings.prefix)
        checkpoints = RedisCheckpoints(
            redis, partitions=g.settings.partitions, prefix=g.settings.prefix
        )
        table = await ratings_table(redis, RatingsProjector(store, checkpoints))
        return {row.key: row for row in table if row.family == "express"}
    finally:
        await redis.aclose()


async def unfinished(g: Gateways, client: httpx.AsyncClient, arena_id: str) -> list[str]:
    """Where the arena stands, and the last event of each of its matches still in play."""
    arena = (await client.get(f"/api/v1/arenas/{arena_id}")).json()["arena"]
    told = [f"status {arena['status']}, round {arena['round']}"]
    for game in arena["playing"]:
        log = await asyncio.to_thread(g.log, game["match_id"])
        last = type(log[-1].event).__name__ if log else "nothing"
        told.append(f"{game['match_id']}: {len(log)} events, the last {last}; {game['seats']}")
    return told


async def test_sdk_bots_a_raw_http_bot_and_a_house_pool_play_an_arena_and_are_rated_by_account(
    gateways: Gateways,
) -> None:
    url = gateways.url
    stem = uuid.uuid4().hex[:6]
    entrants = {}
    for who in ("sdka", "sdkb", "raw"):
        made = await register(url, f"{who}{stem}")
        entrants[who] = (made.account.id, made.token)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {
            "name": f"mixed {stem}",
            "rules": {"family": "express", "target": 20},
            "format": "round_robin",
            "games_per_pairing": 2,
        }
        arena_id = await open_arena(client, body, [token for _, token in entrants.values()])
        games = 6  # four entrants, each meets three others twice
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    Heaviest().play_account(url, entrants["sdka"][1], games=games),
                    Heaviest().play_account(url, entrants["sdkb"][1], games=games),
                    play_account(client, entrants["raw"][1], games, timeout=180),
                ),
                240,
            )
        except TimeoutError:
            pytest.fail(f"the arena did not finish: {await unfinished(gateways, client, arena_id)}")
        await final_standings(client, arena_id, OPERATOR)
        arena = (await client.get(f"/api/v1/arenas/{arena_id}")).json()["arena"]
    assert arena["status"] == "finished"
    rows = arena["standings"]
    assert {row["key"] for row in rows} == {*(a for a, _ in entrants.values()), "house:greedy"}
    assert sum(row["games"] for row in rows) == 2 * 12  # 12 matches, two entrants each
    for row in rows:
        low, high = row["interval"]
        assert 0.0 <= low <= row["rate"] <= high <= 1.0
    deadline = time.monotonic() + 15
    while True:  # the projector rates each match once it has read its end
        table = await ratings(gateways)
        if all(a in table and table[a].rated >= games for a, _ in entrants.values()):
            break
        assert time.monotonic() < deadline, table.keys()
        await asyncio.sleep(0.3)
    for who, (account, _) in entrants.items():
        assert table[account].name == f"{who}{stem}"  # keyed by account, shown by its name
