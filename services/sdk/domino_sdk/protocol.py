"""What goes over the wire between the gateway and a bot: stream lines and request bodies.

A stream is a sequence of lines, each one JSON object with a ``type``:

- ``snapshot``: the first line of a fresh stream: the receiver's whole view now, at match
  version ``id`` (``view`` is None while the match waits for players);
- ``event``: one event of the match log, number ``id``, as the receiver may see it (C8);
- ``turn``: it is this seat's move at version ``id``: its view, legal moves and deadline;
  sent every time it is the seat's move, after a fresh stream's snapshot too.

Event ids are match versions (1..n), so resuming is "everything after version N". Read lines
with :func:`decode_line`: it reads an event of a type this SDK does not know as an
:class:`~domino_sdk.model.UnknownEvent` and skips a line of a type it does not know, so a bot
written today keeps playing against a newer server. The request bodies are the gateway's own:
it decodes them with these very structs.

These types are version :data:`PROTOCOL` of the protocol. Every request and every answer
states its version in the :data:`PROTOCOL_HEADER` header; what a version may gain without a
new number (optional fields, line and event types a reader skips) is docs/protocol.md's
"Versions".
"""

from __future__ import annotations

from typing import get_args

import msgspec

from domino_sdk.model import AnyEvent, End, SeenEvent, Tile, UnknownEvent
from domino_sdk.views import View

PROTOCOL = 1
"""The version of the gateway's protocol these types are."""
PROTOCOL_HEADER = "Domino-Protocol"
"""The header in which a request says the version it speaks, and an answer the version it is
in (a whole number, e.g. ``Domino-Protocol: 1``)."""
UNSTATED = 1
"""The version of an answer without the header: gateways spoke version 1 before they stated
it, and every gateway since states it on every answer. (A request without it is served in the
gateway's current version.)"""


class Snapshot(msgspec.Struct, frozen=True, kw_only=True, tag="snapshot", tag_field="type"):
    """The receiver's view at version ``id``, with its legal moves when it is its turn."""

    id: int
    match_id: str
    seat: int | None
    view: View | None  # None while the match waits for players
    deadline: float | None = None  # seconds since the epoch, when it is this seat's turn
    remaining_ms: int | None = None  # the same deadline, as milliseconds left when sent


class EventLine(msgspec.Struct, frozen=True, kw_only=True, tag="event", tag_field="type"):
    """Event number ``id`` of the match, redacted for its receiver (C8)."""

    id: int
    event: SeenEvent


class TurnLine(msgspec.Struct, frozen=True, kw_only=True, tag="turn", tag_field="type"):
    """The seat is to move at version ``id``: its view, whose ``legal`` lists its moves."""

    id: int
    view: View
    deadline: float | None = None  # seconds since the epoch; None without deadlines
    remaining_ms: int | None = None  # the same deadline, as milliseconds left when sent


class Gap(msgspec.Struct, frozen=True, kw_only=True, tag="gap", tag_field="type"):
    """A resumed stream no longer holds what came after ``after``: the lines ``after`` + 1 to
    ``oldest`` - 1 are lost. What follows resyncs the receiver: on a seat's or the public
    stream a snapshot, on the account stream a state line, on an arena's the oldest lines
    kept. ``id`` is ``oldest`` - 1."""

    id: int
    after: int
    oldest: int


Line = Snapshot | EventLine | TurnLine | Gap
"""Any line of a seat or spectator stream."""


# -- reading lines -----------------------------------------------------------------------------


class _EventLineOnWire(msgspec.Struct, frozen=True, kw_only=True, tag="event", tag_field="type"):
    """An event line with its event left undecoded, for :func:`decode_event` to read."""

    id: int
    event: msgspec.Raw


class _Tagged(msgspec.Struct, frozen=True):
    """Only the ``type`` of a JSON object: what it is, whatever else it holds."""

    type: str


_LINE: msgspec.json.Decoder[Snapshot | _EventLineOnWire | TurnLine | Gap] = msgspec.json.Decoder(
    Snapshot | _EventLineOnWire | TurnLine | Gap
)
_EVENT: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
_TAG = msgspec.json.Decoder(_Tagged)
_JSON = msgspec.json.Decoder()
LINE_TYPES = frozenset(str(t.__struct_config__.tag) for t in get_args(Line))
EVENT_TYPES = frozenset(str(t.__struct_config__.tag) for t in get_args(AnyEvent))


def decode_event(data: bytes | msgspec.Raw) -> SeenEvent:
    """One event as JSON; an event of a type this SDK does not know becomes UnknownEvent.

    Raises msgspec.ValidationError for a known event of the wrong shape: that is a broken
    server, not a newer one (a newer one only adds fields, which are ignored).
    """
    try:
        return _EVENT.decode(data)
    except msgspec.ValidationError:
        kind = _TAG.decode(data).type
        if kind in EVENT_TYPES:
            raise
        fields = _JSON.decode(data)
        del fields["type"]
        return UnknownEvent(name=kind, fields=fields)


def decode_line(data: bytes) -> Line | None:
    """One stream line as JSON; None for a line of a type this SDK does not know.

    Raises msgspec.DecodeError for a line that is not JSON, and msgspec.ValidationError for a
    known line of the wrong shape.
    """
    try:
        line = _LINE.decode(data)
    except msgspec.ValidationError:
        if _TAG.decode(data).type in LINE_TYPES:
            raise
        return None
    if isinstance(line, _EventLineOnWire):
        return EventLine(id=line.id, event=decode_event(line.event))
    return line


# -- request bodies ----------------------------------------------------------------------------


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
