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
