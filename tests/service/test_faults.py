"""Faults under a running stack: the matches must all finish, cleanly, by themselves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.rules import Rules
from services.cli.supervisor import Stack
from services.config import Settings
from tests.gateway.conftest import free_port, wait_healthy
from tests.service.conftest import read_log, wait_until_over
from tests.service.test_hosted_matches import assert_clean, create
from tests.support.restartable import RestartableRedis

pytestmark = pytest.mark.service


def settings_for(server: RestartableRedis, prefix: str) -> Settings:
    """A stack's settings on ``server``: quick reclaiming, leases and watch list."""
    return Settings(
        redis_url=server.url,
        prefix=prefix,
        partitions=4,
        claim_idle_ms=600,
        lease_ms=1500,
        watch_ms=1000,
        log_level="warning",
    )


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableRedis]:
    """A Redis of this test's own, stopped at the end."""
    server = RestartableRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_every_match_finishes_after_redis_is_killed_and_restarted_under_the_services(
    restartable: RestartableRedis, key_prefix: str
) -> None:
    """The services stay up while Redis dies (SIGKILL, the last second of writes lost) and
    comes back: they reconnect, reload what they had cached, send again the turns that were
    lost, and every match ends with a log that passes the rules check."""
    settings = settings_for(restartable, key_prefix)
    specs: list[tuple[Rules, list[str | None]]] = [
        (Rules.make("express", players=2, target=500), ["greedy", "random"]),
        (Rules.make("straight", players=2, target=500), ["random", "greedy"]),
    ] * 20
    with Stack(restartable.url, settings, pools={"random": 1, "greedy": 1}, projector=False):
        ids = create(restartable.url, settings, specs)
        deadline = time.monotonic() + 30
        while True:  # the services are up and playing every match
            logs = [asyncio.run(read_log(restartable.url, settings, m)) for m in ids]
            if all(len(log) > 3 for log in logs):
                break
            assert time.monotonic() < deadline, "the matches did not start"
            time.sleep(0.05)
        over = sum(log[-1].event.__struct_config__.tag == "match_ended" for log in logs)
        assert over < len(ids) // 2  # most matches are mid-play when Redis dies
        restartable.kill()
        time.sleep(0.5)
        restartable.start()
        logs = wait_until_over(restartable.url, settings, ids, timeout=90)
    assert len(logs) == len(ids)
    for log in logs.values():
        assert_clean(log)


def test_services_started_while_redis_is_down_wait_for_it_and_then_play(
    restartable: RestartableRedis, key_prefix: str
) -> None:
    """A service that cannot reach Redis when it starts waits for it (and says so) instead of
    exiting: the stack comes up while Redis is away, and plays once it is back (the gateway
    too: it asked Redis which topology it is without waiting for an answer, and exited)."""
    settings = settings_for(restartable, key_prefix)
    restartable.kill()
    with Stack(restartable.url, settings, pools={"random": 1, "greedy": 1}, projector=False) as s:
        port = free_port()
        gateway = s.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port))
        time.sleep(5.0)  # the processes start (the gateway's imports take a while), find no
        # Redis, and wait
        assert not s.check(), "a service exited instead of waiting for Redis"
        restartable.start()
        wait_healthy(f"http://127.0.0.1:{port}", gateway, timeout=60)
        specs: list[tuple[Rules, list[str | None]]] = [
            (Rules.make("express", players=2), ["greedy", "random"]),
        ] * 6
        ids = create(restartable.url, settings, specs)
        logs = wait_until_over(restartable.url, settings, ids, timeout=60)
    for log in logs.values():
        assert_clean(log)
