"""The projector's FastStream app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from faststream import FastStream

from services.config import Settings
from services.metrics import Exporter
from services.projections.accounts import AccountFeeds, FinishedFeeds
from services.projections.projector import Projector
from services.projections.ratings import RatingsProjector
from services.redis.apps import run_task, service_app
from services.redis.connection import Client
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore


def every_projection(redis: Client, settings: Settings) -> Projector:
    """The projector of every projection — summaries, match lists, results, ratings, and the
    accounts told when their matches end — fed by one read of the logs: what the service
    follows and what ``domino projections rebuild`` refolds."""
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    ratings = RatingsProjector(store, checkpoints)
    feeds = FinishedFeeds(store, AccountFeeds(redis, store.keys))
    return Projector(store, checkpoints, also=[ratings, feeds])


def projector_app(
    url: str, settings: Settings, *, cluster: bool = False, exporter: Exporter | None = None
) -> FastStream:
    """The projector: keeps every projection up to date (on a Redis Cluster with ``cluster``);
    its health, readiness and metrics answered by ``exporter``."""
    exporter = exporter or Exporter.disabled()

    async def start(redis: Client) -> Callable[[], Awaitable[None]]:
        projector = every_projection(redis, settings)
        stop = asyncio.Event()
        exporter.attach(projector.readiness)
        return run_task(exporter.watch(lambda: projector.run(stop)), stop.set)

    return service_app(url, start, cluster=cluster)
