"""Past one process of each: the service workload on a local Redis Cluster of 3 masters with
1, 2 and 4 of each of referee, bot worker and projector.

Every process is a child (`domino referee`, `domino bots`, `domino projector`), as in
production; 200 concurrent four-seat matches of house bots play for a warm-up and a measured
window. Events are counted from the logs themselves (the sum of the matches' versions before
and after the window: the moves, and the few events of each round's start and end), CPU from
`/proc/<pid>/stat` for every process and every master. Each line carries its ratio to one of
each in the same run: on this 2-core machine the masters and every process share the same
cores, so a ratio says what the split costs or buys here, not what separate machines would
make of it (docs/scaling.md).

`scale.netns` runs the same across a network (tests/support/netns.py): the three masters on
a host of their own, every process of the service on another, each connection between the
two held 1 ms each way by a delaying proxy — a service one switch away from its Redis. Its
ratios are to one of each across that same network; `loopback_ratio` is to the loopback
line with as many processes. Where namespaces cannot be made (not root, no iproute2) the
line says why instead.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.rules import Rules
from events.model import CancelMatch
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.connection import open_client
from services.redis.servers import Placement, local_cluster
from services.store.redis import RedisEventStore
from tests.bench.service import MATCHES, MEASURE_S, _cpu_s
from tests.support.netns import network, why_unavailable

SCALES = (1, 2, 4)
"""How many of each of referee, bot worker and projector a line runs."""
PARTITIONS = 24
"""Enough that four of each hold several partitions apiece, spread over the three masters."""
WARMUP_S = 4.0
"""Longer than the single-node bench's: a stack of many processes settles its leases first."""
DELAY_MS = 1.0
"""Each way, between the service's host and the masters' across the network."""
PORT = 7000
"""Master k listens on PORT + k on the masters' host."""


def run() -> Iterator[dict[str, Any]]:
    """Yield scale.cluster for 1, 2 and 4 of each process, each with its ratio to one of
    each, all on one cluster started for the run."""
    loopback: dict[int, float] = {}
    with local_cluster(3) as cluster:
        masters = {f"redis-{k}": node.process.pid for k, node in enumerate(cluster.masters)}
        for n in SCALES:
            figures = _scaled(cluster.urls[0], n, masters, prefix=f"scale{n}")
            loopback[n] = figures["events_per_s"]
            yield _line("scale.cluster", n, figures, loopback[1])
    yield from _across_a_network(loopback)


def _across_a_network(loopback: dict[int, float]) -> Iterator[dict[str, Any]]:
    """The same runs with the masters on one host and the service on another, 1 ms apart."""
    why = why_unavailable()
    if why is not None:
        yield {"bench": "scale.netns", "skipped": why}
        return
    with network() as net:
        masters_at, service = net.host("redis"), net.host("service")
        ports = [PORT + k for k in range(3)]
        net.delay(service, [], masters_at, ports, DELAY_MS)
        placements = [Placement(masters_at.address, masters_at.wrapper, p) for p in ports]
        with local_cluster(3, placements=placements) as cluster:
            pids = {f"redis-{k}": node.process.pid for k, node in enumerate(cluster.masters)}
            base = 0.0
            for n in SCALES:
                figures = _scaled(
                    cluster.urls[0], n, pids, prefix=f"net{n}", wrapper=service.wrapper
                )
                base = base or figures["events_per_s"]
                line = _line("scale.netns", n, figures, base)
                line["delay_ms"] = DELAY_MS
                line["loopback_ratio"] = round(figures["events_per_s"] / loopback[n], 3)
                yield line


def _line(bench: str, n: int, figures: dict[str, Any], one_of_each: float) -> dict[str, Any]:
    return {
        "bench": bench,
        "matches": MATCHES,
        "masters": 3,
        "partitions": PARTITIONS,
        "referees": n,
        "bot_workers": n,
        "projectors": n,
        **figures,
        "ratio": round(figures["events_per_s"] / one_of_each, 3),
    }


def _scaled(
    url: str, n: int, masters: dict[str, int], prefix: str, wrapper: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The workload with ``n`` of each process on the cluster at ``url``, under its own key
    prefix (so that the runs of one cluster do not meet), each process run by ``wrapper`` (in
    a namespace of its own, say): events/s and CPU per event."""
    logs = tempfile.TemporaryDirectory(prefix="domino-scale-")
    settings = Settings(
        redis_url=url,
        prefix=prefix,
        log_level="warning",
        cluster=True,
        partitions=PARTITIONS,
        archive=str(Path(logs.name) / "archive"),
    )
    with (
        logs,
        Stack(
            url,
            settings,
            referees=n,
            pools={"random": n},
            projectors=n,
            log_dir=logs.name,
            wrapper=wrapper,
        ) as stack,
    ):
        pids = {name: p.pid for name, p in stack.processes.items()} | masters
        return asyncio.run(_drive(url, settings, pids))


async def _drive(url: str, settings: Settings, pids: dict[str, int]) -> dict[str, Any]:
    redis = open_client(url, cluster=True)
    client = service_client(redis, settings, sender="bench")
    store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
    rules = Rules.make("express", target=5000)  # long matches: none ends inside the window
    try:
        ids = [
            await client.create_match(rules, ["random"] * 4, deadline_ms=30_000)
            for _ in range(MATCHES)
        ]
        await asyncio.sleep(WARMUP_S)
        before_cpu = {name: _cpu_s(pid) for name, pid in pids.items()}
        before = await _events(store, ids)
        start = time.perf_counter()
        await asyncio.sleep(MEASURE_S)
        events = await _events(store, ids) - before
        elapsed = time.perf_counter() - start
        cpu = {name: _cpu_s(pid) - before_cpu[name] for name, pid in pids.items()}
        for match_id in ids:
            await client.send(match_id, CancelMatch())
        return {
            "events_per_s": round(events / elapsed),
            "cpu_ms_per_event": _by_role(cpu, events),
        }
    finally:
        await redis.aclose()


async def _events(store: RedisEventStore, ids: list[str]) -> int:
    """Every event the matches have made so far (the sum of their versions)."""
    return sum(await asyncio.gather(*(store.version(m) for m in ids)))


def _by_role(cpu_s: dict[str, float], events: int) -> dict[str, float]:
    """CPU milliseconds per event by role (referee, bots, projector, redis), summed over the
    processes of each, and in all."""
    roles: dict[str, float] = {}
    for name, seconds in cpu_s.items():
        role = name.split("-", 1)[0]
        roles[role] = roles.get(role, 0.0) + seconds
    out = {role: round(1000 * s / max(1, events), 4) for role, s in sorted(roles.items())}
    out["total"] = round(sum(out.values()), 4)
    return out
