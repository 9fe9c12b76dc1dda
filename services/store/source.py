"""Where a match's log is read from, live or archived: one seam for every reader.

A match lives in Redis while it is played and for the retention period after it ends; then
its log moves to the archive (:mod:`services.store.archive`). :class:`MatchSource` reads the
event store first and the archive when Redis has no log of the match, so the referee, the
projector, the gateway and the ``domino`` command read an archived match exactly as a live
one. The archiver writes the archive's copy before it deletes the Redis one, in one script, so
a read finds the match in one place or the other, never neither.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from services.store.archive import Archive
from services.store.base import EventStore, Recorded
from services.store.keys import Keys

ARCHIVED_KEPT = 64
"""How many archived matches' records a source keeps decoded (the last read first)."""


class LogReader(Protocol):
    """What reads match logs: the event store itself, or a :class:`MatchSource` over it."""

    @property
    def keys(self) -> Keys:
        """The key layout."""
        ...

    async def read(
        self, match_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[Recorded]:
        """Events of a match with ``from_version <= version <= to_version``."""
        ...

    async def version(self, match_id: str) -> int:
        """Number of events of the match."""
        ...


class MatchSource:
    """Reads matches from the event store, and from ``archive`` (if any) once archived."""

    def __init__(
        self, store: EventStore, archive: Archive | None = None, kept: int = ARCHIVED_KEPT
    ) -> None:
        self.store = store
        self.archive = archive
        self.kept = kept
        self._archived: OrderedDict[str, list[Recorded]] = OrderedDict()

    @property
    def keys(self) -> Keys:
        """The store's key layout."""
        return self.store.keys

    @property
    def partitions(self) -> int:
        """The store's partitions."""
        return self.store.partitions

    async def read(
        self, match_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[Recorded]:
        """Events of a match with ``from_version <= version <= to_version``, from Redis, else
        (Redis has no log of the match) from the archive."""
        records = await self.store.read(match_id, from_version, to_version)
        if records or self.archive is None:
            return records
        if to_version is not None and to_version < max(from_version, 1):
            return []
        if from_version > 1 and await self.store.version(match_id) > 0:
            return []  # live, and nothing that new yet
        whole = await self._archived_records(self.archive, match_id)
        stop = len(whole) if to_version is None else max(0, to_version)
        return whole[max(from_version, 1) - 1 : stop]

    async def version(self, match_id: str) -> int:
        """The match's version in Redis, else in the archive; 0 for a match in neither."""
        version = await self.store.version(match_id)
        if version or self.archive is None:
            return version
        return len(await self._archived_records(self.archive, match_id))

    async def archived(self, match_id: str) -> bool:
        """Whether the match's log is in the archive (and so no longer in Redis)."""
        if self.archive is None:
            return False
        return bool(await self._archived_records(self.archive, match_id))

    def forget(self, match_id: str) -> None:
        """Drop what is kept of an archived match (it is read again next time)."""
        self._archived.pop(match_id, None)

    async def _archived_records(self, archive: Archive, match_id: str) -> list[Recorded]:
        known = self._archived.get(match_id)
        if known is not None:
            self._archived.move_to_end(match_id)
            return known
        records = await archive.read(match_id)
        if records:  # a miss is not kept: the match may be archived a moment later
            self._archived[match_id] = records
            while len(self._archived) > self.kept:
                self._archived.popitem(last=False)
        return records
