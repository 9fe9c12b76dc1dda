"""A real hosted stack for gateway tests: the session's Redis; a referee, house bot workers and
the projector as processes; and gateway processes (uvicorn) on free loopback ports.

One stack serves the whole directory (its key prefix is its own). Two gateways share it: one
with generous limits for playing, one with tight limits for the tests of the limits. Limits are
kept in Redis, so what both count per client address (127.0.0.1) they count together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.game import evolve
from engine.state import MatchState
from events.envelope import Envelope
from services.bots.worker import pool_served
from services.cli.supervisor import Stack
from services.config import Settings
from services.store.keys import Keys
from tests.service.conftest import read_log
from tests.support.topology import client_for


@pytest.fixture(scope="session")
def redis_url(topology_url: str) -> str:
    """This suite runs on one Redis node and on a Redis Cluster (tests/conftest.py)."""
    return topology_url


OPERATOR = "operator-token-for-tests"
UNCAPPED = {  # every test here talks from 127.0.0.1, and caps per address count across them
    "DOMINO_GATEWAY_OPEN_MATCHES_PER_CLIENT": "100000",
    "DOMINO_GATEWAY_WAITING_SEATS_PER_CLIENT": "100000",
    "DOMINO_GATEWAY_AUTH_FAILURE_BURST": "100000",
    "DOMINO_GATEWAY_PLAYER_STREAMS_PER_CLIENT": "100000",
    "DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS": "100000",
    "DOMINO_GATEWAY_OPERATOR_FAILURE_BURST": "100000",
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_CLIENT": "100000",
}
PLAY_LIMITS = {
    **UNCAPPED,
    "DOMINO_GATEWAY_LOBBY_PER_S": "500",
    "DOMINO_GATEWAY_LOBBY_BURST": "500",
    "DOMINO_GATEWAY_KEEPALIVE_S": "1",
    "DOMINO_OPERATOR_TOKEN": OPERATOR,
    "DOMINO_GATEWAY_SEEK_FILL_S": "2",
}
STRICT_LIMITS = {
    **UNCAPPED,
    "DOMINO_GATEWAY_MOVES_PER_S": "4",
    "DOMINO_GATEWAY_MOVE_BURST": "6",
    "DOMINO_GATEWAY_STREAMS_PER_TOKEN": "2",
    "DOMINO_GATEWAY_LOBBY_PER_S": "2",
    "DOMINO_GATEWAY_LOBBY_BURST": "30",
    "DOMINO_GATEWAY_MAX_BODY_BYTES": "2048",
    "DOMINO_GATEWAY_KEEPALIVE_S": "1",
    "DOMINO_OPERATOR_TOKEN": OPERATOR,
    "DOMINO_GATEWAY_SEEK_FILL_S": "2",
}


@dataclass
class Gateways:
    """The running stack and the gateways in front of it."""

    stack: Stack
    settings: Settings
    redis_url: str
    url: str  # generous limits
    strict_url: str  # tight limits

    def spawn_gateway(self, name: str, port: int, env: dict[str, str]) -> str:
        """Start another gateway process on ``port`` with ``env`` over :data:`UNCAPPED` (the
        caps per address count what every test made from 127.0.0.1); its URL once it answers."""
        with _environ({**UNCAPPED, **env}):
            self.stack.spawn(name, "gateway", "--host", "127.0.0.1", "--port", str(port))
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, self.stack.processes[name], timeout=60.0)  # a loaded machine
        return url

    @contextlib.contextmanager
    def spawned(self, name: str, port: int, env: dict[str, str]) -> Iterator[str]:
        """:meth:`spawn_gateway` for a module's fixture: the gateway is stopped when it is
        done, so no gateway of one module's settings runs on into the next (holding the
        matchmaker's lease with them, or loading the machine)."""
        url = self.spawn_gateway(name, port, env)
        try:
            yield url
        finally:
            if name in self.stack.processes:
                self.stack.kill(name, signal.SIGTERM)

    def log(self, match_id: str) -> list[Envelope]:
        """A match's log, read straight from Redis."""
        return asyncio.run(read_log(self.redis_url, self.settings, match_id))


