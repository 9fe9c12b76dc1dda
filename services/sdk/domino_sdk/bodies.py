"""The request bodies a bot posts: moves, and the lobby's new match and join.

They are the SDK's own shapes, and the gateway's too: it decodes requests with these very
structs (services/gateway/protocol.py imports them), so the two cannot differ. Each refuses a
field the gateway does not know. Import them from :mod:`domino_sdk.protocol`.
"""

from __future__ import annotations

import msgspec

from domino_sdk.base import End, Tile


class _MoveBody(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", forbid_unknown_fields=True
):
    """What every move body shares: a ``type`` tag, and no field the gateway does not know."""


class PlayBody(_MoveBody, frozen=True, tag="play_tile"):
    """Play ``tile`` on ``end`` (no end for the lead, or when only one end fits)."""

    tile: Tile
    end: End | None = None
    seat: int | None = None  # optional: when given it must be the token's seat


class DrawBody(_MoveBody, frozen=True, tag="draw_tile"):
    """Draw from the boneyard (Straight, S3)."""

    seat: int | None = None


class PassBody(_MoveBody, frozen=True, tag="pass_turn"):
    """Pass (only with no legal play and nothing to draw)."""

    seat: int | None = None


class ResignBody(_MoveBody, frozen=True, tag="resign"):
    """Concede the match for the seat's side; allowed at any time, on any turn."""

    seat: int | None = None


class AbortBody(_MoveBody, frozen=True, tag="abort"):
    """Call the match off, unrated: only while the seat's side has made no move of its own."""

    seat: int | None = None


MoveBody = PlayBody | DrawBody | PassBody | ResignBody | AbortBody
"""What a seat posts: a move exactly as its ``view.legal`` lists it, or resign / abort; the
seat is optional."""


class RulesBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Rule options of a new match; anything left out takes the family's default."""

    family: str = "express"
    players: int | None = None
    partners: bool | None = None
    top: int = 6
    target: int | None = None
    next_leader: str = "after_winner"
    reveal_stock: bool = False


class CreateBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A new match: by seat, the pool of house bots that plays it, or null for an open seat."""

    seats: list[str | None]
    rules: RulesBody = msgspec.field(default_factory=RulesBody)
    names: list[str] | None = None
    deadline_ms: int | None = None  # each turn's limit; None: the gateway's default
    max_rounds: int | None = None  # end after this many rounds; None: the gateway's cap


class JoinBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Take an open seat (the first open one when ``seat`` is left out) under ``name``."""

    name: str | None = None
    seat: int | None = None
