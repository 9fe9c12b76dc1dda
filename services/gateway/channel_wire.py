"""The account channel's frames (docs/protocol.md, "The account channel"): what
``GET /account/socket`` and ``GET /account/stream?play=1`` send down, each under its cursor,
and what the socket takes up. The gateway writes the down frames by splicing lines already
encoded (services/gateway/channel.py); these structs are their documented shapes, recorded by
``make schema`` and read back by clients and tests."""

from __future__ import annotations

from typing import Any

import msgspec

from services.gateway.protocol import Line, MoveBody


class AccountFrame(msgspec.Struct, frozen=True, kw_only=True, tag="account", tag_field="type"):
    """A line of the account's feed (``state``, ``gap``, ``challenge``, ``challenge_*``,
    ``match_started``, ``match_finished``, ``seek_expired``), as the account stream sends it,
    under the cursor that covers it and every frame before it."""

    cursor: str
    line: dict[str, Any]


class ChannelLine(msgspec.Struct, frozen=True, kw_only=True, tag="line", tag_field="type"):
    """A line of a seat the account holds (``snapshot``, ``event``, ``turn``, ``gap``), exactly
    as that seat's own stream sends it, with its match and seat, under its cursor."""

    cursor: str
    match_id: str
    seat: int
    line: Line


class AccountMoveFrame(msgspec.Struct, frozen=True, kw_only=True, tag="move", tag_field="type"):
    """A move sent up the account socket for a seat the account holds: ``key`` is its
    Idempotency-Key, ``move`` what POST /moves takes."""

    key: str
    match_id: str
    seat: int
    move: MoveBody


class ChannelError(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="type"):
    """A frame the account socket could not act on, and why: ``error`` is a code
    (``bad_json``, ``bad_frame``, ``unknown_type``, ``frame_too_large``, ``invalid_frame``,
    ``not_your_seat``, or the code POST /moves answers), under the frame's ``key`` when it had
    one, with its match and seat when it named them. The socket stays open."""

    error: str
    message: str
    key: str | None = None
    match_id: str | None = None
    seat: int | None = None


class ChannelLimited(msgspec.Struct, frozen=True, kw_only=True, tag="limited", tag_field="type"):
    """A frame over a limit (``limit``: moves_per_second, rejected_moves) was not acted on:
    send it again after ``retry_after`` seconds (POST /moves's 429). A move's frame is counted
    against its seat's moves, any other against the account's; ``key``, ``match_id`` and
    ``seat`` are the frame's, when it had them."""

    limit: str
    retry_after: float
    message: str
    key: str | None = None
    match_id: str | None = None
    seat: int | None = None


ChannelFrame = AccountFrame | ChannelLine
"""Any frame of the account channel that carries a cursor."""
