"""The event store: per-match streams, a notification log per partition, projection checkpoints.

Open one with `await open_store(url)`: `memory://` for the in-memory backend, a `redis://`
URL for a Redis node or cluster.
"""

from __future__ import annotations

from typing import Literal

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

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
from services.store.lua import Client
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
    "connect",
    "open_store",
    "partition_of",
]


async def connect(url: str, *, cluster: bool | Literal["auto"] = "auto") -> Client:
    """A bytes-returning asyncio client for `url`; `cluster="auto"` asks the server which kind.

    Raises redis.ConnectionError when the server does not answer.
    """
    if cluster == "auto":
        probe = Redis.from_url(url)
        try:
            info = await probe.info("cluster")
        finally:
            await probe.aclose()
        cluster = bool(info.get("cluster_enabled"))
    if cluster:
        cluster_client = RedisCluster.from_url(url, decode_responses=False)
        await cluster_client.initialize()
        return cluster_client
    client = Redis.from_url(url, decode_responses=False)
    await client.ping()
    return client


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
