"""The event store: per-match streams, a notification log per partition, projection checkpoints.

Open one with `await open_store(url)`: `memory://` for the in-memory backend, a `redis://`
URL for a Redis node or cluster.
"""

from __future__ import annotations

from typing import Literal

from services.redis.connection import connect
from services.store.base import (
    START,
    Ack,
    AppendRequest,
    AppendResult,
    ConcurrencyError,
    EventStore,
    InvalidAppend,
    InvalidMatchId,
    NewEvent,
    OutboxEntry,
    Recorded,
    Schedule,
    StoreError,
    StreamEntry,
)
from services.store.keys import DEFAULT_PARTITIONS, DEFAULT_PREFIX, Keys, partition_of
from services.store.memory import MemoryEventStore
from services.store.redis import RedisEventStore

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_PREFIX",
    "START",
    "Ack",
    "AppendRequest",
    "AppendResult",
    "ConcurrencyError",
    "EventStore",
    "InvalidAppend",
    "InvalidMatchId",
    "Keys",
    "MemoryEventStore",
    "NewEvent",
    "OutboxEntry",
    "Recorded",
    "RedisEventStore",
    "Schedule",
    "StoreError",
    "StreamEntry",
    "open_store",
    "partition_of",
]


async def open_store(
    url: str = "memory://",
    *,
    cluster: bool | Literal["auto"] = "auto",
    partitions: int = DEFAULT_PARTITIONS,
    prefix: str = DEFAULT_PREFIX,
) -> EventStore:
    """An event store for `url`: `memory://` (in this process) or a Redis node or cluster."""
    if url.startswith("memory:"):
        return MemoryEventStore(partitions=partitions, prefix=prefix)
    client = await connect(url, cluster=cluster)
    return RedisEventStore(client, partitions=partitions, prefix=prefix)
