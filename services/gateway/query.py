"""What a request asks in its query string, checked: a whole number in its range, a page's
cursor. Anything else is 422 invalid_query.
"""

from __future__ import annotations

from typing import TypeVar

from services.gateway.http import ApiError, Request
from services.redis.paging import BadCursor, Cursor
from services.store.base import InvalidMatchId
from services.store.keys import validate_match_id

T = TypeVar("T")


def count_of(request: Request, name: str, low: int, high: int | None, default: T) -> int | T:
    """The whole number query parameter ``name``, ``low`` to ``high``; ``default`` when it
    is not given; 422 invalid_query for anything else."""
    raw = request.query(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:  # "²" is a digit to isdigit
        raise ApiError(422, "invalid_query", f"{name} is a whole number")
    value = int(raw)
    if value < low or (high is not None and value > high):
        upto = "" if high is None else f" to {high}"
        raise ApiError(422, "invalid_query", f"{name} is {low}{upto}")
    return value


def cursor_of(request: Request) -> Cursor | None:
    """The ``cursor`` query parameter, a ``next`` a list answered; 422 invalid_query for
    anything else."""
    raw = request.query("cursor")
    if raw is None:
        return None
    try:
        cursor = Cursor.parse(raw)
        validate_match_id(cursor.member)
    except (BadCursor, InvalidMatchId):
        raise ApiError(
            422, "invalid_query", "cursor is the next of a page this list answered"
        ) from None
    return cursor
