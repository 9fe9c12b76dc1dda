"""Where the services find their Redis: ``REDIS_URL``, or an embedded server on a data dir."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from services.config import Settings
from services.redis_env import redis_server

DEFAULT_DATA_DIR = ".domino/redis"
"""Where an embedded Redis keeps its append-only file, relative to the working directory."""


@contextlib.contextmanager
def redis_url(settings: Settings) -> Iterator[str]:
    """Yield the Redis to use: ``REDIS_URL`` if set, else an embedded server whose data lives
    in ``DOMINO_DATA_DIR`` (default ``.domino/redis``), so matches outlive the process."""
    if settings.redis_url:
        yield settings.redis_url
        return
    data_dir = Path(settings.data_dir or DEFAULT_DATA_DIR).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    appendfsync = settings.appendfsync
    with redis_server(appendfsync=appendfsync, data_dir=data_dir, env_var=None) as url:
        yield url
