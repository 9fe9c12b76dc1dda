"""The archive: where finished matches go once they have been in Redis for the retention period.

A match is archived as one object: its log in the export format (JSON lines, one envelope a
line, versions 1, 2, 3 … — what ``domino export`` writes), gzip-compressed, so that reading one
match is one read and one decompression. Beside it an archive may keep a small JSON document
about the match (the lobby record the gateway answered with while the match was in Redis).

Two backends: :class:`DirectoryArchive` (the default: files under a directory, fanned out by a
hash of the match id so no directory grows past a few hundred entries a year) and
:class:`services.store.s3.S3Archive` (an S3-compatible object store, with boto3 installed: the
``s3`` extra). Writing is made safe to repeat: :meth:`Archive.put` writes the object, reads it
back and checks it is what was written, and a second ``put`` of the same bytes is a no-op; a
``put`` of different bytes under an id already archived is refused (a finished match's log
never changes, so that would be a bug or tampering, not a retry).

Beside the matches, the archive keeps each player's older results, as pages: once the ratings
are compacted (services/projections/compaction.py) their results leave Redis, and each
compaction writes, for every player in it, one page of the player's results it folded, named
by the compaction's checkpoint (``players/ab/<sha256 of the player's key>/<page>.json``). A
page is written whole, and written again with the same bytes when a compaction is finished
after a crash.
"""

from __future__ import annotations

import abc
import asyncio
import gzip
import hashlib
import os
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path

from services.store.base import Recorded
from services.store.errors import StoreError
from services.store.keys import validate_match_id

SUFFIX = ".jsonl.gz"
"""The ending of an archived log's name."""
EXTRA = ".json"
"""The ending of the document kept beside it."""
PLAYERS = "players"
"""The folder of the players' pages of older results."""
_PLAIN = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*")
_PAGE = re.compile(r"[0-9]{20}-[A-Za-z0-9%._~=\-]{1,160}")
_PAGE_ID = 160
"""The longest match id a page's name holds as it is (quoted); a longer one by its hash."""


class ArchiveError(StoreError):
    """Raised when the archive cannot store or read a match: a copy that does not read back
    as written, a different log already archived under the id, or an unreadable object."""


def encode_log(records: Sequence[Recorded]) -> bytes:
    """The archived form of a match's log: its envelopes as JSON lines, gzip-compressed
    (``mtime`` 0, so the same log always compresses to the same bytes)."""
    lines = b"".join(bytes(r.data) + b"\n" for r in records)
    return gzip.compress(lines, compresslevel=6, mtime=0)


def decode_log(match_id: str, data: bytes) -> list[Recorded]:
    """The records of an archived log; raises ArchiveError when it is not one (corrupt,
    truncated, or versions that do not run 1, 2, 3 …)."""
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError) as e:
        raise ArchiveError(f"archived log of {match_id!r} is not gzip: {e}") from None
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out: list[Recorded] = []
    for version, line in enumerate(lines, 1):
        kind = _event_type(line)
        if kind is None:
            raise ArchiveError(f"archived log of {match_id!r}: line {version} has no event type")
        out.append(Recorded(match_id, version, kind, line))
    return out


_TYPE = re.compile(rb'"event":\{"type":"([a-z_]{1,40})"')


def _event_type(line: bytes) -> str | None:
    """The event type of an envelope's JSON, read without decoding it (the codec checks the
    rest when the record is used)."""
    found = _TYPE.search(line)
    return None if found is None else found.group(1).decode()


def object_name(match_id: str) -> str:
    """Where a match's log lies under the archive's root: two levels of a hash of its id, then
    the id itself (percent-encoded when it holds anything but letters, digits and ``._-``)."""
    validate_match_id(match_id)
    digest = hashlib.sha256(match_id.encode()).hexdigest()
    name = match_id if _PLAIN.fullmatch(match_id) else "%" + urllib.parse.quote(match_id, safe="")
    return f"{digest[:2]}/{digest[2:4]}/{name}"


def player_folder(identity: str) -> str:
    """Where a player's pages lie under the archive's root (a hash of the player's key, so
    any key makes a plain name)."""
    digest = hashlib.sha256(identity.encode()).hexdigest()
    return f"{PLAYERS}/{digest[:2]}/{digest}"


def check_page(page: str) -> str:
    """``page`` when it is a page's name (:func:`page_name`); raises ArchiveError otherwise."""
    if not _PAGE.fullmatch(page):
        raise ArchiveError(f"not a page of a player's results: {page[:100]!r}")
    return page


def page_name(ended: float, match_id: str) -> str:
    """The name of a page ending at the checkpoint (``ended``, ``match_id``): names sort as
    their checkpoints (the time to the microsecond, then the id)."""
    name = urllib.parse.quote(match_id, safe="")
    if len(name) > _PAGE_ID:  # a file name has room for 255 bytes
        name = "=" + hashlib.sha256(match_id.encode()).hexdigest()
    return f"{round(ended * 1_000_000):020d}-{name}"


def page_time(page: str) -> float:
    """The time (s) of the checkpoint a page ends at, to the microsecond."""
    return int(check_page(page)[:20]) / 1_000_000


