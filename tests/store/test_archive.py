"""The archive: a finished match's log as one compressed JSON-lines object, in a directory or
on an S3-compatible server (moto's standalone server here); written and checked, a repeated
write a no-op, another log under an archived id refused."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.rules import Rules
from engine.strategy import RandomStrategy
from events.codec import JSON
from services.core.local_match import play_local_match
from services.store import open_archive
from services.store.archive import (
    Archive,
    ArchiveError,
    decode_log,
    encode_log,
    object_name,
    page_name,
)
from services.store.base import Recorded
from services.store.memory import MemoryEventStore
from services.store.source import MatchSource
from tests.support.s3 import CREDENTIALS, new_bucket, s3_server

pytestmark = [pytest.mark.store, pytest.mark.anyio]


def records(match_id: str) -> list[Recorded]:
    rules = Rules.make("straight", players=2)
    log = play_local_match(rules, [RandomStrategy(1), RandomStrategy(2)], seed=3, match_id=match_id)
    return [
        Recorded(match_id, e.version, str(e.event.__struct_config__.tag), JSON.encode(e))
        for e in log[1]
    ]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        with s3_server() as endpoint:
            yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(params=["directory", "s3"])
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Archive:
    if request.param == "directory":
        return open_archive(str(tmp_path / "archive"))
    endpoint: str = request.getfixturevalue("s3_endpoint")
    return open_archive(f"s3://{new_bucket(endpoint)}/matches", endpoint)


def test_an_archived_log_is_the_export_format_compressed() -> None:
    """README (export format): one envelope a line, versions 1, 2, 3 … in order."""
    log = records("m-1")
    data = encode_log(log)
    lines = gzip.decompress(data).split(b"\n")
    assert lines[-1] == b"" and [JSON.decode_envelope(x).version for x in lines[:-1]] == list(
        range(1, len(log) + 1)
    )
    assert decode_log("m-1", data) == log
    assert encode_log(log) == data  # the same log compresses to the same bytes


def test_every_match_id_has_a_file_name_of_its_own() -> None:
    names = {object_name(m) for m in ("m-1", "../etc", "a/b", "%41", "A", "a", ".x")}
    assert len(names) == 7
    assert all(part not in ("", ".", "..") for n in names for part in n.split("/"))


async def test_a_match_is_archived_read_back_and_listed(archive: Archive) -> None:
    log = records("m-arch/1")
    await archive.put("m-arch/1", encode_log(log), b'{"lobby":1}')
    assert await archive.read("m-arch/1") == log
    assert await archive.extra("m-arch/1") == b'{"lobby":1}'
    assert await archive.exists("m-arch/1") and not await archive.exists("m-none")
    assert await archive.read("m-none") == [] and await archive.extra("m-none") is None
    assert await archive.ids() == ["m-arch/1"]


async def test_a_players_pages_are_listed_in_order_written_again_whole_and_no_matches(
    archive: Archive,
) -> None:
    """The compacted results' pages (services/projections/compaction.py): one per compaction a
    player was in, named by its checkpoint; a compaction finished after a crash writes a page
    again whole."""
    await archive.put("m-arch/1", encode_log(records("m-arch/1")))
    names = [page_name(1_700_000_000 + i / 10, f"m-{i}") for i in range(3)]
    for name in reversed(names):
        await archive.put_page("guest:Zoë /x", name, name.encode())
    await archive.put_page("guest:Zoë /x", names[0], b"again")
    assert await archive.pages("guest:Zoë /x") == names
    assert await archive.page("guest:Zoë /x", names[0]) == b"again"
    assert await archive.pages("house:greedy") == []
    assert await archive.page("house:greedy", names[0]) is None
    assert await archive.ids() == ["m-arch/1"]  # the pages are no matches


async def test_archiving_again_is_a_no_op_and_another_log_is_refused(archive: Archive) -> None:
    """Crash-safe moving: a retry after a crash writes the same bytes again, harmlessly; a
    different log under an archived id is a bug or tampering, never overwritten."""
    log = records("m-2")
    await archive.put("m-2", encode_log(log))
    await archive.put("m-2", encode_log(log))
    with pytest.raises(ArchiveError):
        await archive.put("m-2", encode_log(log[:-1]))
    assert await archive.read("m-2") == log


async def test_a_source_reads_redis_first_and_the_archive_once_redis_has_no_log(
    archive: Archive,
) -> None:
    store = MemoryEventStore(partitions=2)
    log = records("m-3")
    await archive.put("m-3", encode_log(log))
    source = MatchSource(store, archive)
    assert await source.version("m-3") == len(log)
    assert await source.read("m-3", 2, 4) == log[1:4]
    assert await source.read("m-3", len(log) + 1) == []
    assert await source.archived("m-3")
    assert await source.version("m-unknown") == 0 and await source.read("m-unknown") == []


def test_a_corrupt_archived_log_is_an_archive_error() -> None:
    with pytest.raises(ArchiveError):
        decode_log("m-1", b"not gzip")
    with pytest.raises(ArchiveError):
        decode_log("m-1", gzip.compress(b'{"no":"event"}\n'))
