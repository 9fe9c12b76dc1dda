"""Where the services find their Redis: ``REDIS_URL``, or an embedded server on a data dir.

One embedded server serves a data dir at a time: while it runs, its URL is written in the
data dir (``server.url``), and any other ``domino`` command started there without
``REDIS_URL`` uses that server instead of starting a second one on the same files.

``domino up --cluster`` embeds a local Redis Cluster instead (3 masters with a replica each,
in the data dir's ``cluster/``, formed anew at each start): its first node's URL is written
the same way, so ``domino status`` and the other commands started there find it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import redis

from services.config import DEFAULT_DATA_DIR, Settings
from services.redis.servers import local_cluster, private_server

URL_FILE = "server.url"
CLUSTER_DIR = "cluster"


@contextlib.contextmanager
def redis_url(settings: Settings, *, cluster: bool = False) -> Iterator[str]:
    """Yield the Redis to use: ``REDIS_URL`` if set; else the embedded server already running
    on ``DOMINO_DATA_DIR`` (default :data:`DEFAULT_DATA_DIR`); else a new embedded server there, so
    matches outlive the process — or, with ``cluster``, a new local Redis Cluster there, whose
    matches last as long as it runs."""
    if settings.redis_url:
        yield settings.redis_url
        return
    data_dir = embedded_data_dir(settings)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)  # every hand and every stock order is in there: the owner's alone
    with open(data_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time decides who serves the dir
        running = _running(data_dir)
        if running is None:
            password = secrets.token_urlsafe(24)  # other local users cannot connect
            server: contextlib.AbstractContextManager[str] = (
                _cluster(data_dir / CLUSTER_DIR, settings, password)
                if cluster
                else private_server(
                    appendfsync=settings.appendfsync, data_dir=data_dir, password=password
                )
            )
            url = server.__enter__()
            _write_private(data_dir / URL_FILE, url)
        fcntl.flock(lock, fcntl.LOCK_UN)
    if running is not None:
        yield running
        return
    try:
        yield url
    finally:
        (data_dir / URL_FILE).unlink(missing_ok=True)
        server.__exit__(None, None, None)


@contextlib.contextmanager
def _cluster(directory: Path, settings: Settings, password: str) -> Iterator[str]:
    """A local cluster of 3 masters with a replica each in ``directory``; its first URL."""
    appendfsync = settings.appendfsync
    with local_cluster(
        3, replicas=1, appendfsync=appendfsync, directory=directory, password=password
    ) as nodes:
        yield nodes.urls[0]


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (the URL carries the server's password)."""
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)


def embedded_data_dir(settings: Settings) -> Path:
    """Where an embedded Redis keeps its files: ``DOMINO_DATA_DIR``, else the default, resolved."""
    return Path(settings.data_dir or DEFAULT_DATA_DIR).resolve()


def _running(data_dir: Path) -> str | None:
    """The URL of the embedded server serving ``data_dir``, if one answers."""
    try:
        url = (data_dir / URL_FILE).read_text().strip()
    except OSError:
        return None
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=0.5) as client:
            served = client.config_get("dir").get("dir")  # the very server, not a reused port
    except (redis.RedisError, ValueError):
        return None
    if not served:
        return None
    where = Path(served).resolve()
    return url if where == data_dir or where.is_relative_to(data_dir / CLUSTER_DIR) else None
