"""A bot worker's FastStream app."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import structlog
from faststream import FastStream
from faststream.redis import StreamSub
from faststream.redis.prometheus import RedisPrometheusMiddleware
from prometheus_client import REGISTRY

from engine.strategy import make_strategy
from events.wire import Rejected
from services.bots.worker import BotWorker, group_name, heartbeat
from services.config import Settings
from services.metrics import Exporter
from services.redis.apps import consumer_name, redis_broker, run_task, service_app
from services.redis.connection import Client, open_client, pool_for_reads
from services.redis.lane import close_lane
from services.store.keys import Keys
from services.transport.redis import RedisLeaseTable, RedisTransport, ensure_groups
from services.transport.stats import GroupGauges

log = structlog.get_logger()


@functools.cache
def _prometheus() -> RedisPrometheusMiddleware:
    """FastStream's own metrics of the messages a FastStream subscriber carries (the
    rejections of our moves), beside the worker's: one per process, as its registry is."""
    return RedisPrometheusMiddleware(
        registry=REGISTRY, app_name="bots", metrics_prefix="domino_faststream"
    )


def bots_app(
    url: str,
    settings: Settings,
    strategy: str,
    pool: str | None = None,
    name: str | None = None,
    seed: int | None = None,
    *,
    cluster: bool = False,
    exporter: Exporter | None = None,
) -> FastStream:
    """A bot worker: answers the turns of ``pool`` (default: the strategy's name); its health,
    readiness and metrics answered by ``exporter``."""
    exporter = exporter or Exporter.disabled()
    pool = pool or strategy
    topo = Keys(settings.prefix, settings.partitions)
    replies = topo.replies(group_name(pool))
    consumer = name or consumer_name(pool)
    broker = redis_broker(url, cluster, middlewares=[_prometheus()])

    @broker.subscriber(stream=StreamSub(replies, group=group_name(pool), consumer=consumer))
    async def on_rejected(message: Rejected) -> None:
        """A move of ours was refused: say so (a stale turn after a timeout is the usual)."""
        log.warning(
            "move rejected",
            match_id=message.match_id,
            command_id=message.command_id,
            reason=message.rejection.reason,
            detail=message.rejection.message,
        )

    async def start(redis: Client) -> Callable[[], Awaitable[None]]:
        samples = settings.search_samples or None
        bot = make_strategy(strategy, seed, settings.search_budget_ms, samples)
        leases = RedisLeaseTable(redis, topo, role=group_name(pool))
        # On a cluster the worker keeps a blocking read per turns stream it holds, each on a
        # connection of its own: they get a client whose pool has room for every partition,
        # so that neither they nor the leases' renewals (on the service's client) starve.
        reads = (
            open_client(url, cluster=True, max_connections=pool_for_reads(settings.partitions))
            if cluster
            else redis
        )
        worker = BotWorker(
            settings, RedisTransport(reads, topo), bot, pool, consumer, leases=leases
        )
        beat = asyncio.create_task(heartbeat(redis, topo, pool, consumer))
        group = GroupGauges(group_name(pool))

        async def refresh() -> None:
            await group.refresh(redis, worker.reader.streams)

        exporter.attach(worker.readiness, refresh)
        stop_worker = run_task(exporter.watch(worker.run), worker.stop)

        async def stop() -> None:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            await stop_worker()
            if reads is not redis:
                await close_lane(reads)
                await reads.aclose()

        return stop

    app = service_app(url, start, broker, cluster=cluster)

    @app.on_startup
    async def _groups() -> None:
        redis = open_client(url, cluster=cluster)
        try:  # FastStream would create the group at $ and miss earlier entries
            await ensure_groups(redis, [replies], group_name(pool))
        finally:
            await redis.aclose()

    return app
