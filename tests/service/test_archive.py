"""Storage: finished matches move from Redis to the archive after the retention period, and
everything reads them there exactly as it read them live — domino replay, verify, verify
--fairness, export — while the streams, the notification log and the command ids are trimmed
behind the services, and a rebuild of the projections (folding the match logs, live and
archived) equals the projections as they were kept."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
import pytest

from engine.rules import Rules
from services.cli import jsonl
from services.cli.supervisor import Stack
from services.config import Settings
from services.projections.queries import Queries
from services.store import open_archive
from tests.service.conftest import wait_until_over
from tests.service.test_hosted_matches import create
from tests.support.checks import projection_snapshot
from tests.support.cli import run_domino
from tests.support.topology import client_for

pytestmark = pytest.mark.service


def short_retention(settings: Settings) -> Settings:
    """Matches archived two seconds after they end, everything trimmed as soon as it may be;
    the results not compacted, so that a rebuild's projections equal them key for key
    (tests/service/test_compaction.py checks the compacted table after a rebuild)."""
    return msgspec.structs.replace(
        settings,
        archive_after_s=2.0,
        dedupe_keep_s=1.0,
        log_keep_s=0.5,
        trim_every_s=0.3,
        compact_every_s=0.0,
    )


async def _in_redis(url: str, settings: Settings, match_ids: list[str]) -> dict[str, int]:
    """How many keys of each kind the matches still have in Redis."""
    redis = client_for(url)
    try:
        store_keys = _keys(settings)
        out = {"logs": 0, "dedupe": 0}
        for match_id in match_ids:
            out["logs"] += await redis.exists(store_keys.match(match_id))
            out["dedupe"] += await redis.exists(store_keys.dedupe(match_id))
        return out
    finally:
        await redis.aclose()


async def _stream_lengths(url: str, settings: Settings) -> dict[str, int]:
    redis = client_for(url)
    try:
        k = _keys(settings)
        streams = [k.log(p) for p in range(k.partitions)] + [
            k.commands(p) for p in range(k.partitions)
        ]
        streams += k.all_turns("random") + k.all_turns("greedy")
        return {s: int(await redis.xlen(s)) for s in streams}
    finally:
        await redis.aclose()


def _keys(settings: Settings):  # type: ignore[no-untyped-def]
    from services.store.keys import Keys

    return Keys(settings.prefix, settings.partitions)


def _wait(what: str, check, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.2)


def test_finished_matches_move_to_the_archive_and_read_there_as_they_did_live(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    settings = short_retention(settings)
    specs = [(Rules.make("express", target=30), ["greedy", "random", "greedy", "random"])] * 3
    specs += [(Rules.make("straight", players=2, target=30), ["random", "greedy"])] * 3
    env = Stack(redis_url, settings).env()
    archive = open_archive(settings.archive_at())
    with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}):
        ids = create(redis_url, settings, specs)  # type: ignore[arg-type]
        logs = wait_until_over(redis_url, settings, ids)
        _wait(
            "archiving",
            lambda: asyncio.run(_in_redis(redis_url, settings, ids)) == {"logs": 0, "dedupe": 0},
        )
        assert sorted(asyncio.run(archive.ids())) == sorted(ids)
        _wait(  # behind the services, each stream keeps at most its last entry read
            "trimming",
            lambda: max(asyncio.run(_stream_lengths(redis_url, settings)).values()) <= 1,
        )
        kept = asyncio.run(projection_snapshot(redis_url, settings.prefix))

    match_id = ids[0]
    live = tmp_path / "live.jsonl"
    jsonl.write(live, logs[match_id])
    middle = str(len(logs[match_id]) // 2)  # a short match may have fewer than 30 events
    for args in (["replay"], ["replay", "--seat", "1", "--at", middle], ["verify", "--fairness"]):
        archived = run_domino(*args, match_id, env=env)
        from_file = run_domino(*args, "--file", str(live), env=env)
        assert archived.returncode == from_file.returncode == 0, archived.stderr
        assert archived.stdout == from_file.stdout
    exported = tmp_path / "exported.jsonl"
    done = run_domino("export", match_id, "-o", str(exported), env=env)
    assert done.returncode == 0, done.stderr
    assert exported.read_bytes() == live.read_bytes()
    refused = run_domino("import", str(live), env=env)  # its id is taken, in the archive
    assert refused.returncode == 2 and "already exists" in refused.stderr

    async def results() -> int:
        redis = client_for(redis_url)
        try:
            return sum(line.played for line in await Queries(redis, settings).results())
        finally:
            await redis.aclose()

    assert asyncio.run(results()) == 3 * 4 + 3 * 2  # results stay: the projections keep them
    summaries = [k for k in kept if k.endswith(b":proj:summary:matches")]
    assert all(not kept[k] for k in summaries)  # the archived matches' summaries went
    rebuilt = run_domino("projections", "rebuild", env=env, timeout=120)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert data(asyncio.run(projection_snapshot(redis_url, settings.prefix))) == data(kept)


def data(projections: dict[bytes, object]) -> dict[bytes, object]:
    """The projections' positions and data, without the lists of keys each has ever written
    (what a reset deletes): keys emptied by the archiver stay listed there."""
    return {k: v for k, v in projections.items() if not k.endswith(b":_keys")}
