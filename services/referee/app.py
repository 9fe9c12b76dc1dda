"""The referee's FastStream app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import FastStream

from services.config import Settings
from services.redis.apps import consumer_name, run_task, service_app
from services.redis.connection import Client
from services.referee.service import Referee
from services.store.redis import RedisEventStore
from services.transport.redis import RedisTransport


def referee_app(
    url: str, settings: Settings, name: str | None = None, *, cluster: bool = False
) -> FastStream:
    """The referee service (on a Redis Cluster with ``cluster``)."""

    async def start(redis: Client) -> Callable[[], Awaitable[None]]:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        transport = RedisTransport(redis, store.keys)
        referee = Referee(settings, store, transport, name or consumer_name("referee"))
        return run_task(referee.run, referee.stop)

    return service_app(url, start, cluster=cluster)