@contextlib.contextmanager
def running_gateways(redis_url: str, log_dir: Path | None = None) -> Iterator[Gateways]:
    """Referee, random and greedy house bots, projector, and two gateways (the session's
    ``gateways`` fixture, tests/conftest.py, shared by the gateway and SDK tests); each
    process logs to ``log_dir``/<name>.log when given."""
    settings = Settings(
        redis_url=redis_url,
        prefix=f"g{uuid.uuid4().hex[:10]}",
        partitions=4,
        claim_idle_ms=600,
        log_level="warning",
    )
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}, log_dir=log_dir) as stack:
        g = Gateways(stack, settings, redis_url, "", "")
        g.url = g.spawn_gateway("gateway", free_port(), PLAY_LIMITS)
        g.strict_url = g.spawn_gateway("gateway-strict", free_port(), STRICT_LIMITS)
        wait_served(redis_url, settings, ["random", "greedy"])
        yield g


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def wait_served(
    redis_url: str, settings: Settings, pools: list[str], timeout: float = 60.0
) -> None:
    """Wait until a worker of each house pool has said it serves it: a gateway refuses a
    match seating a pool nobody serves (pool_unavailable), and a loaded machine may answer
    a gateway's health check before a bot worker has started."""

    keys = Keys(settings.prefix, settings.partitions)

    async def served() -> bool:
        redis = client_for(redis_url)
        try:
            deadline = time.monotonic() + timeout
            while not all([await pool_served(redis, keys, pool) for pool in pools]):
                if time.monotonic() > deadline:
                    return False
                await asyncio.sleep(0.1)
            return True
        finally:
            await redis.aclose()

    # in a thread of its own: the caller may be inside an event loop (Playwright's)
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        if not thread.submit(asyncio.run, served()).result():
            pytest.fail(f"no worker of the pools {pools} said it serves them in {timeout} s")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until the gateway answers /healthz; fail if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the gateway exited with status {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)
    pytest.fail(f"the gateway at {url} did not answer in {timeout} s")


def create(url: str, seats: list[str | None], **body: Any) -> str:
    """Create a lobby match; return its id. A house pool whose worker has not announced
    itself yet (a stack just started, on a loaded machine) is waited for, up to 30 s."""
    give_up = time.monotonic() + 30.0
    while True:
        r = httpx.post(f"{url}/api/v1/matches", json={"seats": seats, **body})
        starting = r.status_code == 409 and r.json().get("error") == "pool_unavailable"
        if not starting or time.monotonic() > give_up:
            break
        time.sleep(0.2)
    assert r.status_code == 201, r.text
    match_id: str = r.json()["match"]["match_id"]
    return match_id


def join(url: str, match_id: str, **body: Any) -> tuple[int, str]:
    """Take a seat; return it and its token."""
    r = httpx.post(f"{url}/api/v1/matches/{match_id}/join", json=body)
    assert r.status_code == 201, r.text
    data = r.json()
    return data["seat"], data["token"]


def states_by_version(log: list[Envelope]) -> dict[int, MatchState]:
    """The match's state after each version (0: before the first event is None, left out)."""
    out: dict[int, MatchState] = {}
    state: MatchState | None = None
    for env in log:
        state = evolve(state, env.event)
        out[env.version] = state.copy()
    return out


def wait_for_version(g: Gateways, match_id: str, at_least: int, timeout: float = 10.0) -> int:
    """Poll a match's log until it has ``at_least`` events; return its length."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(g.log(match_id))
        if n >= at_least:
            return n
        if time.monotonic() > deadline:
            pytest.fail(f"match {match_id} stayed at version {n} (< {at_least})")
        time.sleep(0.05)
