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

# the protocol's version and the request bodies are the SDK's, re-exported for the gateway
from domino_sdk.protocol import PROTOCOL as PROTOCOL
from domino_sdk.protocol import PROTOCOL_HEADER as PROTOCOL_HEADER
from domino_sdk.protocol import AbortBody as AbortBody
from domino_sdk.protocol import CreateBody as CreateBody
from domino_sdk.protocol import DrawBody as DrawBody
from domino_sdk.protocol import JoinBody as JoinBody
from domino_sdk.protocol import MoveBody as MoveBody
from domino_sdk.protocol import PassBody as PassBody
from domino_sdk.protocol import PlayBody as PlayBody
from domino_sdk.protocol import ResignBody as ResignBody
from domino_sdk.protocol import RulesBody as RulesBody

from engine.rules import Family, Rules
from engine.views import View
from events.model import AnyEvent
from services.projections.ratings import Rating, RatingPoint

API = "/api/v1"
"""Where every path of the protocol starts."""
SPOKEN = (PROTOCOL,)
"""Every version of the protocol this gateway answers in, oldest first: more than one only
while clients move from one version to the next (docs/protocol.md, "Versions")."""
LISTED = 100
"""The most matches one GET /matches lists: the latest live or finished."""
FILTERED_PAGES = 8
"""The most pages one GET /matches with a filter reads before it answers what it found."""
REPLAYED = 10_000
"""The longest log GET /matches/{id}/replay answers (413 beyond: longer than any match the
gateway's round cap lets be played)."""
RECENT = 20
"""The most matches GET /players/{key} lists of an identity."""
NAME_CHARS = 64
"""The longest player name a filter of GET /matches may ask for."""


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


class Gap(msgspec.Struct, frozen=True, kw_only=True, tag="gap", tag_field="type"):
    """A resumed stream no longer holds what came after ``after``: the lines ``after`` + 1 to
    ``oldest`` - 1 are lost, and the stream resyncs. Its ``id`` is ``oldest`` - 1, the point
    the lines that follow carry on from."""

    id: int
    after: int
    oldest: int


Line = Snapshot | EventLine | TurnLine | Gap
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
    protocol: int  # the version of the protocol it answers in when a request names none
    supported: list[int]  # every version it speaks (SPOKEN)


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


class ProtocolError(msgspec.Struct, frozen=True, kw_only=True):
    """400: the request's Domino-Protocol header names a version of the protocol this gateway
    does not speak, or is no version at all; ``supported`` lists those it speaks."""

    error: Literal["unsupported_protocol"]
    supported: list[int]
    message: str


class TooLargeError(msgspec.Struct, frozen=True, kw_only=True):
    """413: a body over ``max`` bytes."""

    error: Literal["body_too_large"]
    limit: Literal["body_bytes"]
    max: int
    message: str


class Cancelled(msgspec.Struct, frozen=True, kw_only=True):
    """200 to DELETE /matches/{match_id}: called off before it started, or ended by the
    operator (unrated)."""

    match_id: str
    status: Literal["cancelled"]


# -- the pages' reads: replays, ratings, players ----------------------------------------------


class ReplayFrame(msgspec.Struct, frozen=True, kw_only=True):
    """Event number ``id`` as the replay's receiver may see it (C8), and its view just after."""

    id: int
    event: AnyEvent
    view: View


