"""The parts of a test on a network of their own (tests/support/netns.py): needs root."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.netns import Network, network, require_netns

LONG = os.environ.get("DOMINO_NETNS_LONG") == "1"
"""DOMINO_NETNS_LONG=1: the long forms (more matches, every delay, several runs)."""


@pytest.fixture
def net() -> Iterator[Network]:
    """A network of namespaces for one test, deleted when it ends, however it ends."""
    require_netns()
    with network() as made:
        yield made
