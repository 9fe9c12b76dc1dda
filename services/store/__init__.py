"""The event store: per-match streams, a notification log per partition, projection checkpoints.

Open one with `await open_store(url)`: `memory://` for the in-memory backend, a `redis://`
URL for a Redis node or cluster. Finished matches move from it to an archive
(`open_archive(where)`: a directory or `s3://bucket/prefix`), and a `MatchSource` reads a
match from either (docs/storage.md).
"""

from __future__ import annotations

from typing import Literal

from services.redis.connection import connect
from services.store.archive import Archive, ArchiveError, DirectoryArchive
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
from services.store.source import MatchSource

__all__ = [
    "DEFAULT_PARTITIONS",
    "DEFAULT_PREFIX",
    "START",
    "Ack",
    "AppendRequest",
    "AppendResult",
    "Archive",
    "ArchiveError",
    "ConcurrencyError",
    "DirectoryArchive",
    "EventStore",
    "InvalidAppend",
    "InvalidMatchId",
    "Keys",
    "MatchSource",
    "MemoryEventStore",
    "NewEvent",
    "OutboxEntry",
    "Recorded",
    "RedisEventStore",
    "Schedule",
    "StoreError",
    "StreamEntry",
    "open_archive",
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


def open_archive(where: str, s3_endpoint: str | None = None) -> Archive:
    """The archive ``where`` names: ``s3://bucket/prefix`` (an S3-compatible store at
    ``s3_endpoint``, or AWS's when None; credentials as boto3 finds them), else a directory."""
    if where.startswith("s3://"):
        from services.store.s3 import S3Archive  # boto3 is an optional extra

        bucket, _, prefix = where.removeprefix("s3://").partition("/")
        return S3Archive(bucket, prefix, endpoint=s3_endpoint)
    return DirectoryArchive(where)
