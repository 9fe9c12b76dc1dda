"""Messages between services that are not stored events: turns for bots and rejections."""

from __future__ import annotations

import msgspec

from events.envelope import SCHEMA
from events.model import Rejection
from events.view import View


class TurnMessage(msgspec.Struct, frozen=True, kw_only=True, tag="turn", tag_field="type"):
    """A seat's turn: what that seat may see (C8) and its legal moves, at match ``version``.

    ``caused_at`` is when the command that led to this turn reached the referee (for latency).
    ``schema`` is the schema of the referee that wrote it: a bot worker refuses a newer one.
    """

    match_id: str
    seat: int
    version: int
    pool: str
    deadline: float | None  # seconds since the epoch; None when the match has no deadlines
    caused_at: float
    view: View
    schema: int = SCHEMA


class Rejected(msgspec.Struct, frozen=True, kw_only=True, tag="rejected", tag_field="type"):
    """Sent back to a command's sender: the command was refused and changed nothing."""

    match_id: str
    command_id: str
    rejection: Rejection
