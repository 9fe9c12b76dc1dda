"""Run the whole stack as separate processes: referees, bot workers and the projectors.

With a metrics port set (DOMINO_METRICS_PORT), the k-th child started serves its metrics,
health and readiness on that port + k: one port per process, on one host.

Given the URLs of the Redis ACL users (``users``, from the embedded server), each child signs
in as its role's own user: a referee as ``referee``, a pool's bot worker as ``bots-<pool>``,
and so on (services/redis/acl.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from services.config import ENV, Settings
from services.redis.acl import BOTS, user_name


def projector_name(k: int) -> str:
    """The name of a stack's k-th projector, as a child and as a lease holder."""
    return f"projector-{k}" if k else "projector"


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
        projectors: int = 1,
        log_dir: str | Path | None = None,
        gateway: bool = False,
        users: Mapping[str, str] | None = None,
        wrapper: Sequence[str] = (),
    ) -> None:
        self.redis_url = redis_url
        self.users = dict(users or {})
        """Each ACL user's URL; a child whose user is not here gets ``redis_url``."""
        self.settings = settings
        self.referees = referees
        self.pools = {"random": 1, "greedy": 1} if pools is None else pools
        self.projectors = projectors if projector else 0
        """Projector processes: ``projector``, then ``projector-1``, ``projector-2`` …, each
        holding its share of the partitions by lease."""
        self.log_dir = Path(log_dir) if log_dir else None
        self.gateway = gateway  # the HTTP gateway, on DOMINO_GATEWAY_HOST and _PORT
        self.wrapper = tuple(wrapper)
        """The command that runs each child unless :meth:`spawn` is given one (``ip netns
        exec NS``: the stack in a network namespace of its own, say)."""
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.metrics_ports: dict[str, int] = {}
        """Each child's metrics port, in the order they started (none without a port)."""
        self._logs: list[IO[bytes]] = []

    def env(self, user: str | None = None) -> dict[str, str]:
        """The environment of a child: ours, with this stack's Redis (as ``user``, if this
        stack has its URL) and settings."""
        env = dict(os.environ)
        for name, var in ENV.items():
            value = getattr(self.settings, name)
            if value is not None and name != "redis_url":
                env[var] = str(int(value) if isinstance(value, bool) else value)
        env["REDIS_URL"] = self.users.get(user or "", self.redis_url)
        return env

    def spawn(
        self,
        name: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        wrapper: Sequence[str] = (),
        user: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``domino ARGS`` as a child named ``name``, signed in to Redis as ``user``
        (default: the subcommand, ``ARGS[0]``), with ``env`` added to its environment (the
        gateway's limits, say), run by ``wrapper`` if given: a command that runs the rest of
        its command line in its own process (``env VAR=value``, say), so that the signals sent
        to the child reach the service."""
        out: IO[bytes] | int | None = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
            self._logs.append(out)
        child = {**self.env(user or (args[0] if args else None)), **(env or {})}
        if self.settings.metrics_port:
            base = self.settings.metrics_port
            port = self.metrics_ports.setdefault(name, base + len(self.metrics_ports))
            child[ENV["metrics_port"]] = str(port)
        process = subprocess.Popen(
            [*(wrapper or self.wrapper), sys.executable, "-m", "services.cli.main", *args],
            env=child,
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
                    user=user_name(BOTS, pool),
                )
        for k in range(self.projectors):
            name = projector_name(k)
            self.spawn(name, "projector", "--name", name)
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
