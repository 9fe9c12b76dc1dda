"""The clients a command of the CLI works with: Redis, the event store and the transport on
one connection pool, and a trusted sender's client over them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from services.config import Settings
from services.core.commands import ServiceClient
from services.redis.connection import Client, connect
from services.redis.lane import close_lane
from services.store import EventStore, RedisEventStore
from services.transport.redis import RedisTransport


@contextlib.asynccontextmanager
async def open_clients(url: str, settings: Settings) -> AsyncIterator[tuple[Client, EventStore]]:
    """A client for ``url`` and the event store on that same connection pool, closed on exit."""
    client = await connect(url, cluster=settings.cluster or "auto")
    try:
        yield (
            client,
            RedisEventStore(client, partitions=settings.partitions, prefix=settings.prefix),
        )
    finally:
        await close_lane(client)
        await client.aclose()


def service_client(redis: Client, settings: Settings, sender: str = "cli") -> ServiceClient:
    """A trusted sender's client over ``redis``: commands out, rejections back to ``sender``."""
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    return ServiceClient(RedisTransport(redis, store.keys), store, sender)
