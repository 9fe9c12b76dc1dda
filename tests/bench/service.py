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
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from engine.rules import Rules
from engine.strategy import RandomStrategy
from events.model import CancelMatch
from services.bots.worker import BotWorker
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.apps import tune_gc
from services.redis.connection import Client, open_client
from services.redis.servers import local_cluster
from services.store.keys import Keys
from services.store.redis import RedisEventStore
from services.transport.redis import RedisTransport
from tests.bench.store import bare_append_rate
from tests.support.redis_env import redis_server

MATCHES = 200
WARMUP_S = 2.0
MEASURE_S = 8.0
FINISHED = 50
"""Matches played to their end for the per-match figures of service.capacity."""
RETENTION_S = 15.0
"""The bench's DOMINO_ARCHIVE_AFTER_S: finished matches are archived this long after."""
TICK_S = os.sysconf("SC_CLK_TCK")


@dataclass
class Window:
    """What one measured window of the workload cost: moves, latencies, each process's CPU
    seconds, Redis's commands and network bytes."""

    moves: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    net_bytes: int = 0


def run() -> Iterator[dict[str, Any]]:
    """Yield service.e2e; service.capacity, where that workload's CPU and Redis traffic went,
    per move, and what a finished match leaves in Redis; service.overlap, the same workload
    handled one batch at a time, with the default's ratio to it; service.referees, the same
    workload with two referee processes, with its ratio to one; service.cluster, the same workload
    on a local Redis Cluster of 3 masters, with its ratio to this run's single node; and
    service.cluster_replicated, replica durability against the default on a cluster with a
    replica per master."""
    with redis_server(appendfsync="no", env_var=None) as url:
        window, finished = _service(url, cluster=False)
        ceiling = asyncio.run(bare_append_rate(url, seconds=2.0))
    with redis_server(appendfsync="no", env_var=None) as url:
        serial, _ = _service(url, cluster=False, finish=False, overlap=1)
    with redis_server(appendfsync="no", env_var=None) as url:
        pair, _ = _service(url, cluster=False, finish=False, referees=2)
    moves_per_s = window.moves / window.seconds
    single = {
        "bench": "service.e2e",
        "matches": MATCHES,
        **_figures(moves_per_s, window.latencies),
        "ceiling_per_s": round(ceiling),
        "ratio": round(moves_per_s / ceiling, 3),
    }
    yield single
    yield {"bench": "service.capacity", "matches": MATCHES, **_capacity(window), **finished}
    # What handling batches side by side (DOMINO_OVERLAP) buys: one batch at a time instead.
    serial_moves = serial.moves / serial.seconds
    yield {
        "bench": "service.overlap",
        "matches": MATCHES,
        "overlap": 1,
        **_figures(serial_moves, serial.latencies),
        "default_overlap": Settings().overlap,
        "default_per_s": single["moves_per_s"],
        "ratio": round(moves_per_s / serial_moves, 3),
    }
    # What a second referee process buys on this machine: the partitions split between two,
    # so that deciding runs on both cores while the rest of the ring waits on Redis.
    pair_moves = pair.moves / pair.seconds
    yield {
        "bench": "service.referees",
        "matches": MATCHES,
        "referees": 2,
        **_figures(pair_moves, pair.latencies),
        "cpu_ms_per_move": _capacity(pair)["cpu_ms_per_move"],
        "one_referee_per_s": single["moves_per_s"],
        "ratio": round(pair_moves / moves_per_s, 3),
    }
    with local_cluster(3) as cluster:
        clustered, _ = _service(cluster.urls[0], cluster=True, finish=False)
    cluster_moves = clustered.moves / clustered.seconds
    yield {
        "bench": "service.cluster",
        "matches": MATCHES,
        "masters": 3,
        **_figures(cluster_moves, clustered.latencies),
        "single_node_per_s": single["moves_per_s"],
        "ratio": round(cluster_moves / moves_per_s, 3),
    }
    # The price of DOMINO_DURABILITY=replica: the same cluster with a replica per master, the
    # default against replica mode (each append waits for WAIT), side by side.
    rates: dict[str, Window] = {}
    for durability in ("primary", "replica"):
        with local_cluster(3, replicas=1) as cluster:
            rates[durability], _ = _service(
                cluster.urls[0], cluster=True, finish=False, durability=durability
            )
    primary, replica = (rates[d].moves / rates[d].seconds for d in ("primary", "replica"))
    yield {
        "bench": "service.cluster_replicated",
        "matches": MATCHES,
        "masters": 3,
        "replicas_per_master": 1,
        "durability": "replica",
        **_figures(replica, rates["replica"].latencies),
        "primary_durability_per_s": round(primary),
        "ratio": round(replica / primary, 3),
    }