class Replay(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /matches/{match_id}/replay: every event and the view after it, as everyone
    (``seat`` None) or, once the match is over, as one seat saw it."""

    match_id: str
    seat: int | None
    status: Literal["live", "finished"]
    frames: list[ReplayFrame]


class RatingsAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /ratings: a family's table, best first."""

    family: Family
    ratings: list[Rating]


class PlayerResults(msgspec.Struct, frozen=True, kw_only=True):
    """An identity's record over its finished matches (the results projection)."""

    played: int = 0  # matches played to their end
    won: int = 0
    points_for: int = 0
    points_against: int = 0
    aborted: int = 0  # called off, not counted as played
    cancelled: int = 0


class RecentMatch(msgspec.Struct, frozen=True, kw_only=True):
    """One finished match of an identity: who played, its seats, and how it ended."""

    match_id: str
    ended: float  # seconds since the epoch
    family: str
    players: list[str]  # by seat
    seats: list[int]  # the seats the identity held
    sides: list[int]  # each seat's side (every seat of the match, as players)
    scores: list[int]  # by side
    winner: int | None  # the winning side; None: called off
    reason: str | None  # how it ended (MatchEnded.reason)


class PlayerAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /players/{key}: an identity's record, ratings, their history and its latest
    matches."""

    key: str  # an account id, house:<pool> or guest:<name>
    name: str
    kind: Literal["account", "house", "guest"]
    results: PlayerResults
    ratings: list[Rating]  # one per family it is rated in
    history: list[RatingPoint]  # its rating after each rated match, oldest first
    recent: list[RecentMatch]  # a page, newest first
    next: str | None = None  # the cursor of the page of older matches; None: no more


# -- the seat's socket (services/gateway/sockets.py, docs/protocol.md "Socket") ----------------
# Every frame names its match and seat, so that a socket carrying many seats (an account's)
# can send the same frames: one seat's socket is that socket with one seat.


class SocketLine(msgspec.Struct, frozen=True, kw_only=True, tag="line", tag_field="type"):
    """A line of the seat's stream, exactly as its NDJSON stream sends it, with its match and
    seat (the play stream's ``PlayLine``, tagged)."""

    match_id: str
    seat: int
    line: Line


class HelloFrame(msgspec.Struct, frozen=True, kw_only=True, tag="hello", tag_field="type"):
    """The first frame of a socket opened without an ``Authorization`` header (a browser's):
    the token that opens the seat, as the header would carry it."""

    token: str


class MoveFrame(msgspec.Struct, frozen=True, kw_only=True, tag="move", tag_field="type"):
    """A move sent up the socket: ``key`` is its Idempotency-Key, ``move`` what POST /moves
    takes; ``match_id`` and ``seat``, when given, must be the socket's."""

    key: str
    move: MoveBody
    match_id: str | None = None
    seat: int | None = None


class MoveAccepted(msgspec.Struct, frozen=True, kw_only=True, tag="accepted", tag_field="type"):
    """The move sent under ``key`` is in the log at ``version`` (``replayed``: an earlier send
    of this key was applied, this one changed nothing): POST /moves's 200."""

    match_id: str
    seat: int
    key: str
    version: int
    replayed: bool


class MoveRejected(msgspec.Struct, frozen=True, kw_only=True, tag="rejected", tag_field="type"):
    """The referee refused the move sent under ``key``: ``reason``, the ``rule`` of RULES.md it
    breaks, ``message`` for people (POST /moves's 409 rejected). Nothing changed."""

    match_id: str
    seat: int
    key: str
    reason: str
    rule: str
    message: str


class MoveLimited(msgspec.Struct, frozen=True, kw_only=True, tag="limited", tag_field="type"):
    """A frame over a limit (``limit``: moves_per_second, rejected_moves) was not acted on: send
    it again after ``retry_after`` seconds (POST /moves's 429). ``key`` is the move's, when the
    frame had one."""

    match_id: str
    seat: int
    key: str | None
    limit: str
    retry_after: float
    message: str


class MoveTimedOut(msgspec.Struct, frozen=True, kw_only=True, tag="timeout", tag_field="type"):
    """No answer came for the move sent under ``key`` in time; it may still be applied: send it
    again with the same key (POST /moves's 504)."""

    match_id: str
    seat: int
    key: str
    message: str


class SocketError(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="type"):
    """A frame the gateway could not act on, and why: ``error`` is a code (``bad_json``,
    ``bad_frame``, ``unknown_type``, ``frame_too_large``, ``wrong_match``, ``wrong_seat``, or
    the code POST /moves answers: ``invalid_move``, ``bad_idempotency_key``,
    ``idempotency_key_reused``, ``unavailable``, ...). The socket stays open."""

    match_id: str
    seat: int
    error: str
    message: str
    key: str | None = None


SocketFrame = SocketLine | MoveAccepted | MoveRejected | MoveLimited | MoveTimedOut | SocketError
"""Any frame the seat's socket sends but its last (a credential's end sends the stream's
closing line, ``closed``)."""
