"""Pages of sorted sets: the next ``limit`` members past a cursor, across several sets (one per
partition), reading no more than a page from each.

A list endpoint reads a page of an index (finished matches by when they were updated, open
matches by when they were created) with :func:`page`; it answers the :class:`Cursor` of the
page's last member as ``next``, and the next request passes it back. Members are ordered by
score, then by member (Redis's own order for equal scores), so a cursor is exact even when two
members share a score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from services.redis.connection import Client

CURSOR_CHARS = 200
"""The longest cursor taken: a score and a match id are far shorter."""


class BadCursor(ValueError):
    """Raised when a cursor's text is not one :meth:`Cursor.text` wrote."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page ended: its last member and that member's score."""

    score: float
    member: str

    def text(self) -> str:
        """The cursor as a client passes it back (``score:member``)."""
        return f"{self.score!r}:{self.member}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """The cursor ``text`` names; raises BadCursor when it names none."""
        score, sep, member = text.partition(":")
        if not sep or not member or len(text) > CURSOR_CHARS or not score.isascii():
            raise BadCursor(f"not a cursor: {text[:CURSOR_CHARS]!r}")
        try:
            value = float(score)
        except ValueError:
            raise BadCursor(f"not a cursor: {text[:CURSOR_CHARS]!r}") from None
        if not math.isfinite(value):
            raise BadCursor(f"not a cursor: {text[:CURSOR_CHARS]!r}")
        return cls(value, member)


Entry = tuple[str, float, int]
"""A member, its score, and which of the sets it is in (its index in ``keys``)."""


async def page(
    redis: Client, keys: Sequence[str], limit: int, cursor: Cursor | None, newest_first: bool
) -> tuple[list[Entry], Cursor | None]:
    """The first ``limit`` members of the sorted sets ``keys`` past ``cursor`` (all of them
    from the start), by score and member, highest first when ``newest_first``; and the cursor
    of the page after, None when there is none. Each set is read for at most ``limit`` members,
    and those that tie with the cursor's score."""
    found: list[Entry] = []
    more = False
    for i, key in enumerate(keys):
        entries = await _read(redis, key, limit, cursor, newest_first)
        more = more or len(entries) >= limit
        found.extend((member, score, i) for member, score in entries)
    found.sort(key=lambda e: (e[1], e[0]), reverse=newest_first)
    more = more or len(found) > limit
    window = found[:limit]
    if not more or not window:
        return window, None
    member, score, _ = window[-1]
    return window, Cursor(score, member)


async def _read(
    redis: Client, key: str, limit: int, cursor: Cursor | None, newest_first: bool
) -> list[tuple[str, float]]:
    """One set's members past ``cursor``, up to ``limit`` (those tied with it besides)."""
    raw: list[tuple[bytes, float]]
    if cursor is None:
        read = redis.zrevrange if newest_first else redis.zrange
        raw = cast(list[tuple[bytes, float]], await read(key, 0, limit - 1, withscores=True))
        return [(m.decode(), s) for m, s in raw]
    past = f"({cursor.score!r}"
    if newest_first:
        raw = cast(
            list[tuple[bytes, float]],
            await redis.zrevrangebyscore(key, past, "-inf", 0, limit, withscores=True),
        )
    else:
        raw = cast(
            list[tuple[bytes, float]],
            await redis.zrangebyscore(key, past, "+inf", 0, limit, withscores=True),
        )
    # members with the cursor's very score come after it by name (Redis's order for ties)
    tied = cast(
        list[tuple[bytes, float]],
        await redis.zrangebyscore(key, cursor.score, cursor.score, withscores=True),
    )
    out = [(m.decode(), s) for m, s in raw]
    for m, s in tied:
        name = m.decode()
        if (name < cursor.member) if newest_first else (name > cursor.member):
            out.append((name, s))
    return out
