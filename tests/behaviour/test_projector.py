"""The projector, on the in-memory backend and on Redis: it follows what the referee appends."""

from __future__ import annotations

import pytest

from engine.rules import Rules
from services.projections.projector import Projector
from services.projections.ratings import RatingsProjector
from services.store import START, RedisEventStore
from services.store.projection import Checkpoints, MemoryCheckpoints, RedisCheckpoints
from tests.behaviour.table import Table
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


def checkpoints_for(backend: Backend) -> Checkpoints:
    """The projections' checkpoints beside the backend's store."""
    store, keys = backend.store, backend.store.keys
    if isinstance(store, RedisEventStore):
        return RedisCheckpoints(store.client, partitions=keys.partitions, prefix=keys.prefix)
    return MemoryCheckpoints(partitions=keys.partitions, prefix=keys.prefix)


async def test_the_projector_follows_matches_played_through_the_referee_once(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    for match_id in ("m-1", "m-2"):
        await table.create(match_id, Rules.make("straight", players=2, target=50))
        assert (await table.play(match_id)).phase == "over"
    events = len(await table.log("m-1")) + len(await table.log("m-2"))
    checkpoints = checkpoints_for(backend)
    ratings = RatingsProjector(backend.store, checkpoints)
    projector = Projector(backend.store, checkpoints, also=[ratings])
    assert await projector.catch_up() == events  # every event read once, for all of them
    assert await projector.catch_up() == 0  # and never again
    partition = table.keys.partition_of("m-1")
    for name in projector.names():
        assert await checkpoints.position(name, partition) != START
