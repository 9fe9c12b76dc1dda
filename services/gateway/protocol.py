"""What goes over the wire between the gateway and its clients: stream lines and request bodies.

A stream is a sequence of lines, each one JSON object with a ``type``:

- ``snapshot``: the first line of a fresh stream: the receiver's whole view now, at match
  version ``id`` (``view`` is None while the match waits for players);
- ``event``: one event of the match log, number ``id``, as the receiver may see it (C8);
- ``turn``: it is this seat's move at version ``id``: its view, legal moves and deadline.

Event ids are match versions (1..n), so resuming is "everything after version N".

The SDK (``domino_sdk``, services/sdk) owns the protocol's types; the server depends on it and
never the other way round. The request bodies are the SDK's structs, used here as they are.
The lines stay the server's own: they carry the engine's ``View`` and the stored events, built
on the hot path without a copy. tests/sdk/test_wire.py proves the two agree on the wire: every
line the gateway encodes decodes as the SDK's, field for field, and their JSON schemas match.
"""

from __future__ import annotations

import msgspec

# the request bodies are the SDK's structs, re-exported for the gateway's handlers
from domino_sdk.protocol import CreateBody as CreateBody
from domino_sdk.protocol import DrawBody as DrawBody
from domino_sdk.protocol import JoinBody as JoinBody
from domino_sdk.protocol import MoveBody as MoveBody
from domino_sdk.protocol import PassBody as PassBody
from domino_sdk.protocol import PlayBody as PlayBody
from domino_sdk.protocol import RulesBody as RulesBody

from engine.views import View
from events.model import AnyEvent

API = "/api/v1"
"""Where every path of the protocol starts."""


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
    event: AnyEvent


class TurnLine(msgspec.Struct, frozen=True, kw_only=True, tag="turn", tag_field="type"):
    """The seat is to move at version ``id``: its view, whose ``legal`` lists its moves."""

    id: int
    view: View
    deadline: float | None = None  # seconds since the epoch; None without deadlines
    remaining_ms: int | None = None  # the same deadline, as milliseconds left when sent


Line = Snapshot | EventLine | TurnLine
"""Any line of a seat or spectator stream."""


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
