"""The projector's FastStream app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from faststream import FastStream
from redis.asyncio import Redis

from services.config import Settings
from services.projections.accounts import AccountFeeds, FinishedFeeds
from services.projections.projector import Projector
from services.projections.ratings import RatingsProjector
from services.redis.apps import run_task, service_app
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore


def projector_app(url: str, settings: Settings) -> FastStream:
    """The projector: keeps summaries, match lists, results and ratings up to date, and tells
    accounts when their matches end."""

    async def start(redis: Redis) -> Callable[[], Awaitable[None]]:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        ratings = RatingsProjector(store, checkpoints)
        feeds = FinishedFeeds(store, AccountFeeds(redis, store.keys))
        projector = Projector(store, checkpoints, also=[ratings, feeds])  # one read of the logs
        stop = asyncio.Event()
        return run_task(lambda: projector.run(stop), stop.set)

    return service_app(url, start)
