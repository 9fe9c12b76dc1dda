"""The shape every service's FastStream app shares: broker, lifecycle and one long task.

Each service is a FastStream app whose broker (msgspec serializer) carries the low-volume
streams through ordinary subscribers, while the hot loops — commands for the referee, turns
for bots — read with XREADGROUP directly (see services/transport/redis.py for why).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import structlog
from fast_depends.msgspec import MsgSpecSerializer
from faststream import FastStream
from faststream.redis import RedisBroker, RedisClusterBroker
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.redis.connection import Client, open_client
from services.redis.lane import close_lane

log = structlog.get_logger()


def tune_gc() -> None:
    """A service allocates many small, short-lived objects per message: collect the young
    generation less often, and leave what was loaded at start-up out of full collections."""
    gc.set_threshold(50_000, 20, 20)
    gc.freeze()


def consumer_name(kind: str) -> str:
    """A consumer name unique to this process: kind, host and pid."""
    return f"{kind}-{socket.gethostname()}-{os.getpid()}"


def redis_broker(url: str, cluster: bool = False, middlewares: Sequence[Any] = ()) -> RedisBroker:
    """A broker for ``url`` (a Redis Cluster's node with ``cluster``) whose messages are
    msgspec-encoded and which logs nothing itself (the services log through structlog); with
    ``middlewares`` around every message (FastStream's Prometheus middleware, say)."""
    # FastStream's RedisBrokerParams types ``logger`` as LoggerProto only, yet None is how its
    # logging is turned off (make_logger_storage maps None to an EmptyLoggerStorage; FastStream
    # itself types the same parameter Optional).
    kind = RedisClusterBroker if cluster else RedisBroker
    return kind(
        url,
        serializer=MsgSpecSerializer(),
        logger=None,  # type: ignore[arg-type]
        middlewares=tuple(middlewares),
    )


async def topology(url: str, cluster: bool) -> bool:
    """Whether the services' Redis at ``url`` is a Redis Cluster: ``cluster`` if set (the
    DOMINO_REDIS_CLUSTER setting), else what the server says once it answers (a service
    started before its Redis waits for it here)."""
    if cluster:
        return True
    probe = Redis.from_url(url)
    try:
        while True:
            await wait_for_redis(probe, url)
            try:
                info = await probe.info("cluster")
            except (RedisConnectionError, RedisTimeoutError) as e:  # gone again since the ping
                log.warning("Redis went away while starting; waiting for it", error=str(e))
                continue
            return bool(info.get("cluster_enabled"))
    finally:
        await probe.aclose()


def service_app(
    url: str,
    start: Callable[[Client], Awaitable[Callable[[], Awaitable[None]]]],
    broker: RedisBroker | None = None,
    *,
    cluster: bool = False,
    max_connections: int | None = None,
) -> FastStream:
    """A FastStream app that runs ``start(redis)`` after startup and its returned stopper on
    shutdown; ``broker`` when the service has subscribers of its own. With ``cluster`` the
    client (and a broker made here) speak to a Redis Cluster; ``max_connections`` sizes its
    pool (per node on a cluster: see :func:`~services.redis.connection.pool_for_reads`)."""
    broker = broker or redis_broker(url, cluster)
    app = FastStream(broker, logger=None)
    state: dict[str, Callable[[], Awaitable[None]]] = {}
    redis = open_client(url, cluster=cluster, max_connections=max_connections)

    @app.on_startup
    async def _wait() -> None:
        await wait_for_redis(redis, url)

    @app.after_startup
    async def _start() -> None:
        state["stop"] = await start(redis)

    @app.on_shutdown
    async def _stop() -> None:
        if "stop" in state:
            await state["stop"]()
        await close_lane(redis)
        await redis.aclose()

    return app


async def wait_for_redis(redis: Client, url: str) -> None:
    """Return once Redis answers: a service started before its Redis (or while it restarts)
    waits for it instead of exiting, saying so every few seconds."""
    pause, waited, say_at = 0.1, 0.0, 0.0
    while True:
        try:
            await redis.ping()
            return
        except RedisError as e:
            if waited >= say_at:
                log.warning("waiting for Redis", url=url, error=str(e), waited_s=round(waited))
                say_at = waited + 5
        await asyncio.sleep(pause)
        waited += pause
        pause = min(pause * 2, 1.0)


def run_task(
    runner: Callable[[], Coroutine[Any, Any, None]], stopper: Callable[[], None]
) -> Callable[[], Awaitable[None]]:
    """Start ``runner`` as a task; return what stops it (``stopper``, then wait for it)."""
    task = asyncio.create_task(runner())

    async def stop() -> None:
        stopper()
        await asyncio.gather(task, return_exceptions=True)

    return stop
