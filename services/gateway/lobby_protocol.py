"""What goes over the wire for bots as players: the request bodies and answers of the
accounts, challenges, seeks and arenas (services/gateway/resources/), and the lines of the
account's and an arena's streams.

The answers are as the lobby's records encode them (services/lobby: ``public()`` and
``summary()``) and as the account feeds write them (services/projections/accounts.py);
tests/gateway/test_openapi_accounts.py checks real ones against the OpenAPI document. Like
services/gateway/protocol.py, every struct here is a wire shape the schema check records.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from domino_sdk.protocol import RulesBody

from engine.rules import Rules
from events.model import EndReason
from services.gateway.protocol import Gap, Line
from services.lobby.arena import Format
from services.lobby.arenas import Status as ArenaStatus

# -- request bodies ----------------------------------------------------------------------------


class RegisterBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A new account: its name."""

    name: str


class ChallengeBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A challenge: the accounts named, in seat order after the challenger, and the rules."""

    opponents: list[str]
    rules: RulesBody = msgspec.field(default_factory=RulesBody)
    deadline_ms: int | None = None


class ArenaBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A new arena: its name, rules and format; rounds for Swiss, a duration for a timed arena,
    games per pairing for a round robin."""

    name: str
    rules: RulesBody = msgspec.field(default_factory=RulesBody)
    format: str = "round_robin"
    rounds: int = 0
    games_per_pairing: int = 1
    duration_s: float = 0.0
    deadline_ms: int | None = None


class EntrantBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A house bot pool the operator enters in an arena."""

    pool: str


class SeekBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A seek: the kind of game wanted."""

    kind: str


# -- accounts, challenges, seeks, arenas: answers and stream lines -----------------------------

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
