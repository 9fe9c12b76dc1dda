"""The projector's FastStream app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from faststream import FastStream

from services.config import Settings
from services.core.leases import PartitionLeases
from services.metrics import Exporter
from services.projections.accounts import AccountFeeds, FinishedFeeds
from services.projections.archiver import ArchiveQueue, Archiver, Retention
from services.projections.compaction import Compactor
from services.projections.projector import Projector
from services.projections.ratings import RatingsProjector
from services.redis.apps import consumer_name, run_task, service_app
from services.redis.connection import Client
from services.store import MatchSource, open_archive
from services.store.keys import Keys
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from services.transport.redis import RedisLeaseTable

ROLE = "projector"
"""The role of the projectors' partition leases: ``<prefix>:{pN}:lease:projector``, and their
heartbeats in ``<prefix>:holders:projector``."""


def every_projection(redis: Client, settings: Settings) -> Projector:
    """The projector of every projection — summaries, match lists, results, ratings, the
    accounts told when their matches end, and the queue of finished matches to archive — fed by
    one read of the logs: what the service follows and what ``domino projections rebuild``
    refolds (from the match logs, live and archived)."""
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    archive = open_archive(settings.archive_at(), settings.archive_s3_endpoint)
    source = MatchSource(store, archive)
    checkpoints = RedisCheckpoints(redis, partitions=settings.partitions, prefix=settings.prefix)
    ratings = RatingsProjector(store, checkpoints, source=source, archive=archive)
    feeds = FinishedFeeds(source, AccountFeeds(redis, store.keys))
    queue = ArchiveQueue(checkpoints)  # last: a match is due once every projection read its end
    return Projector(
        store, checkpoints, also=[ratings, feeds, queue], source=source, archive=archive
    )


def archiver_for(redis: Client, settings: Settings, projector: Projector, name: str) -> Archiver:
    """The archiver beside ``projector``: it waits for all of its projections."""
    if projector.archive is None:
        raise ValueError("the projector has no archive")
    compactor = None
    if settings.compact_every_s:  # 0: the results stay
        compactor = Compactor(
            redis,
            RatingsProjector(projector.store, projector.checkpoints),
            projector.archive,
            margin_s=settings.compact_margin_s,
            every_s=settings.compact_every_s,
        )
    return Archiver(
        redis,
        projector.store,
        projector.checkpoints,
        projector.archive,
        projector.names(),
        name,
        retention=Retention(
            archive_after_s=settings.archive_after_s,
            dedupe_keep_s=settings.dedupe_keep_s,
            log_keep_s=settings.log_keep_s,
        ),
        lease_ms=settings.lease_ms,
        summary=projector.summary,
        compactor=compactor,
    )


def projector_leases(redis: Client, settings: Settings, name: str) -> PartitionLeases:
    """The leases by which projector ``name`` holds its share of the partitions, among the
    projectors alive (docs/architecture.md, "Projections split by partition")."""
    keys = Keys(settings.prefix, settings.partitions)
    table = RedisLeaseTable(redis, keys, role=ROLE)
    return PartitionLeases(table, settings.partitions, name, settings.lease_ms)


def projector_app(
    url: str,
    settings: Settings,
    name: str | None = None,
    *,
    cluster: bool = False,
    exporter: Exporter | None = None,
) -> FastStream:
    """A projector named ``name`` (default: host and pid): keeps the projections of the
    partitions it holds up to date, beside any other projectors (on a Redis Cluster with
    ``cluster``); its health, readiness and metrics answered by ``exporter``."""
    exporter = exporter or Exporter.disabled()
    name = name or consumer_name(ROLE)

    async def start(redis: Client) -> Callable[[], Awaitable[None]]:
        projector = every_projection(redis, settings)
        leases = projector_leases(redis, settings, name)
        archiver = archiver_for(redis, settings, projector, name)
        stop = asyncio.Event()

        async def ready() -> str | None:
            return await projector.readiness() or archiver.readiness()

        async def both() -> None:
            await asyncio.gather(
                projector.run(stop, leases=leases),
                archiver.run(stop, interval=settings.trim_every_s),
            )

        exporter.attach(ready)
        return run_task(exporter.watch(both), stop.set)

    return service_app(url, start, cluster=cluster)
