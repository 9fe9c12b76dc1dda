"""A real hosted stack for service tests: the session's Redis, and referee, bot worker and
projector processes started with a key prefix of their own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.game import evolve
from engine.state import MatchState
from events.codec import JSON
from events.envelope import Envelope
from services.cli.supervisor import Stack
from services.config import Settings
from services.store import open_archive
from services.store.redis import RedisEventStore
from tests.support.topology import client_for


@pytest.fixture(scope="session")
def redis_url(topology_url: str) -> str:
    """This suite runs on one Redis node and on a Redis Cluster (tests/conftest.py)."""
    return topology_url


@pytest.fixture
def settings(redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    """Settings for one test's stack: its own key prefix and archive, quick reclaiming."""
    return Settings(
        redis_url=redis_url,
        prefix=key_prefix,
        partitions=4,
        claim_idle_ms=600,
        lease_ms=1500,
        log_level="warning",
        archive=str(tmp_path / "archive"),
    )


@pytest.fixture
def stack(redis_url: str, settings: Settings, tmp_path: object) -> Iterator[Stack]:
    """Referee, one random and one greedy bot worker, and the projector, as processes."""
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}) as s:
        yield s


async def read_log(url: str, settings: Settings, match_id: str) -> list[Envelope]:
    """Every envelope of a match, in order: from Redis, or from the settings' archive once the
    projector has moved the finished match there (a test that looks late still finds it)."""
    redis = client_for(url)
    try:
        store = RedisEventStore(redis, partitions=settings.partitions, prefix=settings.prefix)
        records = await store.read(match_id)
    finally:
        await redis.aclose()
    if not records and settings.archive:
        records = await open_archive(settings.archive, settings.archive_s3_endpoint).read(match_id)
    return [JSON.decode_envelope(r.data) for r in records]


def describe(url: str, settings: Settings, match_id: str) -> str:
    """Where a match that has not ended stands: its version, last events and seat to move."""
    log = asyncio.run(read_log(url, settings, match_id))
    if not log:
        return f"{match_id}: no events"
    state = fold(log)
    last = [e.event.__struct_config__.tag for e in log[-3:]]
    return f"{match_id}: version {len(log)}, {state.phase}, seat {state.turn} to move after {last}"


def fold(log: list[Envelope]) -> MatchState:
    """The state at the end of a log."""
    state: MatchState | None = None
    for env in log:
        state = evolve(state, env.event)
    assert state is not None
    return state


def wait_until_over(
    url: str, settings: Settings, match_ids: list[str], timeout: float = 60.0
) -> dict[str, list[Envelope]]:
    """Poll the logs until every match has ended; return them. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    logs: dict[str, list[Envelope]] = {}
    pending = list(match_ids)
    while pending:
        for match_id in list(pending):
            log = asyncio.run(read_log(url, settings, match_id))
            if log and log[-1].event.__struct_config__.tag == "match_ended":
                logs[match_id] = log
                pending.remove(match_id)
        if pending and time.monotonic() > deadline:
            stuck = "; ".join(describe(url, settings, m) for m in pending[:3])
            pytest.fail(f"{len(pending)} matches did not finish in {timeout} s: {stuck}")
        time.sleep(0.1)
    return logs
