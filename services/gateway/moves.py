"""What every channel that takes moves (POST /moves, the seat's socket) checks and says alike:
the Idempotency-Key a move is sent under, and what a move with no answer in time is told."""

from __future__ import annotations

import re

from services.gateway.http import ApiError

_KEY = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
TIMED_OUT = (
    "no answer from the referee in time; the move may still be applied: send it again with "
    "the same Idempotency-Key"
)
"""What a move that got no answer in time is told."""


def move_key(key: str | None) -> str:
    """A move's Idempotency-Key, checked; ApiError 400 when it is missing or malformed."""
    if key is None:
        raise ApiError(
            400, "missing_idempotency_key", "send an Idempotency-Key header with each move"
        )
    if _KEY.fullmatch(key) is None:
        raise ApiError(
            400, "bad_idempotency_key", "an Idempotency-Key is 1-64 of A-Z a-z 0-9 . _ : -"
        )
    return key
