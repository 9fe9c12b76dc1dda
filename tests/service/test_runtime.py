"""The embedded Redis: one server per data dir, found again by every command started there."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from services.config import Settings
from services.redis.embedded import URL_FILE, redis_url

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
                client.set("kept", "yes")
    assert not (tmp_path / "redis" / URL_FILE).exists()
    with redis_url(settings) as again, redis.Redis.from_url(again) as client:
        assert client.get("kept") == b"yes"  # the data outlived the server (AOF)


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
