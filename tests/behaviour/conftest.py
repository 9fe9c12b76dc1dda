"""Every behaviour test runs twice: on the in-memory backend and on a real Redis node."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.backends import Backend, memory_backend, redis_backend


@pytest.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest, key_prefix: str) -> AsyncIterator[Backend]:
    """The event store and the message transport of one backend."""
    if request.param == "memory":
        async with memory_backend() as memory:
            yield memory
    else:
        url = request.getfixturevalue("redis_url")
        async with redis_backend(url, key_prefix) as redis:
            yield redis