def _service(
    url: str,
    cluster: bool,
    finish: bool = True,
    durability: str = "primary",
    overlap: int = 0,
    referees: int = 1,
) -> tuple[Window, dict[str, Any]]:
    """The workload on the Redis at ``url`` with ``referees`` referee processes: its measured
    window, and (``finish``) what FINISHED whole matches leave behind."""
    logs = tempfile.TemporaryDirectory(prefix="domino-bench-")
    settings = Settings(
        redis_url=url,
        prefix="bench",
        log_level="info",
        cluster=cluster,
        durability=durability,  # type: ignore[arg-type]
        overlap=overlap or Settings().overlap,
        archive=str(Path(logs.name) / "archive"),
        archive_after_s=RETENTION_S,  # short, so that the archived figure is reached
        dedupe_keep_s=5.0,
        log_keep_s=2.0,
        trim_every_s=1.0,
    )
    with (
        logs,
        Stack(
            url, settings, referees=referees, pools={}, projector=True, log_dir=logs.name
        ) as stack,
    ):
        pids = {name: p.pid for name, p in stack.processes.items()}
        return uvloop.run(_drive(url, settings, pids, finish))


def _figures(moves_per_s: float, latencies: list[float]) -> dict[str, Any]:
    latencies.sort()
    return {
        "moves_per_s": round(moves_per_s),
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
    }


def _capacity(window: Window) -> dict[str, Any]:
    """Per move: each process's CPU (ms), Redis's commands by name and its network bytes."""
    per_move = {name: round(1000 * s / window.moves, 4) for name, s in window.cpu_s.items()}
    per_move["total"] = round(sum(per_move.values()), 4)
    calls = {name: round(n / window.moves, 3) for name, n in sorted(window.calls.items()) if n}
    return {
        "moves": window.moves,
        "cpu_ms_per_move": per_move,
        "redis_calls_per_move": calls,
        "redis_net_bytes_per_move": round(window.net_bytes / window.moves),
    }


async def _drive(
    url: str, settings: Settings, pids: dict[str, int], finish: bool
) -> tuple[Window, dict[str, Any]]:
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
    finished: dict[str, Any] = {}
    base_memory = int((await redis.info("memory"))["used_memory"])
    try:
        ids = [
            await client.create_match(rules, ["random"] * 4, deadline_ms=30_000)
            for _ in range(MATCHES)
        ]
        await asyncio.sleep(WARMUP_S)
        if not settings.cluster:
            pids["redis"] = int((await redis.info("server"))["process_id"])
        pids["bots (this process)"] = os.getpid()
        before = await _sample(redis, pids, settings.cluster)
        moves, seen = worker.moves, len(latencies)
        start = time.perf_counter()
        await asyncio.sleep(MEASURE_S)
        elapsed = time.perf_counter() - start
        after = await _sample(redis, pids, settings.cluster)
        window = Window(
            moves=worker.moves - moves,
            seconds=elapsed,
            latencies=latencies[seen:],
            cpu_s={k: after[0][k] - before[0][k] for k in after[0]},
            calls={k: after[1].get(k, 0) - before[1].get(k, 0) for k in after[1]},
            net_bytes=after[2] - before[2],
        )
        if finish:
            memory = int((await redis.info("memory"))["used_memory"])
            store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
            events = sum([await store.version(m) for m in ids])
            live = {
                "live_matches": MATCHES,
                "events_per_live_match": round(events / MATCHES),
                "redis_bytes_per_live_event": round((memory - base_memory) / events),
            }
            for match_id in ids:  # the window's matches are not part of what follows
                await client.send(match_id, CancelMatch())
            await _archived(redis, settings, ids)
            finished = {**live, **await _finished(redis, client, worker, settings)}
        return window, finished
    finally:
        worker.stop()
        await task
        await redis.aclose()


