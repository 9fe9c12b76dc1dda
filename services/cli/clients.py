"""The clients a command of the CLI works with: Redis and the event store on one pool."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from services.config import Settings
from services.redis.connection import Client, connect
from services.store import EventStore, RedisEventStore


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
        await client.aclose()
