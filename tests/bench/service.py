"""End to end: K concurrent bot-vs-bot matches through the referee, against the raw ceiling.

The referee and the projector run as their own processes, as in production; the random bots
run in this process through the real BotWorker, which measures each turn's latency from the
moment its command reached the referee to the moment the bot reads the turn. Matches have
deadlines (never reached) and the projector follows the logs, so both costs are in. The
ceiling is a bare version-checked Lua append pipelined across many matches, on the same Redis
in the same run.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import uvloop

from engine.rules import Rules
from engine.strategy import RandomStrategy
from services.bots.worker import BotWorker
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.apps import tune_gc
from services.redis.connection import open_client
from services.redis.servers import local_cluster
from services.store.keys import Keys
from services.transport.redis import RedisTransport
from tests.bench.store import bare_append_rate
from tests.support.redis_env import redis_server

MATCHES = 200
WARMUP_S = 2.0
MEASURE_S = 8.0


def run() -> Iterator[dict[str, Any]]:
    """Yield the service.e2e line, then service.cluster: the same workload on a local Redis
    Cluster of 3 masters, with its ratio to the single node's line of this run."""
    with redis_server(appendfsync="no", env_var=None) as url:
        moves_per_s, latencies = _service(url, cluster=False)
        ceiling = asyncio.run(bare_append_rate(url, seconds=2.0))
    single = {
        "bench": "service.e2e",
        "matches": MATCHES,
        **_figures(moves_per_s, latencies),
        "ceiling_per_s": round(ceiling),
        "ratio": round(moves_per_s / ceiling, 3),
    }
    yield single
    with local_cluster(3) as cluster:
        cluster_moves, cluster_latencies = _service(cluster.urls[0], cluster=True)
    yield {
        "bench": "service.cluster",
        "matches": MATCHES,
        "masters": 3,
        **_figures(cluster_moves, cluster_latencies),
        "single_node_per_s": single["moves_per_s"],
        "ratio": round(cluster_moves / moves_per_s, 3),
    }


def _service(url: str, cluster: bool) -> tuple[float, list[float]]:
    """Moves a second and command-to-turn latencies of the workload on the Redis at ``url``."""
    settings = Settings(redis_url=url, prefix="bench", log_level="info", cluster=cluster)
    logs = tempfile.TemporaryDirectory(prefix="domino-bench-")
    with logs, Stack(url, settings, pools={}, projector=True, log_dir=logs.name):
        return uvloop.run(_drive(url, settings))


def _figures(moves_per_s: float, latencies: list[float]) -> dict[str, Any]:
    latencies.sort()
    return {
        "moves_per_s": round(moves_per_s),
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
    }


async def _drive(url: str, settings: Settings) -> tuple[float, list[float]]:
    tune_gc()  # as `domino bots` runs
    redis = open_client(url, cluster=settings.cluster)
    client = service_client(redis, settings, sender="bench")
    rules = Rules.make("express", target=5000)  # long matches: none ends inside the window
    latencies: list[float] = []  # seconds from a command's arrival to its next turn
    worker = BotWorker(
        settings,
        RedisTransport(redis, Keys(settings.prefix, settings.partitions)),
        RandomStrategy(7),
        "random",
        "bench-bots",
        observe=lambda turn, now: latencies.append(now - turn.caused_at),
    )
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(MATCHES):
            await client.create_match(rules, ["random"] * 4, deadline_ms=30_000)
        await asyncio.sleep(WARMUP_S)
        moves, seen = worker.moves, len(latencies)
        start = time.perf_counter()
        await asyncio.sleep(MEASURE_S)
        elapsed = time.perf_counter() - start
        rate = (worker.moves - moves) / elapsed
        return rate, latencies[seen:]
    finally:
        worker.stop()
        await task
        await redis.aclose()
