"""The planted-entry tests run against a stack of their own (on the node: a planted entry
is handled by the same code whichever Redis holds it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.cli.supervisor import Stack
from services.config import Settings
from tests.gateway.conftest import UNCAPPED, free_port, wait_healthy


@pytest.fixture(scope="session")
def redis_url(topology_url: str) -> str:
    """The suite's service-level tests run on one Redis node and on a Redis Cluster."""
    return topology_url


@dataclass
class Planted:
    """A stack whose Redis a test plants entries in: its settings, gateway and log files."""

    stack: Stack
    settings: Settings
    redis_url: str
    gateway: str
    logs: Path

    def log_text(self, process: str) -> str:
        """What a process has logged so far."""
        path = self.logs / f"{process}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture(scope="module")
def planted(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    """Referee, greedy and random bot workers, the projector and a gateway, logging JSON lines
    to files, under a key prefix of the module's own."""
    logs = tmp_path_factory.mktemp("planted-logs")
    settings = Settings(
        redis_url=redis_url,
        prefix=f"p{uuid.uuid4().hex[:10]}",
        partitions=4,
        claim_idle_ms=600,
        lease_ms=1500,
        watch_ms=1000,
        max_deliveries=3,
        log_level="info",
        log_format="json",
    )
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}, log_dir=logs) as stack:
        port = free_port()
        stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port), env=UNCAPPED)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, stack.processes["gateway"], timeout=60.0)
        yield Planted(stack, settings, redis_url, url, logs)
