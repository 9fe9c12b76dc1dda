"""The gateway's ASGI app, assembled by :func:`create_app`: the routes its resources declare
(services/gateway/resources/), and the lifespan that connects it.

No Redis client exists until the app starts (its lifespan); stopping the app closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial

import structlog
from starlette.applications import Starlette
from starlette.middleware import Middleware

from services.config import Settings
from services.gateway import versions
from services.gateway.commands import Gateway
from services.gateway.config import GatewaySettings
from services.gateway.core import Running
from services.gateway.http import App
from services.gateway.hub import Hub
from services.gateway.openapi import openapi
from services.gateway.origins import Origins
from services.gateway.pages import Pages
from services.gateway.resources import OPERATIONS
from services.gateway.routing import http_error, not_found, routes_of
from services.gateway.sender import CommandSender
from services.lobby.accounts import Accounts
from services.lobby.arena_runner import ArenaRunner
from services.lobby.arenas import Arenas
from services.lobby.challenges import Challenges
from services.lobby.seeks import Matchmaker, Seeks
from services.lobby.tables import Lobby
from services.metrics import Exporter, register
from services.projections.accounts import AccountFeeds
from services.redis.apps import topology
from services.redis.connection import Client, open_client, replica_reader
from services.redis.lane import ClusterLane, Lane, close_lane
from services.store import MatchSource, open_archive
from services.store.redis import RedisEventStore

log = structlog.get_logger()

REDIS_CONNECTIONS = 256
STOP_S = 5.0
"""How long a stopping gateway waits for its background work (the matchmaker's round) to end."""


def create_app(
    settings: Settings, config: GatewaySettings | None = None, redis_url: str | None = None
) -> Starlette:
    """The gateway app for ``settings`` (Redis, prefix, partitions) and ``config`` (limits);
    raises GatewayConfigError when ``config`` listens beyond loopback with no allowed hosts."""
    url = redis_url or settings.redis_url
    if not url:
        raise ValueError("the gateway needs a Redis: set REDIS_URL")
    config = config or GatewaySettings()
    origins = Origins.of(config, config.host)
    gw = Gateway(settings, config, url, openapi)
    register("gateway")  # for GET /metrics, with or without a metrics port
    built = routes_of(OPERATIONS, gw)
    app = App(
        routes=built.routes,
        lifespan=partial(serving, gw),
        exception_handlers={404: not_found, 405: http_error},
        middleware=[Middleware(Pages)],  # the browser pages, ahead of the API's routes
        # the hot paths (moves, and every line of the players' streams) skip the router's walk
        # and the middleware's wrapping of each write
        fast=built.fast,
        # a version of the protocol not spoken (versions.py), then the Host and Origin of what
        # changes something (origins.py); every answer states the version it is in
        guards=[versions.refusal, origins.refusal],
        stated=[versions.STATED],
        # the seat's socket: its handshake is checked as its stream is (sockets.py)
        sockets=built.sockets,
    )
    app.state.gateway = gw
    return app


@contextlib.asynccontextmanager
async def serving(gw: Gateway, app: Starlette) -> AsyncIterator[None]:
    """The app's lifespan: the metrics port (DOMINO_METRICS_PORT, when set) answers from
    the start, then :func:`lifespan` connects and serves."""
    exporter = Exporter.of(gw.settings, "gateway")
    await exporter.start()
    exporter.attach(gw.readiness)
    try:
        async with lifespan(gw, app):
            yield
    finally:
        await exporter.stop()


@contextlib.asynccontextmanager
async def lifespan(gw: Gateway, app: Starlette) -> AsyncIterator[None]:
    """Connect, follow the logs, serve; then stop following and disconnect."""
    url = gw.redis_url
    cluster = await topology(url, gw.settings.cluster)  # waits for Redis to answer
    # On a cluster the hub keeps a blocking read per partition it follows (docs/architecture.md,
    # "Who reads which partitions"), each on a connection of its own: room for them all too.
    reads = gw.settings.partitions if cluster else 0
    redis = open_client(  # wait for a connection rather than fail
        url,
        cluster=cluster,
        max_connections=REDIS_CONNECTIONS + reads,
        wait_s=gw.config.move_timeout_s,
    )
    store = RedisEventStore(redis, partitions=gw.settings.partitions, prefix=gw.settings.prefix)
    archive = open_archive(gw.settings.archive_at(), gw.settings.archive_s3_endpoint)
    source = MatchSource(store, archive)
    # the moves' lane, and the hub's tail (on a cluster, a read per stream instead)
    moves: Lane | ClusterLane = ClusterLane(redis) if cluster else Lane(url)
    tail = None if cluster else Lane(url)
    lanes = [lane for lane in (moves, tail) if lane is not None]
    # With DOMINO_DURABILITY=replica a cluster's logs are followed on replicas: a move is
    # reported accepted, and an event shown, only once a failover cannot take it back.
    readers: Client = redis
    hub_store = store
    if cluster and gw.settings.durability == "replica":
        readers = replica_reader(url, max_connections=REDIS_CONNECTIONS)
        hub_store = RedisEventStore(
            readers, partitions=gw.settings.partitions, prefix=gw.settings.prefix
        )
    hub = Hub(
        readers,
        MatchSource(hub_store, archive),
        gw.topo,
        gw.replies,
        gw.config.stream_buffer_bytes,
        tail,
        gw.finished,
    )
    await hub.start()
    # an end made here applies here before it is answered; every other gateway follows
    accounts = Accounts(redis, gw.topo, on_end=gw.credentials.end)
    feeds = AccountFeeds(redis, gw.topo)
    seeks = Seeks(redis, gw.topo, feeds, gw.config.seek_ttl_s)
    arenas = Arenas(redis, gw.topo)
    runner = ArenaRunner(arenas, source, gw.start_arena)
    gw.running = Running(
        redis=redis,
        store=store,
        source=source,
        lobby=Lobby(redis, gw.topo, gw.config.token_ttl_s, gw.config.lobby_ttl_s),
        sender=CommandSender(moves, gw.topo, gw.replies, int(2000 * gw.config.move_timeout_s)),
        hub=hub,
        accounts=accounts,
        feeds=feeds,
        challenges=Challenges(redis, gw.topo, accounts, feeds, gw.config.challenge_ttl_s),
        seeks=seeks,
        arenas=arenas,
    )
    stop = asyncio.Event()
    matchmaker = Matchmaker(
        seeks,
        gw.start_seek,
        gw.name,
        fill_after_s=gw.config.seek_fill_s or None,
        also=[runner.tick],
        may_fill=gw.may_fill,
    )
    background = [asyncio.create_task(matchmaker.run(stop))]
    # the sweep, and the follower of the revocation stream, run until cancelled
    sweeper = asyncio.create_task(_sweep(gw))
    follower = asyncio.create_task(gw.credentials.follow(redis, stop))
    log.info("gateway started", replies=gw.replies, partitions=gw.settings.partitions)
    try:
        yield
    finally:
        stop.set()
        sweeper.cancel()
        follower.cancel()
        # the matchmaker and the follower end their round and stop (a cancelled blocking
        # read on a cluster may be taken by the client for its own timeout, and retried);
        # one still going after STOP_S is cancelled again and left: a gateway told to stop
        # always does
        tasks = [sweeper, follower, *background]
        _, stuck = await asyncio.wait(tasks, timeout=STOP_S)
        for task in stuck:
            log.warning("background work did not stop in time: cancelled", task=repr(task))
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=1.0)
        await hub.stop()
        for lane in lanes:
            await lane.aclose()
        for streams in gw.stream_limits:
            await streams.close()
        gw.running = None
        with contextlib.suppress(Exception):
            await redis.delete(gw.replies)
        if readers is not redis:
            await close_lane(readers)
            await readers.aclose()
        await close_lane(redis)  # the one its store and checkpoints shared
        await redis.aclose()
        log.info("gateway stopped")


async def _sweep(gw: Gateway) -> None:
    """Renew the leases of this gateway's open streams, well within their length, and the
    life of its reply stream: a gateway that dies leaves a stream that expires."""
    every = gw.config.stream_lease_s / 3
    while True:
        await asyncio.sleep(every)
        for streams in gw.stream_limits:
            try:
                await streams.renew(gw.redis)
            except Exception as e:  # Redis away: the next round tries again
                log.warning("stream leases not renewed", error=repr(e))
        try:
            await gw.redis.pexpire(gw.replies, int(max(60.0, 6 * every) * 1000))
        except Exception as e:
            log.warning("reply stream's life not renewed", error=repr(e))
        try:  # what the revocation stream tells, checked without it
            await gw.credentials.verify(gw.accounts)
        except Exception as e:
            log.warning("open streams' credentials not checked", error=repr(e))
