"""What goes over the wire between the gateway and its clients: stream lines and request bodies.

A stream is a sequence of lines, each one JSON object with a ``type``:

- ``snapshot``: the first line of a fresh stream: the receiver's whole view now, at match
  version ``id`` (``view`` is None while the match waits for players);
- ``event``: one event of the match log, number ``id``, as the receiver may see it (C8);
- ``turn``: it is this seat's move at version ``id``: its view, legal moves and deadline;
  sent every time it is the seat's move, after a fresh stream's snapshot too.

Event ids are match versions (1..n), so resuming is "everything after version N".

The SDK (``domino_sdk``, services/sdk) owns the protocol's types; the server depends on it and
never the other way round. The request bodies are the SDK's structs, used here as they are.
The lines stay the server's own: they carry the engine's ``View`` and the stored events, built
on the hot path without a copy. tests/sdk/test_wire.py proves the two agree on the wire: every
line the gateway encodes decodes as the SDK's, field for field, and their JSON schemas match.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from domino_sdk.protocol import AbortBody as AbortBody

# the request bodies are the SDK's structs, re-exported for the gateway's handlers
from domino_sdk.protocol import CreateBody as CreateBody
from domino_sdk.protocol import DrawBody as DrawBody
from domino_sdk.protocol import JoinBody as JoinBody
from domino_sdk.protocol import MoveBody as MoveBody
from domino_sdk.protocol import PassBody as PassBody
from domino_sdk.protocol import PlayBody as PlayBody
from domino_sdk.protocol import ResignBody as ResignBody
from domino_sdk.protocol import RulesBody as RulesBody

from engine.rules import Rules
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


# -- answers -----------------------------------------------------------------------------------
# The JSON bodies of the other answers, for the OpenAPI document (services/gateway/openapi.py):
# tests/gateway/test_protocol_fixes.py checks the gateway's real answers against them.

MatchStatus = Literal["open", "started", "cancelled"]
"""A lobby match: waiting for players, every seat taken (its log has begun), or called off
before it started."""

ListStatus = Literal["open", "live", "finished"]
"""Which matches a list holds: waiting for players, being played, or over."""


class Links(msgspec.Struct, frozen=True, kw_only=True):
    """Where to go next: the match, its public stream and, for a seat, its stream and moves."""

    match: str
    spectate: str
    stream: str | None = None
    moves: str | None = None


class SeatInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One seat of a lobby match."""

    seat: int
    kind: Literal["bot", "open", "taken"]  # a house bot's, waiting for a player, or taken
    name: str
    pool: str | None  # the house bot pool that plays it; None for a seat played from outside
    account: str | None = None  # the account holding it, if one does


class MatchInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A lobby match as anyone may see it: its rules, seats and status (nothing secret)."""

    match_id: str
    status: MatchStatus
    rules: Rules
    deadline_ms: int  # each turn's time limit
    created: float  # seconds since the epoch
    seats: list[SeatInfo]
    forfeit_after: int = 0  # timeouts in a row that forfeit the match (0: never)
    max_rounds: int = 0  # the match ends after this many rounds (0: no cap)


class Created(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /matches."""

    match: MatchInfo
    links: Links
    owner_token: str | None = None  # shown once: it cancels the match while it waits


class Joined(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /matches/{match_id}/join: the seat token, shown this once."""

    match_id: str
    seat: int
    token: str
    match: MatchInfo
    links: Links


class MatchDetail(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /matches/{match_id}: the lobby record, if the match came through the lobby,
    and how far its log has got (``version``: its number of events)."""

    match_id: str
    version: int
    links: Links
    status: MatchStatus | None = None
    rules: Rules | None = None
    deadline_ms: int | None = None
    created: float | None = None
    seats: list[SeatInfo] | None = None
    forfeit_after: int | None = None
    max_rounds: int | None = None


class SeatOf(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /seat: the match and seat a seat token plays."""

    match_id: str
    seat: int
    links: Links


class MoveAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """200 to a move: applied, its first event at ``version``; ``replayed`` when it was an
    earlier post under the same Idempotency-Key that applied it, and this one changed nothing."""

    accepted: Literal[True]
    version: int
    replayed: bool


class Health(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /healthz."""

    ok: bool
    following: int  # matches this gateway follows now


class Error(msgspec.Struct, frozen=True, kw_only=True):
    """Every error: a stable code and a sentence for people."""

    error: str
    message: str


class RejectedError(msgspec.Struct, frozen=True, kw_only=True):
    """The engine refused: its reason code and the rule of RULES.md it applies (``-`` when
    no rule of the game is involved)."""

    error: Literal["rejected"]
    reason: str
    rule: str
    message: str
    accepted: Literal[False] | None = None  # on answers to moves


class LimitError(msgspec.Struct, frozen=True, kw_only=True):
    """429: over a limit; ``retry_after`` seconds (and the Retry-After header) say when."""

    error: Literal["rate_limited"]
    limit: str
    retry_after: float
    message: str


class TooLargeError(msgspec.Struct, frozen=True, kw_only=True):
    """413: a body over ``max`` bytes."""

    error: Literal["body_too_large"]
    limit: Literal["body_bytes"]
    max: int
    message: str
