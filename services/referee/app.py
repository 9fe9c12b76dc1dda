"""The referee's FastStream app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import FastStream

from services.config import Settings
from services.metrics import DEAD_LETTERS, LIVE_MATCHES, Exporter
from services.redis.apps import consumer_name, run_task, service_app
from services.redis.connection import Client, pool_for_reads
from services.referee.service import GROUP, Referee
from services.store import open_archive
from services.store.redis import RedisEventStore
from services.transport.redis import RedisTransport
from services.transport.stats import GroupGauges, dead_letters, watched


def referee_app(
    url: str,
    settings: Settings,
    name: str | None = None,
    *,
    cluster: bool = False,
    exporter: Exporter | None = None,
) -> FastStream:
    """The referee service (on a Redis Cluster with ``cluster``), its health, readiness and
    metrics answered by ``exporter``."""
    exporter = exporter or Exporter.disabled()

    async def start(redis: Client) -> Callable[[], Awaitable[None]]:
        store = RedisEventStore(
            redis,
            partitions=settings.partitions,
            prefix=settings.prefix,
            replicas=1 if settings.durability == "replica" else 0,
            replica_wait_ms=settings.replica_wait_ms,
        )
        transport = RedisTransport(redis, store.keys)
        archive = open_archive(settings.archive_at(), settings.archive_s3_endpoint)
        referee = Referee(
            settings, store, transport, name or consumer_name("referee"), archive=archive
        )
        exporter.attach(referee.readiness, gauges(redis, referee))
        return run_task(exporter.watch(referee.run), referee.stop)

    # On a cluster the referee keeps a blocking read per partition it holds, each on a
    # connection of its own: its pool has room for every partition, and its other calls.
    pool = pool_for_reads(settings.partitions) if cluster else None
    return service_app(url, start, cluster=cluster, max_connections=pool)


def gauges(redis: Client, referee: Referee) -> Callable[[], Awaitable[None]]:
    """What refreshes the referee's gauges read from Redis: its group's lag and pending on the
    partitions it holds, their live matches, and the dead letters."""
    group = GroupGauges(GROUP)
    keys = referee.keys

    async def refresh() -> None:
        owned = list(referee.owned)
        await group.refresh(redis, [keys.commands(p) for p in owned])
        LIVE_MATCHES.set(sum(await watched(redis, keys, owned)))
        DEAD_LETTERS.set(await dead_letters(redis, keys))

    return refresh
