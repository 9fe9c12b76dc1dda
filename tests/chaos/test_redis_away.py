"""A referee that cannot reach Redis for a moment gives no command up for it."""

from __future__ import annotations

import pytest
import redis.exceptions

from engine.rules import Rules
from events.model import CreateMatch
from services.config import Settings
from services.core.commands import ServiceClient
from services.redis.connection import node_client
from services.referee.service import Referee
from services.store import RedisEventStore
from services.transport.redis import RedisTransport
from tests.gateway.conftest import free_port
from tests.support.checks import dead_letters, pending

pytestmark = [pytest.mark.chaos, pytest.mark.anyio]


async def test_a_command_met_by_a_lost_connection_to_redis_stays_pending_and_is_not_parked(
    redis_url: str, key_prefix: str
) -> None:
    """Found by the chaos run: a referee whose read of a match failed because Redis was
    restarting (ConnectionError) dead-lettered the command as if the match were corrupt, and
    the move was lost. Now the batch stays pending, to be claimed and decided again; only a
    command that breaks the referee with Redis there is parked."""
    settings = Settings(prefix=key_prefix, partitions=4, claim_idle_ms=50, log_level="warning")
    live = node_client(redis_url)
    away = node_client(f"redis://127.0.0.1:{free_port()}")  # nothing listens there
    try:
        transport = RedisTransport(
            live, RedisEventStore(live, partitions=4, prefix=key_prefix).keys
        )
        store = RedisEventStore(away, partitions=4, prefix=key_prefix)
        referee = Referee(settings, store, transport, "r1")
        await referee.prepare()
        sender = ServiceClient(transport, RedisEventStore(live, partitions=4, prefix=key_prefix))
        rules = Rules.make("express", players=2)
        await sender.send("m-away", CreateMatch(rules=rules, players=("a", "b")), "create")
        with pytest.raises(redis.exceptions.ConnectionError):
            await referee.step()
        assert await dead_letters(redis_url, key_prefix) == []
        assert sum((await pending(redis_url, key_prefix)).values()) == 1
    finally:
        await live.aclose()
        await away.aclose()
