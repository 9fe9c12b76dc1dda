"""A master's host dying while matches play, with a real delay between it and its replica.

On loopback a replica trails its master by well under a millisecond, so what a failover
loses under the default durability could not be seen. Here every node of the cluster has a
namespace and an address of its own, and each replica reaches its master through a proxy
that holds every byte for 1 ms or 5 ms each way, as a link between two zones would. The
service runs in a namespace of its own and reaches every node without delay, as a service
beside its masters does. The fault is a host that dies: the master SIGKILLed, and what it had
on the wire to its replica lost with it, in the same instant.

What a spectator was shown is what the service acknowledged (tests/service/test_failover.py
counts the same way): with DOMINO_DURABILITY=replica nothing shown is lost; with the default
the test prints how much was, as one JSON line (run pytest with ``-s`` to see it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.servers import LocalCluster, Placement, local_cluster
from tests.gateway.conftest import free_port, wait_healthy
from tests.netns.conftest import LONG
from tests.service.test_failover import OPEN, master_with_most_partitions, play_through, read_logs
from tests.support.netns import DelayProxy, Network
from tests.support.watch import check_logs

pytestmark = [pytest.mark.service, pytest.mark.netns]

PORT = 7000
"""Node k listens on PORT + k (and its cluster bus on PORT + k + 10000) at its own address."""
MATCHES = 100 if LONG else 12
PACE_MS = 0 if LONG else 15
"""The short form's few matches are paced so that they are still playing at the kill."""
RUNS = 3 if LONG else 1
CASES = (
    [(d, mode, run) for d in (1, 5) for mode in ("primary", "replica") for run in range(RUNS)]
    if LONG
    else [(5, "replica", 0)]
)


def ports(k: int) -> list[int]:
    """Node k's ports: its clients' and its cluster bus's."""
    return [PORT + k, PORT + k + 10000]


@contextlib.contextmanager
def delayed_cluster(
    net: Network, durability: str, delay_ms: float, logs: Path
) -> Iterator[tuple[LocalCluster, Settings, Stack, str, list[DelayProxy]]]:
    """Three masters and their replicas, each replica ``delay_ms`` from its master, and the
    whole service in a namespace of its own."""
    masters = [net.host(f"m{k}") for k in range(3)]
    replicas = [net.host(f"r{k}") for k in range(3)]
    service = net.host("service")
    placements = [
        Placement(h.address, h.wrapper, PORT + k) for k, h in enumerate([*masters, *replicas])
    ]
    proxies = [  # replica k follows master k (services/redis/servers.py)
        net.delay(master, ports(k), replica, ports(3 + k), delay_ms)
        for k, (master, replica) in enumerate(zip(masters, replicas, strict=True))
    ]
    with local_cluster(3, replicas=1, node_timeout_ms=1000, placements=placements) as cluster:
        settings = Settings(
            redis_url=cluster.urls[0],
            prefix=f"n{uuid.uuid4().hex[:8]}",
            partitions=8,
            claim_idle_ms=1000,
            lease_ms=2000,
            watch_ms=2000,
            durability=durability,  # type: ignore[arg-type]
            bot_pace_ms=PACE_MS,
            log_level="warning",
        )
        pools = {"random": 1, "greedy": 1}
        with Stack(
            cluster.urls[0],
            settings,
            referees=2,
            pools=pools,
            projector=False,  # what is checked is the logs and what spectators were shown
            wrapper=service.wrapper,
            log_dir=logs,
        ) as stack:
            port = free_port()
            gateway = stack.spawn(
                "gateway",
                "gateway",
                "--host",
                service.address,
                "--port",
                str(port),
                env={**OPEN, "DOMINO_GATEWAY_ALLOWED_HOSTS": service.address},
            )
            url = f"http://{service.address}:{port}"
            wait_healthy(url, gateway)
            yield cluster, settings, stack, url, proxies


@pytest.mark.parametrize(("delay_ms", "durability", "run"), CASES)
def test_a_master_host_dying_across_a_delay_loses_nothing_shown_when_replicas_confirm(
    net: Network, delay_ms: float, durability: str, run: int, tmp_path: Path
) -> None:
    """SIGKILL the master holding the most partitions, and cut its link to its replica in
    the same instant, while the matches play: the replica takes over, every match finishes
    and verifies. With DOMINO_DURABILITY=replica no event a spectator was shown is lost;
    with the default the test reports how many were."""
    with delayed_cluster(net, durability, delay_ms, tmp_path) as (
        cluster,
        settings,
        stack,
        url,
        proxies,
    ):
        index = master_with_most_partitions(cluster, settings)
        victim = cluster.masters[index]
        survivor = cluster.masters[(index + 1) % len(cluster.masters)]

        def host_dies() -> None:
            proxies[index].cut(kill=victim.process.pid)

        started = time.monotonic()
        match_ids, watched, before = asyncio.run(
            play_through(cluster, settings, stack, url, host_dies, matches=MATCHES)
        )
        played_s = time.monotonic() - started
        logs = asyncio.run(read_logs(survivor.url, settings, match_ids))
    lost = check_logs(logs, watched)
    events = sum(len(log) for log in logs.values())
    after = events - sum(before.values())
    assert after > 0, "every match had ended before the kill"
    report = {
        "check": "failover_across_a_delay",
        "durability": durability,
        "delay_ms": delay_ms,
        "run": run,
        "matches": MATCHES,
        "shown_before_kill": sum(before.values()),
        "written_after": after,
        "played_s": round(played_s, 1),
        "events_per_s": round(events / played_s),
        "lost": len(lost),
        "lost_first": lost[:5],
    }
    print("\n" + json.dumps(report))
    if durability == "replica":
        assert not lost, f"acknowledged events lost: {lost[:5]}"