def match_of(name: str) -> str | None:
    """The match id an object's file name (without its directories) stands for, or None."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    return urllib.parse.unquote(stem[1:]) if stem.startswith("%") else stem


class Archive(abc.ABC):
    """Finished matches' logs out of Redis, one object each."""

    @abc.abstractmethod
    async def put(self, match_id: str, log: bytes, extra: bytes | None = None) -> None:
        """Store a match's archived log (:func:`encode_log`) and its ``extra`` document, and
        check that it reads back as written; a repeated ``put`` of the same log is a no-op.
        Raises ArchiveError when the copy does not read back or another log is archived under
        the id."""

    @abc.abstractmethod
    async def get(self, match_id: str) -> bytes | None:
        """A match's archived log as stored, None when it is not archived."""

    @abc.abstractmethod
    async def extra(self, match_id: str) -> bytes | None:
        """The document kept beside a match's log, None when there is none."""

    @abc.abstractmethod
    async def ids(self) -> list[str]:
        """Every archived match id (for rebuilding the projections), in no particular order."""

    @abc.abstractmethod
    async def put_page(self, identity: str, page: str, data: bytes) -> None:
        """Store one page of a player's older results (written again whole when repeated).
        Raises ArchiveError when the store refuses it."""

    @abc.abstractmethod
    async def pages(self, identity: str) -> list[str]:
        """The names of a player's pages, oldest first."""

    @abc.abstractmethod
    async def page(self, identity: str, page: str) -> bytes | None:
        """One page of a player's older results, None when there is none of that name."""

    async def read(self, match_id: str) -> list[Recorded]:
        """A match's archived records; [] when it is not archived."""
        data = await self.get(match_id)
        return [] if data is None else decode_log(match_id, data)

    async def exists(self, match_id: str) -> bool:
        """Whether a match is archived."""
        return await self.get(match_id) is not None

    def describe(self) -> str:
        """Where the archive is, for log lines and ``domino status``."""
        return type(self).__name__


class DirectoryArchive(Archive):
    """Archived matches as files under ``root``: ``ab/cd/<id>.jsonl.gz`` (and ``.json``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        """The directory."""
        return str(self.root)

    def path(self, match_id: str, suffix: str = SUFFIX) -> Path:
        """The file of a match's log (or, with ``suffix`` EXTRA, of its document)."""
        return self.root / (object_name(match_id) + suffix)

    async def put(self, match_id: str, log: bytes, extra: bytes | None = None) -> None:
        """Write the files (a temporary file, fsynced and renamed), then read them back."""
        await asyncio.to_thread(self._put, match_id, log, extra)

    def _put(self, match_id: str, log: bytes, extra: bytes | None) -> None:
        target = self.path(match_id)
        if extra is not None:
            _write(self.path(match_id, EXTRA), extra, replace=True)
        if target.exists():
            if target.read_bytes() != log:
                raise ArchiveError(f"match {match_id!r} is archived already with another log")
            return
        _write(target, log, replace=False)
        if target.read_bytes() != log:
            raise ArchiveError(f"archived log of {match_id!r} does not read back as written")

    async def get(self, match_id: str) -> bytes | None:
        """The log file's bytes, None without one."""
        return await asyncio.to_thread(_read, self.path(match_id))

    async def extra(self, match_id: str) -> bytes | None:
        """The document file's bytes, None without one."""
        return await asyncio.to_thread(_read, self.path(match_id, EXTRA))

    async def ids(self) -> list[str]:
        """Every match whose log file is under the root."""
        return await asyncio.to_thread(lambda: list(_walk(self.root)))

    async def put_page(self, identity: str, page: str, data: bytes) -> None:
        """Write the page's file (a temporary file, fsynced and renamed over it)."""
        target = self.root / player_folder(identity) / f"{check_page(page)}{EXTRA}"
        await asyncio.to_thread(_write, target, data, replace=True)

    async def pages(self, identity: str) -> list[str]:
        """The page files in the player's folder."""
        folder = self.root / player_folder(identity)

        def names() -> list[str]:
            if not folder.is_dir():
                return []
            found = (e.name[: -len(EXTRA)] for e in os.scandir(folder) if e.name.endswith(EXTRA))
            return sorted(n for n in found if _PAGE.fullmatch(n))

        return await asyncio.to_thread(names)

    async def page(self, identity: str, page: str) -> bytes | None:
        """The page file's bytes, None without one."""
        target = self.root / player_folder(identity) / f"{check_page(page)}{EXTRA}"
        return await asyncio.to_thread(_read, target)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write(target: Path, data: bytes, *, replace: bool) -> None:
    """Write ``data`` to ``target`` so that a crash leaves the old file or the new, whole:
    a temporary file beside it, fsynced, renamed over it, and the directory fsynced."""
    for directory in (target.parent.parent.parent, target.parent.parent, target.parent):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)  # the archive's own: 0700
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if not replace and target.exists():
            tmp.unlink()
            return
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    handle = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _walk(root: Path) -> Iterable[str]:
    if not root.is_dir():
        return
    for first in os.scandir(root):
        if not first.is_dir():
            continue
        for second in os.scandir(first.path):
            if not second.is_dir():
                continue
            for entry in os.scandir(second.path):
                match_id = match_of(entry.name)
                if match_id is not None:
                    yield match_id
