"""The long form of tests/service/test_partition_reads.py: DOMINO_PARTITIONS=512 on the local
cluster, matches played through three referees, three bot workers and a gateway (about four
minutes on two cores). Not collected by `make test` (its name is not test_*.py): `make
test-many-partitions` runs it (docs/scaling.md, "Limits")."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from services.cli.supervisor import Stack
from tests.gateway.conftest import UNCAPPED, free_port, wait_healthy
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import assert_clean
from tests.service.test_partition_reads import POOL, followed_lines, settings_for, wait_shared

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]


def test_512_partitions_on_a_local_cluster_play_to_their_end_through_bots_and_a_gateway(
    redis_cluster_urls: list[str],
) -> None:
    """DOMINO_PARTITIONS=512 on the local cluster: three referees and three bot workers share
    the partitions; matches opened through the gateway end, one followed there to its end.
    A process holds a connection per stream it reads: this ends only once the referees'
    cluster client has room for them all (docs/scaling.md, "One read per stream")."""
    url = redis_cluster_urls[0]
    settings = settings_for(url, partitions=512, lease_ms=5000, claim_idle_ms=2000)
    public = free_port()
    with Stack(url, settings, referees=3, pools={POOL: 3}, projector=False) as stack:
        stack.spawn(
            "gateway", "gateway", "--host", "127.0.0.1", "--port", str(public), env=UNCAPPED
        )
        gateway = f"http://127.0.0.1:{public}"
        wait_healthy(gateway, stack.processes["gateway"])
        wait_shared(url, settings, {f"{POOL}-{k}" for k in range(3)}, timeout=120)
        ids = []
        for _ in range(8):
            deadline = time.monotonic() + 60
            while True:
                r = httpx.post(
                    f"{gateway}/api/v1/matches", json={"seats": [POOL, POOL]}, timeout=60
                )
                if r.status_code == 201 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 201, r.text
            ids.append(r.json()["match"]["match_id"])
        lines = asyncio.run(followed_lines(gateway, ids[-1]))
        logs = wait_until_over(url, settings, ids, timeout=180)
    for log in logs.values():
        assert_clean(log)
    events = [line["id"] for line in lines if line["type"] == "event"]
    assert events == list(range(lines[0]["id"] + 1, len(logs[ids[-1]]) + 1))
