"""What goes over the wire between the gateway and its clients: stream lines and request bodies.

A stream is a sequence of lines, each one JSON object with a ``type``:

- ``snapshot``: the first line of a fresh stream: the receiver's whole view now, at match
  version ``id`` (``view`` is None while the match waits for players);
- ``event``: one event of the match log, number ``id``, as the receiver may see it (C8);
- ``turn``: it is this seat's move at version ``id``: its view, legal moves and deadline.

Event ids are match versions (1..n), so resuming is "everything after version N". These
structs are shared with the SDK, which decodes what the gateway encodes.
"""

from __future__ import annotations

import msgspec

from engine.board import End
from engine.tiles import Tile
from engine.views import View
from events.model import AnyEvent


class Snapshot(msgspec.Struct, frozen=True, kw_only=True, tag="snapshot", tag_field="type"):
    """The receiver's view at version ``id``, with its legal moves when it is its turn."""

    id: int
    match_id: str
    seat: int | None
    view: View | None  # None while the match waits for players
    deadline: float | None = None  # seconds since the epoch, when it is this seat's turn


class EventLine(msgspec.Struct, frozen=True, kw_only=True, tag="event", tag_field="type"):
    """Event number ``id`` of the match, redacted for its receiver (C8)."""

    id: int
    event: AnyEvent


class TurnLine(msgspec.Struct, frozen=True, kw_only=True, tag="turn", tag_field="type"):
    """The seat is to move at version ``id``: its view, whose ``legal`` lists its moves."""

    id: int
    view: View
    deadline: float | None = None


Line = Snapshot | EventLine | TurnLine
"""Any line of a seat or spectator stream."""


# -- request bodies ----------------------------------------------------------------------------


class PlayBody(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag="play_tile",
    tag_field="type",
    forbid_unknown_fields=True,
):
    """Play ``tile`` on ``end`` (no end for the lead, or when only one end fits)."""

    tile: Tile
    end: End | None = None
    seat: int | None = None  # optional: when given it must be the token's seat


class DrawBody(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag="draw_tile",
    tag_field="type",
    forbid_unknown_fields=True,
):
    """Draw from the boneyard (Straight, S3)."""

    seat: int | None = None


class PassBody(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag="pass_turn",
    tag_field="type",
    forbid_unknown_fields=True,
):
    """Pass (only with no legal play and nothing to draw)."""

    seat: int | None = None


MoveBody = PlayBody | DrawBody | PassBody
"""A move as posted: exactly what a seat's ``view.legal`` lists, seat optional."""


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
    deadline_ms: int = 0


class JoinBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Take an open seat (the first open one when ``seat`` is left out) under ``name``."""

    name: str | None = None
    seat: int | None = None


# -- encoding ----------------------------------------------------------------------------------

_ENCODER = msgspec.json.Encoder()
KEEPALIVE_NDJSON = b"\n"
KEEPALIVE_SSE = b": keep-alive\n\n"


def frame(line: Line, sse: bool) -> bytes:
    """One line as NDJSON (a JSON object and a newline) or as a server-sent event."""
    data = _ENCODER.encode(line)
    if not sse:
        return data + b"\n"
    kind = line.__struct_config__.tag
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (line.id, str(kind).encode(), data)
