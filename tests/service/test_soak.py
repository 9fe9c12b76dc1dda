"""Storage, the short soak: matches at a steady rate for 45 s with the retention period at
5 s, passed several times over; once it has passed twice, Redis's key count and
memory and every process's RSS stop growing (tests/soak.py has the long form: `make soak`)."""

from __future__ import annotations

import io

import pytest

from tests import soak
from tests.support.topology import is_cluster_url

pytestmark = [pytest.mark.service]
"""Trimming and archiving work per partition, the same on both topologies (the long form runs
on a cluster with `python -m tests.soak --cluster`): the short form runs on the node only."""


def test_redis_memory_and_every_process_stay_flat_once_retention_has_passed(
    redis_url: str,
) -> None:
    out = io.StringIO()
    samples, verdict = soak.run(
        seconds=45, rate=1.5, retention=5.0, every=2.0, cluster=is_cluster_url(redis_url),
        out=out, url=redis_url,
    )  # fmt: skip
    assert verdict.flat, out.getvalue()
    last = samples[-1]
    # archived about as fast as they finish: behind by the retention period and a little
    assert last.archived >= 30, out.getvalue()
    assert last.created - last.archived <= 1.5 * (5 + 45), out.getvalue()
    keys = verdict.figures["redis_keys"]
    assert keys["change"] <= 100, out.getvalue()
