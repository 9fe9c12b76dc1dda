"""A Redis that a test may kill, pause and start again on the same files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from services.redis.servers import Durability, server_binary


class RedisGone(RuntimeError):
    """Raised when there is no redis-server binary, or a server does not answer in time."""


class RestartableRedis:
    """A redis-server on a fixed port and data dir, with an append-only file, that a test may
    kill (SIGKILL), pause (SIGSTOP) and resume (SIGCONT), and start again on the same files."""

    def __init__(self, directory: Path, appendfsync: Durability = "everysec") -> None:
        binary = server_binary()
        if binary is None:
            raise RedisGone("no redis-server binary (run make install)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self.directory = directory
        self.args = [
            binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(directory),
            "--appendonly", "yes",
            "--appendfsync", appendfsync,
            "--save", "",
            "--logfile", str(directory / "redis.log"),
        ]  # fmt: skip
        self.url = f"redis://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers (its AOF loaded)."""
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL)
        self.paused = False
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(redis.RedisError), redis.Redis.from_url(self.url) as client:
                if client.ping():
                    return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RedisGone(f"redis-server did not come back (see {self.directory})")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: whatever was not yet in the append-only file is lost."""
        if self.process is not None:
            if self.paused:
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait()
            self.process = None
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the server holds every connection and answers nothing until resumed."""
        if self.process is not None and not self.paused:
            os.kill(self.process.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.process is not None and self.paused:
            os.kill(self.process.pid, signal.SIGCONT)
            self.paused = False
