"""The two backends the service behaviour suites run on: in memory, and a real Redis node."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.redis.connection import node_client
from services.store import EventStore, MemoryEventStore, RedisEventStore
from services.transport.base import Transport
from services.transport.memory import MemoryTransport
from services.transport.redis import RedisTransport

PARTITIONS = 4


@dataclass
class Backend:
    """An event store and a message transport over the same data."""

    name: str
    store: EventStore
    transport: Transport


@contextlib.asynccontextmanager
async def memory_backend(partitions: int = PARTITIONS) -> AsyncIterator[Backend]:
    """Both seams in this process's memory."""
    store = MemoryEventStore(partitions=partitions)
    yield Backend("memory", store, MemoryTransport(store))


@contextlib.asynccontextmanager
async def redis_backend(
    url: str, prefix: str, partitions: int = PARTITIONS
) -> AsyncIterator[Backend]:
    """Both seams on the Redis node at ``url``, under a key prefix of the test's own."""
    client = node_client(url)
    try:
        store = RedisEventStore(client, partitions=partitions, prefix=prefix)
        yield Backend("redis", store, RedisTransport(client, store.keys))
    finally:
        await client.aclose()
