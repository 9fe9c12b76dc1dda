"""``domino up --cluster``: the whole service on a local Redis Cluster it starts itself, with
three projectors and three bot workers sharing the partitions, seen from outside as an
operator sees it — ``domino status`` and each process's ``/metrics``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from services.redis.embedded import URL_FILE, USERS_FILE
from tests.gateway.conftest import free_port
from tests.support.cli import run_domino
from tests.support.ports import consecutive_free_ports

pytestmark = pytest.mark.service

PARTITIONS = 6
SHARING = 3
"""Projectors, and bot workers of the pool, that ``domino up`` starts: two partitions each."""
EXPORTERS = 2 + 2 * SHARING
"""Metrics ports, in the order the processes start: the referee, the bot workers, the
projectors, the gateway."""


@contextlib.contextmanager
def domino_up_cluster(
    data_dir: Path, metrics_port: int, gateway_port: int
) -> Iterator[subprocess.Popen[str]]:
    """``domino up --cluster`` in its own data dir and on its own gateway port (given as
    options, as a newcomer would), until the end of the block; what it and its children print
    goes to ``up.log`` beside the data dir (a pipe nobody reads while it runs would fill and
    stop them)."""
    env = {
        **os.environ,
        "DOMINO_PARTITIONS": str(PARTITIONS),
        "DOMINO_METRICS_PORT": str(metrics_port),
        "DOMINO_LOG_LEVEL": "warning",
    }
    for name in ("REDIS_URL", "DOMINO_DATA_DIR", "DOMINO_GATEWAY_PORT"):
        env.pop(name, None)
    up = [sys.executable, "-m", "services.cli.main", "up", "--cluster"]
    up += ["--bots", f"random={SHARING}", "--projectors", str(SHARING)]
    options = ["--data-dir", str(data_dir), "--port", str(gateway_port)]
    with open(_log_of(data_dir), "w") as out:
        process = subprocess.Popen(
            [*up, *options],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        _stop(process)


def _log_of(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}-up.log"


def _stop(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def domino(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Another ``domino`` command started on the same data dir (no REDIS_URL)."""
    env = {**os.environ, "DOMINO_DATA_DIR": str(data_dir), "DOMINO_PARTITIONS": str(PARTITIONS)}
    env.pop("REDIS_URL", None)
    return run_domino(*args, env=env)


def test_domino_up_cluster_serves_metrics_and_domino_status_reads_the_cluster(
    tmp_path: Path,
) -> None:
    """The supervisor forms a cluster of 3 masters with a replica each, runs every process on
    it, and writes where it is; matches created then are played; ``domino status`` started in
    the same data dir reports every partition leased — the referee's, and the three
    projectors' and the three bot workers' even shares — and the moves, and every process's
    ``/metrics`` counts them."""
    base = consecutive_free_ports(EXPORTERS)
    gateway = free_port()
    with domino_up_cluster(tmp_path, base, gateway) as up:
        deadline = time.monotonic() + 60
        while not (tmp_path / URL_FILE).exists():
            if up.poll() is not None:
                _fail_with_output(up, tmp_path, "domino up exited")
            assert time.monotonic() < deadline, "no cluster came up"
            time.sleep(0.2)
        created = domino(tmp_path, "create", "--players", "2", "--seats", "random,random")
        assert created.returncode == 0, created.stderr
        deadline = time.monotonic() + 60  # for the processes to start, lease and play
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            run = domino(tmp_path, "status", "--json", "--interval", "0.5")
            assert run.returncode == 0, run.stderr
            status = json.loads(run.stdout)
            if _all_leased(status) and _moved(base):
                break
            time.sleep(0.5)
        if not _all_leased(status):
            _fail_with_output(up, tmp_path, f"not every partition leased after 60 s: {status}")
        referee = httpx.get(f"http://127.0.0.1:{base}/metrics", timeout=5).text
        assert "domino_moves_decided_total" in referee
        assert _moved(base)
        for offset in range(1, EXPORTERS):  # bots, projectors, gateway: each its own exporter
            assert _ready(base + offset, time.monotonic() + 30), offset
        assert httpx.get(f"http://127.0.0.1:{gateway}/healthz", timeout=5).status_code == 200
        operator = (tmp_path / URL_FILE).read_text().strip()
        with redis.Redis.from_url(operator) as node:
            info = node.cluster("INFO")
            assert node.connection_pool.connection_kwargs["username"] == "operator"
        assert info["cluster_size"] == "3" and info["cluster_known_nodes"] == "6"
        users = json.loads((tmp_path / USERS_FILE).read_text())
        assert {"referee", "bots-random", "projector", "gateway", "operator"} <= set(users)
    output = up.stdout.read() if up.stdout else ""
    assert "NOPERM" not in output, output[-3000:]  # every process had what its role needs


def _fail_with_output(up: subprocess.Popen[str], data_dir: Path, why: str) -> None:
    """Stop ``domino up`` and fail with the last lines it and its children printed."""
    _stop(up)
    lines = _log_of(data_dir).read_text(errors="replace").splitlines()[-60:]
    pytest.fail(f"{why}\n--- domino up printed (last 60 lines):\n" + "\n".join(lines))


def _ready(port: int, deadline: float) -> bool:
    """Whether the exporter on ``port`` says ready before ``deadline`` (it may start late)."""
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return True
        time.sleep(0.2)
    return False


def _all_leased(status: dict[str, object]) -> bool:
    """Every partition's referee lease held, and the projectors' and the pool's bot workers'
    leases each shared evenly by all three of them."""
    partitions = status.get("partitions")
    listed = status.get("roles")
    roles = {r["role"]: r for r in listed} if isinstance(listed, list) else {}
    return (
        isinstance(partitions, list)
        and len(partitions) == PARTITIONS
        and all(isinstance(p, dict) and p.get("owner") for p in partitions)
        and all(_shared(roles.get(role)) for role in ("projector", "bots-random"))
    )


def _shared(role: dict[str, Any] | None) -> bool:
    """Whether every partition of ``role`` is held, by :data:`SHARING` processes, evenly."""
    if role is None:
        return False
    holders = Counter(lease["holder"] for lease in role["leases"])
    return (
        None not in holders
        and len(holders) == SHARING
        and max(holders.values()) - min(holders.values()) <= 1
    )


def _moved(base: int) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        text = httpx.get(f"http://127.0.0.1:{base}/metrics", timeout=5).text
        for line in text.splitlines():
            if line.startswith("domino_moves_decided_total{") and float(line.split()[-1]) > 0:
                return True
    return False
