"""Run the whole stack as separate processes: referees, bot workers and the projector.

With a metrics port set (DOMINO_METRICS_PORT), the k-th child started serves its metrics,
health and readiness on that port + k: one port per process, on one host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from services.config import ENV, Settings


class Stack:
    """Child processes of the service, each a ``domino`` subcommand, stopped together."""

    def __init__(
        self,
        redis_url: str,
        settings: Settings,
        *,
        referees: int = 1,
        pools: dict[str, int] | None = None,
        projector: bool = True,
        log_dir: str | Path | None = None,
        gateway: bool = False,
    ) -> None:
        self.redis_url = redis_url
        self.settings = settings
        self.referees = referees
        self.pools = {"random": 1, "greedy": 1} if pools is None else pools
        self.projector = projector
        self.log_dir = Path(log_dir) if log_dir else None
        self.gateway = gateway  # the HTTP gateway, on DOMINO_GATEWAY_HOST and _PORT
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.metrics_ports: dict[str, int] = {}
        """Each child's metrics port, in the order they started (none without a port)."""
        self._logs: list[IO[bytes]] = []

    def env(self) -> dict[str, str]:
        """The environment of a child: ours, with this stack's Redis and settings."""
        env = dict(os.environ)
        for name, var in ENV.items():
            value = getattr(self.settings, name)
            if value is not None and name != "redis_url":
                env[var] = str(int(value) if isinstance(value, bool) else value)
        env["REDIS_URL"] = self.redis_url
        return env

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        """Start ``domino ARGS`` as a child named ``name``."""
        out: IO[bytes] | int | None = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
            self._logs.append(out)
        env = self.env()
        if self.settings.metrics_port:
            base = self.settings.metrics_port
            port = self.metrics_ports.setdefault(name, base + len(self.metrics_ports))
            env[ENV["metrics_port"]] = str(port)
        process = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            stdin=subprocess.DEVNULL,
        )
        self.processes[name] = process
        return process

    def start(self) -> None:
        """Start every process of the stack."""
        for k in range(self.referees):
            self.spawn(f"referee-{k}", "referee", "--name", f"referee-{k}")
        for pool, workers in self.pools.items():
            for k in range(workers):
                self.spawn(
                    f"bots-{pool}-{k}",
                    "bots",
                    "--strategy",
                    pool,
                    "--workers",
                    "1",
                    "--name",
                    f"{pool}-{k}",
                )
        if self.projector:
            self.spawn("projector", "projector")
        if self.gateway:
            self.spawn("gateway", "gateway")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one child and wait for it to exit."""
        process = self.processes.pop(name)
        process.send_signal(sig)
        process.wait()

    def check(self) -> list[str]:
        """Names of children that have exited."""
        return [n for n, p in self.processes.items() if p.poll() is not None]

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every child, wait for them, SIGKILL any still running after ``timeout``."""
        for p in self.processes.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.processes.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self._logs:
            f.close()
        self._logs.clear()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
