"""The network harness itself: a delay is one, and a host that dies loses what it had on
the wire. What the other network tests measure rests on both."""

from __future__ import annotations

import json
import time

import pytest
import redis

from services.redis.servers import Placement, private_server
from tests.support.netns import Network

pytestmark = [pytest.mark.service, pytest.mark.netns]

PORT = 6379
DELAY_MS = 50.0


def test_a_replica_across_a_delay_trails_its_master_by_it_and_loses_the_wire_with_the_host(
    net: Network,
) -> None:
    """A replica reaching its master through a 50 ms delay sees a write no sooner than 50 ms
    after the master acknowledged it; when the master's host dies (SIGKILL, and the link cut
    in the same instant), the writes the master acknowledged in the last 50 ms never reach
    the replica."""
    near, far = net.host("master"), net.host("replica")
    proxy = net.delay(near, [PORT], far, [PORT], DELAY_MS)
    with (
        private_server(
            appendfsync="no", placement=Placement(near.address, near.wrapper, PORT)
        ) as master_url,
        private_server(
            appendfsync="no", placement=Placement(far.address, far.wrapper, PORT)
        ) as replica_url,
        redis.Redis.from_url(master_url) as master,
        redis.Redis.from_url(replica_url) as replica,
    ):
        replica.replicaof(near.address, PORT)
        deadline = time.monotonic() + 30
        while replica.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.05)
        master.set("written", 1)
        written = time.monotonic()
        while replica.get("written") is None:
            assert time.monotonic() < written + 10, "the write never reached the replica"
            time.sleep(0.001)
        trailed_ms = (time.monotonic() - written) * 1000
        assert trailed_ms >= DELAY_MS * 0.9, trailed_ms

        acknowledged = 0
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            acknowledged = int(master.incr("counter"))
        pid = int(master.info("server")["process_id"])
        proxy.cut(kill=pid)
        time.sleep(3 * DELAY_MS / 1000)  # anything still coming would have come
        held = int(replica.get("counter") or 0)
    lost = acknowledged - held
    rate = acknowledged / 0.5
    print("\n" + json.dumps({"check": "harness_delay", "trailed_ms": round(trailed_ms, 1),
                             "acknowledged": acknowledged, "lost": lost}))  # fmt: skip
    assert lost > 0, "the replica holds every write: the wire was not cut with the host"
    assert lost <= rate * 4 * DELAY_MS / 1000, (lost, rate)  # about the delay's worth
