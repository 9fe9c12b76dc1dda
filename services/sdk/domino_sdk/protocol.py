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
written today keeps playing against a newer server.

The lines, and the socket's frames, are the server's structs, generated into
:mod:`domino_sdk.wire` from the protocol's recorded schema (``make schema``). The request
bodies are the SDK's own (:mod:`domino_sdk.bodies`), and the gateway's: it decodes them with
these very structs.

These types are version :data:`PROTOCOL` of the protocol. Every request and every answer
states its version in the :data:`PROTOCOL_HEADER` header; what a version may gain without a
new number (optional fields, line and event types a reader skips) is docs/protocol.md's
"Versions".
"""

from __future__ import annotations

import functools
import operator
from typing import Any, get_args

import msgspec

from domino_sdk import wire
from domino_sdk.bodies import (
    AbortBody,
    CreateBody,
    DrawBody,
    JoinBody,
    MoveBody,
    PassBody,
    PlayBody,
    ResignBody,
    RulesBody,
)
from domino_sdk.model import AnyEvent, SeenEvent, UnknownEvent

PROTOCOL = 1
"""The version of the gateway's protocol these types are."""
PROTOCOL_HEADER = "Domino-Protocol"
"""The header in which a request says the version it speaks, and an answer the version it is
in (a whole number, e.g. ``Domino-Protocol: 1``)."""
UNSTATED = 1
"""The version of an answer without the header: gateways spoke version 1 before they stated
it, and every gateway since states it on every answer. (A request without it is served in the
gateway's current version.)"""


Snapshot = wire.Snapshot
"""The receiver's view at version ``id`` (``view`` None while the match waits for players),
with its legal moves when it is its turn, and then its ``deadline`` (seconds since the epoch)
and ``remaining_ms`` (the same deadline, as milliseconds left when sent)."""
EventLine = wire.EventLine
"""Event number ``id`` of the match, redacted for its receiver (C8)."""
TurnLine = wire.TurnLine
"""The seat is to move at version ``id``: its view, whose ``legal`` lists its moves, its
``deadline`` (None without deadlines) and ``remaining_ms``."""
Gap = wire.Gap
"""A resumed stream no longer holds what came after ``after``: the lines ``after`` + 1 to
``oldest`` - 1 are lost. What follows resyncs the receiver: on a seat's or the public
stream a snapshot, on the account stream a state line, on an arena's the oldest lines
kept. ``id`` is ``oldest`` - 1."""
Line = wire.Line
"""Any line of a seat or spectator stream."""

# -- the seat's socket (docs/protocol.md "Socket") ---------------------------------------------

SocketLine = wire.SocketLine
"""A line of the seat's stream, with its match and seat."""
HelloFrame = wire.HelloFrame
"""The first frame of a socket opened without an ``Authorization`` header: its token."""
MoveFrame = wire.MoveFrame
"""A move sent up the socket under ``key``, its Idempotency-Key."""
MoveAccepted = wire.MoveAccepted
"""The move sent under ``key`` is in the log at ``version``."""
MoveRejected = wire.MoveRejected
"""The referee refused the move sent under ``key``: ``reason``, ``rule``, ``message``."""
MoveLimited = wire.MoveLimited
"""A frame over a limit was not acted on: send it again after ``retry_after`` seconds."""
MoveTimedOut = wire.MoveTimedOut
"""No answer came for the move sent under ``key`` in time: send it again with that key."""
SocketError = wire.SocketError
"""A frame the gateway could not act on: ``error``, a code, and why; the socket stays open."""
SocketFrame = wire.SocketFrame
"""Any frame the seat's socket sends."""

__all__ = [
    "PROTOCOL",
    "PROTOCOL_HEADER",
    "UNSTATED",
    "AbortBody",
    "CreateBody",
    "DrawBody",
    "EventLine",
    "Gap",
    "HelloFrame",
    "JoinBody",
    "Line",
    "MoveAccepted",
    "MoveBody",
    "MoveFrame",
    "MoveLimited",
    "MoveRejected",
    "MoveTimedOut",
    "PassBody",
    "PlayBody",
    "ResignBody",
    "RulesBody",
    "Snapshot",
    "SocketError",
    "SocketFrame",
    "SocketLine",
    "TurnLine",
    "decode_event",
    "decode_line",
]


# -- reading lines -----------------------------------------------------------------------------


class _EventLineOnWire(msgspec.Struct, frozen=True, kw_only=True, tag="event", tag_field="type"):
    """An event line with its event left undecoded, for :func:`decode_event` to read."""

    id: int
    event: msgspec.Raw


class _Tagged(msgspec.Struct, frozen=True):
    """Only the ``type`` of a JSON object: what it is, whatever else it holds."""

    type: str


_ON_WIRE: Any = functools.reduce(
    operator.or_, (_EventLineOnWire if t is EventLine else t for t in get_args(Line))
)
_LINE: msgspec.json.Decoder[Any] = msgspec.json.Decoder(_ON_WIRE)
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
        line: Line | _EventLineOnWire = _LINE.decode(data)
    except msgspec.ValidationError:
        if _TAG.decode(data).type in LINE_TYPES:
            raise
        return None
    if isinstance(line, _EventLineOnWire):
        return EventLine(id=line.id, event=decode_event(line.event))
    return line
