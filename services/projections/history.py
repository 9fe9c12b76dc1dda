"""A player's history: its latest results from Redis, the older ones from the archive.

The ratings projection keeps each finished match's result in Redis, and an index of each
player's matches by when they ended, until the compactor folds them into the compacted table
(services/projections/compaction.py); the compactor writes each player's page of the results
it folded to the archive first. So a player's matches are, newest first: those after the
table's ``indexed`` checkpoint, in Redis, then the archive's pages, newest first — one order,
(the time a match ended, its id), and one cursor over both.

What a player page shows (``GET /players/{key}``, the page ``/players/KEY``): a page of at
most ``limit`` matches, newest first, with the cursor of the next; its rating now, from the
compacted table and the results after it; and its rating after each of its latest
:data:`HISTORY` rated matches (after the checkpoint from the fold, before it from the
archive's newest :data:`HISTORY_PAGES` pages).
"""

from __future__ import annotations

import msgspec

from services.projections.ratings import (
    Checkpoint,
    MatchResult,
    RatingPoint,
    RatingsProjector,
    order_of,
    read_indexed,
    read_played,
)
from services.redis.connection import Client
from services.redis.paging import Cursor
from services.store.archive import Archive, page_time

HISTORY = 500
"""At most this many rating points are shown of a player's history."""
HISTORY_PAGES = 20
"""At most this many of the archive's pages are read for a player's rating points."""


class PlayedPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of a player's older results in the archive: the results it played (those
    folded by one compaction, in the order they were rated), and its rating after each of
    those that were rated."""

    through: Checkpoint
    results: tuple[MatchResult, ...]
    points: tuple[RatingPoint, ...] = ()


_PAGE = msgspec.json.Decoder(PlayedPage)


async def played(
    redis: Client,
    projector: RatingsProjector,
    archive: Archive | None,
    identity: str,
    limit: int,
    before: Cursor | None = None,
) -> tuple[list[MatchResult], Cursor | None]:
    """A page of the matches ``identity`` played, newest first: those in Redis after the
    compacted table's ``indexed`` checkpoint, then the archive's; and the cursor of the next
    page (None: none older)."""
    indexed = await read_indexed(redis, projector)
    point = None if before is None else (before.score, before.member)
    found: list[MatchResult] = []
    if indexed is None or point is None or point > indexed:
        recent, after = await read_played(redis, projector, identity, limit, before)
        found = [r for r in recent if indexed is None or order_of(r) > indexed]
        if after is not None and len(found) == len(recent):
            return found, after  # Redis has more after the checkpoint
    if archive is None or indexed is None:
        return found, None
    older, more = await older_played(
        archive,
        identity,
        limit - len(found),
        point if point is not None and point <= indexed else None,
    )
    found += older
    if not more or not found:
        return found, None
    return found, Cursor(found[-1].ended, found[-1].match_id)


async def read_page(archive: Archive, identity: str, page: str) -> PlayedPage | None:
    """One page of a player's older results from the archive (None: no such page)."""
    raw = await archive.page(identity, page)
    return None if raw is None else _PAGE.decode(raw)


async def older_played(
    archive: Archive, identity: str, limit: int, before: Checkpoint | None
) -> tuple[list[MatchResult], bool]:
    """Up to ``limit`` of a player's results from the archive's pages, newest first, those
    before ``before`` only (all, without it); and whether there are older ones. Reads the
    pages that can hold them only, newest first."""
    names = await archive.pages(identity)
    found: list[MatchResult] = []
    for i in range(len(names) - 1, -1, -1):
        if before is not None and i > 0 and _page_after(names[i - 1], before):
            continue  # every result of this page comes after the previous page's end
        page = await read_page(archive, identity, names[i])
        if page is None:
            continue
        found += [r for r in page.results if before is None or order_of(r) < before]
        found.sort(key=order_of, reverse=True)
        # pages ending in the same microsecond sort by their names, not their ids: read all
        if len(found) > limit and (i == 0 or page_time(names[i - 1]) < page_time(names[i])):
            return found[:limit], True
    return found, False


async def older_points(archive: Archive, identity: str, limit: int) -> list[RatingPoint]:
    """A player's latest ``limit`` rating points in the archive's pages, oldest first."""
    names = await archive.pages(identity)
    found: list[RatingPoint] = []
    for name in reversed(names[-HISTORY_PAGES:]):
        if len(found) >= limit:
            break
        page = await read_page(archive, identity, name)
        if page is not None:
            found[:0] = page.points
    return found[-limit:] if limit else []


def _page_after(name: str, before: Checkpoint) -> bool:
    """Whether a page ending at ``name`` ends (to the microsecond) after ``before``."""
    return page_time(name) > before[0] + 1e-6
