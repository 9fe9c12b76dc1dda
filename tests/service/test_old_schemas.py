"""A log written in an older schema reads as the current one on every path the ``domino``
command reads it by — an exported file, the match in Redis, the match in the archive — and
is written again only in the current schema (events/upcast.py; schema 0 is the worked
example). A log holding an event of a newer schema is refused, naming the schema."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from events.codec import JSON
from events.envelope import SCHEMA, Envelope
from services.cli.supervisor import Stack
from services.config import Settings
from services.store import open_archive
from services.store.archive import encode_log
from services.store.base import Recorded
from services.store.redis import RedisEventStore
from tests.support import schema0
from tests.support.cli import run_domino
from tests.support.topology import client_for

pytestmark = pytest.mark.service


def domino(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_domino(*args, env=Stack(settings.redis_url or "", settings).env())


def old_file(path: Path, log: list[Envelope]) -> Path:
    path.write_bytes(b"".join(schema0.downcast(e) + b"\n" for e in log))
    return path


async def _store_old(url: str, settings: Settings, match_id: str) -> list[Envelope]:
    log = schema0.played(match_id)
    client = client_for(url)
    try:
        store = RedisEventStore(client, partitions=settings.partitions, prefix=settings.prefix)
        await store.append(match_id, schema0.stored(log), 0, "written-by-schema-0")
    finally:
        await client.aclose()
    return log


def _exported(settings: Settings, match_id: str, path: Path) -> list[bytes]:
    done = domino(settings, "export", match_id, "-o", str(path))
    assert done.returncode == 0, done.stderr
    return path.read_bytes().splitlines()


def test_an_old_export_verifies_replays_and_imports_as_the_current_schema(
    settings: Settings, tmp_path: Path
) -> None:
    log = schema0.played("m-old-file")
    old = old_file(tmp_path / "old.jsonl", log)
    for args in (["verify", "--file", str(old)], ["replay", "--file", str(old), "--json"]):
        done = domino(settings, *args)
        assert done.returncode == 0, (args, done.stderr)
    replayed = domino(settings, "replay", "--file", str(old), "--json").stdout
    current = domino(settings, "replay", "--file", str(_current(tmp_path, log)), "--json").stdout
    assert replayed == current
    done = domino(settings, "import", str(old))
    assert done.returncode == 0, done.stderr
    assert _exported(settings, "m-old-file", tmp_path / "out.jsonl") == [
        JSON.encode(e) for e in log
    ]  # written again in the current schema only


def _current(tmp_path: Path, log: list[Envelope]) -> Path:
    path = tmp_path / "current.jsonl"
    path.write_bytes(b"".join(JSON.encode(e) + b"\n" for e in log))
    return path


def test_an_old_match_in_redis_and_in_the_archive_reads_as_the_current_schema(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    log = asyncio.run(_store_old(redis_url, settings, "m-old-redis"))
    assert _exported(settings, "m-old-redis", tmp_path / "redis.jsonl") == [
        JSON.encode(e) for e in log
    ]
    archived = schema0.played("m-old-arch")
    records = [
        Recorded("m-old-arch", e.version, e.event.__struct_config__.tag, schema0.downcast(e))
        for e in archived
    ]
    asyncio.run(open_archive(settings.archive_at()).put("m-old-arch", encode_log(records)))
    assert _exported(settings, "m-old-arch", tmp_path / "archive.jsonl") == [
        JSON.encode(e) for e in archived
    ]
    done = domino(settings, "verify", "m-old-arch")
    assert done.returncode == 0, done.stderr


def test_a_log_holding_a_newer_schema_is_refused_naming_it(
    redis_url: str, settings: Settings, tmp_path: Path
) -> None:
    log = schema0.played("m-newer-file")
    lines = [JSON.encode(e) for e in log]
    lines[4] = schema0.newer(log[4])
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(b"\n".join(lines) + b"\n")
    for args in (["verify", "--file", str(newer)], ["import", str(newer)]):
        done = domino(settings, *args)
        assert done.returncode != 0, args
        assert "line 5: invalid message" not in done.stderr
        assert f"schema {SCHEMA + 1} is newer than this reader's ({SCHEMA})" in done.stderr
