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
from events.model import AnyEvent, EndReason
from services.lobby.arena import Format
from services.lobby.arenas import Status as ArenaStatus
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


# -- accounts, challenges, seeks, arenas -------------------------------------------------------
# The answers and stream lines of the routes for bots as players (services/gateway/players.py),
# as the lobby's records encode them (services/lobby: ``public()`` and ``summary()``) and as
# the account feeds write them (services/projections/accounts.py);
# tests/gateway/test_openapi_accounts.py checks real ones against the OpenAPI document.

ChallengeStatus = Literal[
    "open", "starting", "started", "declined", "cancelled", "expired", "failed"
]
"""A challenge: waiting for answers, its last acceptance starting the match, its match made;
or closed without one: declined, withdrawn, unanswered in time, or its match could not start."""


class AccountInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What anyone may know of an account (never its token)."""

    id: str  # u- and 12 hex digits
    name: str
    created: float  # seconds since the epoch
    banned: bool


class AccountAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /accounts/{name}, and to the operator's ban and unban."""

    account: AccountInfo


class Registered(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /accounts, 200 to the operator's POST /accounts/{name}/token: the account
    and its token (dab_...), shown this once; only its hash is kept."""

    account: AccountInfo
    token: str


class TokenAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """200 to POST /account/token: the new token, shown once; the old one stops working."""

    token: str


class SeekInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An account waiting in the queue for a game of ``kind``."""

    id: str  # s- and 12 hex digits
    kind: str  # one of the kinds of SeekBody
    account: str
    name: str
    rating: float  # the account's rating in the kind's family when it sought
    since: float  # seconds since the epoch
    expires: float


class Me(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /account: the account, its live matches, its waiting seeks and the id of
    the latest event of its stream."""

    account: AccountInfo
    live: list[str]
    seeks: list[SeekInfo]
    last_event: int


class Challenger(msgspec.Struct, frozen=True, kw_only=True):
    """Who made a challenge: seat 0."""

    id: str
    name: str


class Challenged(msgspec.Struct, frozen=True, kw_only=True):
    """An account a challenge names, and whether it has accepted."""

    id: str
    name: str
    accepted: bool


class ChallengeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A challenge as the accounts in it see it: the challenger at seat 0, the challenged in
    the order named; ``match_id`` once its match is made."""

    id: str  # c- and 12 hex digits
    challenger: Challenger = msgspec.field(name="from")
    to: list[Challenged]
    rules: Rules
    deadline_ms: int
    status: ChallengeStatus
    match_id: str | None
    created: float
    expires: float


class ChallengeAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /challenges; 200 to accept, decline and cancel."""

    challenge: ChallengeInfo


class ChallengeList(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /challenges: made and received, open or closed within the hour, newest
    first."""

    challenges: list[ChallengeInfo]


class SeekAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /seeks (a new seek), 200 (the account's seek of that kind already
    waiting)."""

    seek: SeekInfo


class SeekList(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /seeks: the account's waiting seeks."""

    seeks: list[SeekInfo]


class Withdrawn(msgspec.Struct, frozen=True, kw_only=True):
    """200 to DELETE /seeks/{seek_id}: the seek, out of the queue."""

    seek: SeekInfo
    status: Literal["withdrawn"]


class Cancelled(msgspec.Struct, frozen=True, kw_only=True):
    """200 to DELETE /matches/{match_id}: called off before it started, or ended by the
    operator (unrated)."""

    match_id: str
    status: Literal["cancelled"]


# the account stream


class SeatLinks(msgspec.Struct, frozen=True, kw_only=True):
    """Where one seat of a match is followed and played."""

    match: str
    spectate: str
    stream: str
    moves: str


class MatchLinks(msgspec.Struct, frozen=True, kw_only=True):
    """A match's addresses, and each seat the account holds (by seat number, as a string)."""

    match: str
    spectate: str
    seats: dict[str, SeatLinks]


class AccountState(msgspec.Struct, frozen=True, kw_only=True, tag="state", tag_field="type"):
    """The first line of a fresh account stream: the live matches, the challenges waiting for
    the account's answer and its seeks, as of event ``id`` (resume after it)."""

    id: int
    live: list[str]
    challenges: list[ChallengeInfo]
    seeks: list[SeekInfo]


class ChallengeReceived(
    msgspec.Struct, frozen=True, kw_only=True, tag="challenge", tag_field="type"
):
    """Another account challenged this one."""

    id: int
    ts: float  # seconds since the epoch
    challenge: ChallengeInfo


class ChallengeAccepted(
    msgspec.Struct, frozen=True, kw_only=True, tag="challenge_accepted", tag_field="type"
):
    """An account of a challenge this one is in accepted it (``by``: its name)."""

    id: int
    ts: float
    challenge: ChallengeInfo
    by: str


class ChallengeDeclined(
    msgspec.Struct, frozen=True, kw_only=True, tag="challenge_declined", tag_field="type"
):
    """An account named in a challenge this one is in declined it: it is closed."""

    id: int
    ts: float
    challenge: ChallengeInfo
    by: str


class ChallengeCancelled(
    msgspec.Struct, frozen=True, kw_only=True, tag="challenge_cancelled", tag_field="type"
):
    """The challenger withdrew a challenge made to this account."""

    id: int
    ts: float
    challenge: ChallengeInfo
    by: str


class MatchStarted(
    msgspec.Struct, frozen=True, kw_only=True, tag="match_started", tag_field="type"
):
    """A match with seats held by this account started: its seats, the rules, every seat's
    player, each turn's limit and where to play."""

    id: int
    ts: float
    match_id: str
    seats: list[int]
    rules: Rules
    players: list[str]
    deadline_ms: int
    links: MatchLinks


class MatchFinished(
    msgspec.Struct, frozen=True, kw_only=True, tag="match_finished", tag_field="type"
):
    """A match of this account ended: its seats and side, how it went for it (none: called
    off, unrated), the winning side, the scores by side and why it ended."""

    id: int
    ts: float
    match_id: str
    seats: list[int]
    side: int
    result: Literal["win", "loss", "none"]
    winner: int | None
    scores: list[int]
    reason: EndReason
    players: list[str]


class SeekExpired(msgspec.Struct, frozen=True, kw_only=True, tag="seek_expired", tag_field="type"):
    """A seek waited its whole time unpaired: it left the queue."""

    id: int
    ts: float
    seek: SeekInfo


AccountLine = (
    Gap
    | AccountState
    | ChallengeReceived
    | ChallengeAccepted
    | ChallengeDeclined
    | ChallengeCancelled
    | MatchStarted
    | MatchFinished
    | SeekExpired
)
"""Any line of the account stream."""


class PlayLine(msgspec.Struct, frozen=True, kw_only=True):
    """A line of the play stream: a line of one seat the account holds, exactly as that
    seat's own stream sends it, with its match and seat."""

    match_id: str
    seat: int
    line: Line


# arenas


class EntrantRef(msgspec.Struct, frozen=True, kw_only=True):
    """An arena's entrant: its key (an account id, or house:<pool>) and the name shown."""

    key: str
    name: str


class ArenaEntrant(msgspec.Struct, frozen=True, kw_only=True):
    """An entrant of an arena, and whether it is still in (not left)."""

    key: str
    name: str
    present: bool


class PairingInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One match of an arena's schedule: ``<round>.<board>``, the entrant of each seat."""

    id: str
    round: int
    board: int
    seats: list[EntrantRef]


class InPlay(PairingInfo, frozen=True, kw_only=True):
    """A pairing whose match is being played."""

    match_id: str


class StandingRow(msgspec.Struct, frozen=True, kw_only=True):
    """One line of an arena's standings, best first: points (a win 1, a bye 1), the score for
    and against, the win rate and its Wilson 95% interval."""

    rank: int
    key: str
    name: str
    points: float
    games: int
    wins: int
    byes: int
    score_for: int
    score_against: int
    score_difference: int
    rate: float
    interval: tuple[float, float]


class ArenaSummary(msgspec.Struct, frozen=True, kw_only=True):
    """An arena as a line of a list: its settings, status, how many are in, its round."""

    id: str  # a- and hex digits
    name: str
    rules: Rules
    format: Format
    rounds: int  # a Swiss event's rounds (0: none set)
    games_per_pairing: int
    duration_s: float  # a timed arena's length (0: not timed)
    deadline_ms: int
    status: ArenaStatus
    created: float
    started: float | None
    ends_at: float | None  # when a timed arena stops pairing, once started
    ended: float | None
    entered: int  # entrants still in
    round: int  # rounds drawn so far


class ArenaDetail(ArenaSummary, frozen=True, kw_only=True):
    """An arena whole: its summary, its entrants, the matches in play, the standings."""

    entrants: list[ArenaEntrant]  # in the order they joined
    playing: list[InPlay]
    standings: list[StandingRow]


class ArenaAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """201 to POST /arenas; 200 to GET /arenas/{arena_id}, join, leave and start."""

    arena: ArenaDetail


class ArenaList(msgspec.Struct, frozen=True, kw_only=True):
    """200 to GET /arenas: the latest arenas, newest first."""

    arenas: list[ArenaSummary]


# the arena stream


class ArenaCreated(msgspec.Struct, frozen=True, kw_only=True, tag="created", tag_field="type"):
    """The arena was created."""

    id: int
    ts: float
    arena: ArenaSummary


class ArenaJoined(msgspec.Struct, frozen=True, kw_only=True, tag="joined", tag_field="type"):
    """An entrant came in (or back)."""

    id: int
    ts: float
    entrant: EntrantRef


class ArenaLeft(msgspec.Struct, frozen=True, kw_only=True, tag="left", tag_field="type"):
    """An entrant left: no more matches are paired for it."""

    id: int
    ts: float
    entrant: EntrantRef


class ArenaStarted(msgspec.Struct, frozen=True, kw_only=True, tag="started", tag_field="type"):
    """The operator started the arena."""

    id: int
    ts: float
    arena: ArenaSummary


class ArenaRound(msgspec.Struct, frozen=True, kw_only=True, tag="round", tag_field="type"):
    """A round was drawn: its pairings, and the entrants with a bye."""

    id: int
    ts: float
    round: int
    pairings: list[PairingInfo]
    byes: list[EntrantRef]


class ArenaMatchStarted(
    msgspec.Struct, frozen=True, kw_only=True, tag="match_started", tag_field="type"
):
    """A pairing's match started."""

    id: int
    ts: float
    match_id: str
    pairing: PairingInfo


class ArenaMatchFinished(
    msgspec.Struct, frozen=True, kw_only=True, tag="match_finished", tag_field="type"
):
    """A pairing's match ended: the winning side (None: called off), scores by side."""

    id: int
    ts: float
    match_id: str
    pairing: PairingInfo
    winner: int | None
    scores: list[int]
    reason: EndReason


class ArenaStandings(msgspec.Struct, frozen=True, kw_only=True, tag="standings", tag_field="type"):
    """The standings after a result; ``final`` once the arena is over."""

    id: int
    ts: float
    final: bool
    standings: list[StandingRow]


class ArenaFinished(msgspec.Struct, frozen=True, kw_only=True, tag="finished", tag_field="type"):
    """The arena is over: every match it will have has been played. The stream ends."""

    id: int
    ts: float
    arena: ArenaSummary


ArenaLine = (
    Gap
    | ArenaCreated
    | ArenaJoined
    | ArenaLeft
    | ArenaStarted
    | ArenaRound
    | ArenaMatchStarted
    | ArenaMatchFinished
    | ArenaStandings
    | ArenaFinished
)
"""Any line of an arena's stream."""


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
