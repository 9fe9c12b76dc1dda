"""A test that needs a system tool this machine lacks: skipped on a developer's machine, a
failure under CI (``CI`` set), which installs every tool the tests use (.ci/run), so that a
failed install never passes as a green run with tests left out."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's."""
    return bool(os.environ.get("CI"))


def missing(reason: str) -> NoReturn:
    """Skip the test for want of a tool (``reason`` says which and how to install it); fail
    it under CI."""
    if in_ci():
        pytest.fail(f"CI lacks a tool the tests need: {reason}")
    pytest.skip(reason)
