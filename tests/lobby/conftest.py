"""This suite runs on one Redis node and on a Redis Cluster."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def redis_url(topology_url: str) -> str:
    """This suite runs on one Redis node and on a Redis Cluster (tests/conftest.py)."""
    return topology_url