async def _sample(
    redis: Client, pids: dict[str, int], cluster: bool
) -> tuple[dict[str, float], dict[str, int], int]:
    """Each process's CPU seconds so far, and (one node) Redis's calls by command and its
    network bytes in and out."""
    cpu = {name: _cpu_s(pid) for name, pid in pids.items()}
    if cluster:
        return cpu, {}, 0
    stats = await redis.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    net = await redis.info("stats")
    return cpu, calls, int(net["total_net_input_bytes"]) + int(net["total_net_output_bytes"])


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK_S


async def _finished(
    redis: Client, client: Any, worker: BotWorker, settings: Settings
) -> dict[str, Any]:
    """Play FINISHED short matches to their end; what each leaves in Redis, and what it
    took in moves and Redis commands."""
    await asyncio.sleep(1.0)  # the cancelled matches settle
    memory = int((await redis.info("memory"))["used_memory"])
    keys = int(await redis.dbsize())
    stats = await redis.info("commandstats")
    calls = sum(int(v["calls"]) for v in stats.values())
    moves = worker.moves
    rules = Rules.make("express", target=100)
    ids = [
        await client.create_match(rules, ["random"] * 4, deadline_ms=30_000)
        for _ in range(FINISHED)
    ]
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    events = 0
    for match_id in ids:
        while True:
            log = await store.read(match_id)
            if log and log[-1].type == "match_ended":
                events += len(log)
                break
            await asyncio.sleep(0.2)
    await asyncio.sleep(2.0 + 2 * settings.trim_every_s + settings.log_keep_s)  # trimmed
    stats = await redis.info("commandstats")
    calls = sum(int(v["calls"]) for v in stats.values()) - calls
    retained = int((await redis.info("memory"))["used_memory"]) - memory
    retained_keys = int(await redis.dbsize()) - keys
    await _archived(redis, settings, ids)
    archived = int((await redis.info("memory"))["used_memory"]) - memory
    return {
        "finished_matches": FINISHED,
        "events_per_finished_match": round(events / FINISHED),
        "moves_per_finished_match": round((worker.moves - moves) / FINISHED),
        "redis_bytes_per_finished_match": round(retained / FINISHED),
        "redis_keys_per_finished_match": round(retained_keys / FINISHED, 1),
        "redis_bytes_per_archived_match": round(archived / FINISHED),
        "redis_keys_per_archived_match": round((int(await redis.dbsize()) - keys) / FINISHED, 1),
        "redis_calls_per_finished_match": round(calls / FINISHED),
    }


async def _archived(redis: Client, settings: Settings, ids: list[str]) -> None:
    """Wait until the matches have left Redis for the archive (and the streams are trimmed
    behind them)."""
    keys = Keys(settings.prefix, settings.partitions)
    deadline = time.monotonic() + RETENTION_S + 120
    while any([await redis.exists(keys.match(m)) for m in ids]):
        if time.monotonic() > deadline:
            raise TimeoutError("the matches were not archived")
        await asyncio.sleep(0.5)
    await asyncio.sleep(2.0 + 2 * settings.trim_every_s + settings.log_keep_s)
