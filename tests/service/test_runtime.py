"""The embedded Redis: one server per data dir, found again by every command started there."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from services.config import Settings
from services.redis.embedded import URL_FILE, redis_url
from services.redis.servers import bundled_server_binary

pytestmark = pytest.mark.service


def test_a_second_command_uses_the_embedded_server_already_running_on_the_data_dir(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=str(tmp_path / "redis"), appendfsync="everysec")
    with redis_url(settings) as first:
        assert (tmp_path / "redis" / URL_FILE).read_text() == first
        with redis_url(settings) as second:
            assert second == first
            with redis.Redis.from_url(second) as client:
                client.set("dom:kept", "yes")
    assert not (tmp_path / "redis" / URL_FILE).exists()
    with redis_url(settings) as again, redis.Redis.from_url(again) as client:
        assert client.get("dom:kept") == b"yes"  # the data outlived the server (AOF)


def test_transactions_and_scripts_outlive_a_restart_of_the_embedded_server(
    tmp_path: Path,
) -> None:
    """Every event is appended in a transaction or a script: the server's append-only file
    replays them at the next start (a server with its default user off dropped them all)."""
    settings = Settings(data_dir=str(tmp_path / "redis"), appendfsync="everysec")
    with redis_url(settings) as url, redis.Redis.from_url(url) as client:
        with client.pipeline(transaction=True) as pipe:
            pipe.set("dom:in-multi", "a").set("dom:in-multi-too", "b").execute()
        client.eval("redis.call('SET', KEYS[1], ARGV[1])", 1, "dom:by-script", "c")
    with redis_url(settings) as again, redis.Redis.from_url(again) as client:
        kept = client.mget("dom:in-multi", "dom:in-multi-too", "dom:by-script")
        assert kept == [b"a", b"b", b"c"]


def test_a_stale_url_file_pointing_at_another_server_is_ignored(
    tmp_path: Path, redis_url_fixture: str
) -> None:
    data_dir = tmp_path / "redis"
    data_dir.mkdir()
    (data_dir / URL_FILE).write_text(redis_url_fixture)  # a live Redis, but not this dir's
    with redis_url(Settings(data_dir=str(data_dir))) as url:
        assert url != redis_url_fixture


@pytest.fixture
def redis_url_fixture(redis_url: str) -> str:
    """The session's private Redis (serving another directory)."""
    return redis_url


def test_the_embedded_server_is_its_owners_alone(tmp_path: Path) -> None:
    """Found by a hostile look at the machine: the embedded Redis took any local client (and
    its CONFIG SET dir + SAVE writes files), and its data dir — every hand and stock order —
    was world-readable. Now it wants a password, kept in a file only the owner reads and
    never on a command line, and the data dir is the owner's alone."""
    data_dir = tmp_path / "redis"
    with redis_url(Settings(data_dir=str(data_dir))) as url:
        parsed = redis.connection.parse_url(url)
        password = parsed["password"]
        assert password and len(password) >= 24
        stranger = redis.Redis(host=parsed["host"], port=parsed["port"])
        with pytest.raises(redis.AuthenticationError):
            stranger.ping()
        with pytest.raises(redis.AuthenticationError):
            stranger.config_set("dir", "/tmp")
        with redis.Redis.from_url(url) as owner:
            assert owner.ping()
        assert data_dir.stat().st_mode & 0o777 == 0o700
        assert (data_dir / URL_FILE).stat().st_mode & 0o777 == 0o600
        command_lines = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                command_lines.append(cmdline.read_bytes())
            except OSError:  # the process ended meanwhile
                continue
        assert not any(password.encode() in c for c in command_lines)


def private_modes(root: Path) -> list[str]:
    """Every file under ``root`` not 0600 and every directory not 0700, with its mode."""
    wrong = []
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong.append(f"{path.relative_to(root)}: {oct(mode)}")
    return wrong


@pytest.mark.parametrize(
    ("cluster", "bundled"),
    [(False, False), (False, True), (True, False)],
    ids=["node", "node-6.2", "cluster"],
)
def test_every_file_redis_writes_in_the_data_dir_is_the_owners_alone(
    tmp_path: Path, cluster: bool, bundled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its append-only files, its log, a cluster's nodes.conf, the RDB a shutdown saves: 0600
    in directories 0700, as the URLs and the users' file beside them."""
    if bundled:
        monkeypatch.setenv("REDIS_SERVER_BIN", bundled_server_binary() or "")
    data_dir = tmp_path / "redis"
    settings = Settings(data_dir=str(data_dir), appendfsync="everysec")
    with redis_url(settings, cluster=cluster) as url:
        kind = redis.RedisCluster if cluster else redis.Redis
        with kind.from_url(url) as client:
            for n in range(20):
                client.set(f"dom:{{p{n}}}:x", "secret")
        written = {p.name for p in data_dir.rglob("*")}
        assert {URL_FILE, "server.users", "redis.log"} <= written
        assert "nodes.conf" in written if cluster else any(".aof" in n for n in written)
        assert not private_modes(data_dir)
    assert not private_modes(data_dir)  # and what it saved on its way out
