"""FastStream applications for each service: broker, lifecycle and the loops they run.

Each service is a FastStream app whose broker (msgspec serializer) carries the low-volume
streams through ordinary subscribers, while the hot loops — commands for the referee, turns
for bots — read with XREADGROUP directly (see services/streams.py for why).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Awaitable, Callable

import structlog
from fast_depends.msgspec import MsgSpecSerializer
from faststream import FastStream
from faststream.redis import RedisBroker, StreamSub
from redis.asyncio import Redis

from engine.strategy import make_strategy
from events.wire import Rejected
from services.bots import BotWorker, group_name
from services.config import Settings
from services.projector import Projector
from services.ratings import RatingsProjector
from services.redis_client import connect
from services.referee import Referee
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore
from services.streams import ensure_groups
from services.topology import Topology

log = structlog.get_logger()


def tune_gc() -> None:
    """A service allocates many small, short-lived objects per message: collect the young
    generation less often, and leave what was loaded at start-up out of full collections."""
    gc.set_threshold(50_000, 20, 20)
    gc.freeze()


def consumer_name(kind: str) -> str:
    """A consumer name unique to this process: kind, host and pid."""
    return f"{kind}-{socket.gethostname()}-{os.getpid()}"


def _client(url: str) -> Redis:
    return connect(url)


def _app(
    url: str,
    start: Callable[[Redis], Awaitable[Callable[[], Awaitable[None]]]],
    broker: RedisBroker | None = None,
) -> FastStream:
    """A FastStream app that runs ``start(redis)`` after startup and its returned stopper on
    shutdown."""
    broker = broker or RedisBroker(url, serializer=MsgSpecSerializer(), logger=None)
    app = FastStream(broker, logger=None)
    state: dict[str, Callable[[], Awaitable[None]]] = {}
    redis = _client(url)

    @app.after_startup
    async def _start() -> None:
        state["stop"] = await start(redis)

    @app.on_shutdown
    async def _stop() -> None:
        if "stop" in state:
            await state["stop"]()
        await redis.aclose()

    return app


def _task(
    runner: Callable[[], Awaitable[None]], stopper: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    task = asyncio.create_task(runner())  # type: ignore[arg-type]

    async def stop() -> None:
        stopper()
        await asyncio.gather(task, return_exceptions=True)

    return stop


def referee_app(url: str, settings: Settings, name: str | None = None) -> FastStream:
    """The referee service."""

    async def start(redis: Redis) -> Callable[[], Awaitable[None]]:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        referee = Referee(settings, redis, store, name or consumer_name("referee"))
        return _task(referee.run, referee.stop)

    return _app(url, start)


def bots_app(
    url: str,
    settings: Settings,
    strategy: str,
    pool: str | None = None,
    name: str | None = None,
    seed: int | None = None,
) -> FastStream:
    """A bot worker: answers the turns of ``pool`` (default: the strategy's name)."""
    pool = pool or strategy
    topo = Topology(settings.prefix, settings.partitions)
    replies = topo.replies(group_name(pool))
    consumer = name or consumer_name(pool)
    broker = RedisBroker(url, serializer=MsgSpecSerializer(), logger=None)

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

    async def start(redis: Redis) -> Callable[[], Awaitable[None]]:
        bot = make_strategy(strategy, seed, settings.search_budget_ms)
        worker = BotWorker(settings, redis, bot, pool, consumer)
        return _task(worker.run, worker.stop)

    app = _app(url, start, broker)

    @app.on_startup
    async def _groups() -> None:
        redis = _client(url)
        try:  # FastStream would create the group at $ and miss earlier entries
            await ensure_groups(redis, [replies], group_name(pool))
        finally:
            await redis.aclose()

    return app


def projector_app(url: str, settings: Settings) -> FastStream:
    """The projector: keeps summaries, match lists, results and ratings up to date."""

    async def start(redis: Redis) -> Callable[[], Awaitable[None]]:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        ratings = RatingsProjector(store, checkpoints)
        projector = Projector(store, checkpoints, also=[ratings])  # one read of the logs
        stop = asyncio.Event()
        return _task(lambda: projector.run(stop), stop.set)

    return _app(url, start)
