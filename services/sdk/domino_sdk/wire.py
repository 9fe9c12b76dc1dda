"""The protocol's wire shapes as the bot SDK reads them: generated from
events/schemas/wire-1.json by `make schema`; do not edit.

Every struct the gateway writes or reads that the server defines: its stream lines, the
events as a seat sees them, the view, the socket's frames and its answers. The server's
structs are the one source: ``make schema`` records their JSON Schema and writes this module
from it (services/cli/sdkgen.py); ``make lint`` fails when it is not what that file gives.
The SDK's own pieces (request bodies, the event base and its fallback, helpers) are
imported; domino_sdk.model, domino_sdk.views and domino_sdk.protocol document what a bot uses.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from domino_sdk.base import Event, RulesHelpers, UnknownEvent
from domino_sdk.bodies import MoveBody, RulesBody


class AccountAnswer(msgspec.Struct, frozen=True, kw_only=True):
    account: AccountInfo


class AccountFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="account"):
    cursor: str
    line: dict[str, Any]


class AccountInfo(msgspec.Struct, frozen=True, kw_only=True):
    banned: bool
    created: float
    id: str
    name: str


class AccountMoveFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="move"):
    key: str
    match_id: str
    move: MoveBody
    seat: int


class AccountState(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="state"):
    challenges: tuple[ChallengeInfo, ...]
    id: int
    live: tuple[str, ...]
    seeks: tuple[SeekInfo, ...]


class ArenaAnswer(msgspec.Struct, frozen=True, kw_only=True):
    arena: ArenaDetail


class ArenaBody(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    deadline_ms: int | None = None
    duration_s: float = 0.0
    format: str = "round_robin"
    games_per_pairing: int = 1
    rounds: int = 0
    rules: RulesBody = msgspec.field(default_factory=RulesBody)


class ArenaCreated(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="created"):
    arena: ArenaSummary
    id: int
    ts: float


class ArenaDetail(msgspec.Struct, frozen=True, kw_only=True):
    created: float
    deadline_ms: int
    duration_s: float
    ended: float | None
    ends_at: float | None
    entered: int
    entrants: tuple[ArenaEntrant, ...]
    format: Literal["arena", "round_robin", "swiss"]
    games_per_pairing: int
    id: str
    name: str
    playing: tuple[InPlay, ...]
    round: int
    rounds: int
    rules: Rules
    standings: tuple[StandingRow, ...]
    started: float | None
    status: Literal["finished", "open", "running"]


class ArenaEntrant(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str
    present: bool


class ArenaFinished(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="finished"):
    arena: ArenaSummary
    id: int
    ts: float


class ArenaJoined(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="joined"):
    entrant: EntrantRef
    id: int
    ts: float


class ArenaLeft(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="left"):
    entrant: EntrantRef
    id: int
    ts: float


class ArenaList(msgspec.Struct, frozen=True, kw_only=True):
    arenas: tuple[ArenaSummary, ...]


class ArenaMatchFinished(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="match_finished"
):
    id: int
    match_id: str
    pairing: PairingInfo
    reason: Literal["aborted", "cancelled", "forfeit", "resigned", "rounds", "target"]
    scores: tuple[int, ...]
    ts: float
    winner: int | None


class ArenaMatchStarted(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="match_started"
):
    id: int
    match_id: str
    pairing: PairingInfo
    ts: float


class ArenaRound(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="round"):
    byes: tuple[EntrantRef, ...]
    id: int
    pairings: tuple[PairingInfo, ...]
    round: int
    ts: float


class ArenaStandings(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="standings"):
    final: bool
    id: int
    standings: tuple[StandingRow, ...]
    ts: float


class ArenaStarted(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="started"):
    arena: ArenaSummary
    id: int
    ts: float


class ArenaSummary(msgspec.Struct, frozen=True, kw_only=True):
    created: float
    deadline_ms: int
    duration_s: float
    ended: float | None
    ends_at: float | None
    entered: int
    format: Literal["arena", "round_robin", "swiss"]
    games_per_pairing: int
    id: str
    name: str
    round: int
    rounds: int
    rules: Rules
    started: float | None
    status: Literal["finished", "open", "running"]


class Cancelled(msgspec.Struct, frozen=True, kw_only=True):
    match_id: str
    status: Literal["cancelled"]


class ChallengeAccepted(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="challenge_accepted"
):
    by: str
    challenge: ChallengeInfo
    id: int
    ts: float


class ChallengeAnswer(msgspec.Struct, frozen=True, kw_only=True):
    challenge: ChallengeInfo


class ChallengeBody(msgspec.Struct, frozen=True, kw_only=True):
    opponents: tuple[str, ...]
    deadline_ms: int | None = None
    rules: RulesBody = msgspec.field(default_factory=RulesBody)


class ChallengeCancelled(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="challenge_cancelled"
):
    by: str
    challenge: ChallengeInfo
    id: int
    ts: float


class ChallengeDeclined(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="challenge_declined"
):
    by: str
    challenge: ChallengeInfo
    id: int
    ts: float


class ChallengeInfo(msgspec.Struct, frozen=True, kw_only=True):
    created: float
    deadline_ms: int
    expires: float
    challenger: Challenger = msgspec.field(name="from")
    id: str
    match_id: str | None
    rules: Rules
    status: Literal["cancelled", "declined", "expired", "failed", "open", "started", "starting"]
    to: tuple[Challenged, ...]


class ChallengeList(msgspec.Struct, frozen=True, kw_only=True):
    challenges: tuple[ChallengeInfo, ...]


class ChallengeReceived(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="challenge"
):
    challenge: ChallengeInfo
    id: int
    ts: float


class Challenged(msgspec.Struct, frozen=True, kw_only=True):
    accepted: bool
    id: str
    name: str


class Challenger(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str


class ChannelError(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="error"):
    error: str
    message: str
    key: str | None = None
    match_id: str | None = None
    seat: int | None = None


class ChannelLimited(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="limited"):
    limit: str
    message: str
    retry_after: float
    key: str | None = None
    match_id: str | None = None
    seat: int | None = None


class ChannelLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="line"):
    cursor: str
    line: Line
    match_id: str
    seat: int


class Created(msgspec.Struct, frozen=True, kw_only=True):
    links: Links
    match: MatchInfo
    owner_token: str | None = None


class DrawTile(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="draw_tile"):
    seat: int


class EntrantBody(msgspec.Struct, frozen=True, kw_only=True):
    pool: str


class EntrantRef(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    name: str


class Error(msgspec.Struct, frozen=True, kw_only=True):
    error: str
    message: str


class EventLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="event"):
    event: SeenEvent
    id: int


class Gap(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="gap"):
    after: int
    id: int
    oldest: int


class Health(msgspec.Struct, frozen=True, kw_only=True):
    following: int
    ok: bool
    protocol: int
    supported: tuple[int, ...]


class HelloFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="hello"):
    token: str


class InPlay(msgspec.Struct, frozen=True, kw_only=True):
    board: int
    id: str
    match_id: str
    round: int
    seats: tuple[EntrantRef, ...]


class Joined(msgspec.Struct, frozen=True, kw_only=True):
    links: Links
    match: MatchInfo
    match_id: str
    seat: int
    token: str


class LimitError(msgspec.Struct, frozen=True, kw_only=True):
    error: Literal["rate_limited"]
    limit: str
    message: str
    retry_after: float


class Links(msgspec.Struct, frozen=True, kw_only=True):
    match: str
    spectate: str
    moves: str | None = None
    stream: str | None = None


class MatchCreated(Event, frozen=True, kw_only=True, tag="match_created"):
    players: tuple[str, ...]
    rules: Rules
    accounts: tuple[str | None, ...] = ()
    bots: tuple[str | None, ...] = ()
    deadline_ms: int = 0
    forfeit_after: int = 0
    max_rounds: int = 0


class MatchDetail(msgspec.Struct, frozen=True, kw_only=True):
    links: Links
    match_id: str
    version: int
    created: float | None = None
    deadline_ms: int | None = None
    forfeit_after: int | None = None
    max_rounds: int | None = None
    rules: Rules | None = None
    seats: tuple[SeatInfo, ...] | None = None
    status: Literal["cancelled", "open", "started"] | None = None


class MatchEnded(Event, frozen=True, kw_only=True, tag="match_ended"):
    reason: Literal["aborted", "cancelled", "forfeit", "resigned", "rounds", "target"]
    scores: tuple[int, ...]
    winner: int | None
    resigned: int | None = None


class MatchFinished(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="match_finished"
):
    id: int
    match_id: str
    players: tuple[str, ...]
    reason: Literal["aborted", "cancelled", "forfeit", "resigned", "rounds", "target"]
    result: Literal["loss", "none", "win"]
    scores: tuple[int, ...]
    seats: tuple[int, ...]
    side: int
    ts: float
    winner: int | None


class MatchInfo(msgspec.Struct, frozen=True, kw_only=True):
    created: float
    deadline_ms: int
    match_id: str
    rules: Rules
    seats: tuple[SeatInfo, ...]
    status: Literal["cancelled", "open", "started"]
    forfeit_after: int = 0
    max_rounds: int = 0


class MatchLinks(msgspec.Struct, frozen=True, kw_only=True):
    match: str
    seats: dict[str, SeatLinks]
    spectate: str


class MatchStarted(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="match_started"
):
    deadline_ms: int
    id: int
    links: MatchLinks
    match_id: str
    players: tuple[str, ...]
    rules: Rules
    seats: tuple[int, ...]
    ts: float


class Me(msgspec.Struct, frozen=True, kw_only=True):
    account: AccountInfo
    last_event: int
    live: tuple[str, ...]
    seeks: tuple[SeekInfo, ...]


class MoveAccepted(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="accepted"):
    key: str
    match_id: str
    replayed: bool
    seat: int
    version: int


class MoveAnswer(msgspec.Struct, frozen=True, kw_only=True):
    accepted: Literal[True]
    replayed: bool
    version: int


class MoveFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="move"):
    key: str
    move: MoveBody
    match_id: str | None = None
    seat: int | None = None


class MoveLimited(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="limited"):
    key: str | None
    limit: str
    match_id: str
    message: str
    retry_after: float
    seat: int


class MoveRejected(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="rejected"):
    key: str
    match_id: str
    message: str
    reason: str
    rule: str
    seat: int


class MoveTimedOut(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="timeout"):
    key: str
    match_id: str
    message: str
    seat: int


class OpenEnd(msgspec.Struct, frozen=True, kw_only=True):
    double: bool
    end: Literal["down", "left", "right", "up"]
    number: int
    tiles: int = 0


class PairingInfo(msgspec.Struct, frozen=True, kw_only=True):
    board: int
    id: str
    round: int
    seats: tuple[EntrantRef, ...]


class PassTurn(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="pass_turn"):
    seat: int


class PlayLine(msgspec.Struct, frozen=True, kw_only=True):
    line: Line
    match_id: str
    seat: int


class PlayTile(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="play_tile"):
    seat: int
    tile: tuple[int, int]
    end: Literal["down", "left", "right", "up"] | None = None


class PlayerAnswer(msgspec.Struct, frozen=True, kw_only=True):
    history: tuple[RatingPoint, ...]
    key: str
    kind: Literal["account", "guest", "house"]
    name: str
    ratings: tuple[Rating, ...]
    recent: tuple[RecentMatch, ...]
    results: PlayerResults
    next: str | None = None


class PlayerResults(msgspec.Struct, frozen=True, kw_only=True):
    aborted: int = 0
    cancelled: int = 0
    played: int = 0
    points_against: int = 0
    points_for: int = 0
    won: int = 0


class ProtocolError(msgspec.Struct, frozen=True, kw_only=True):
    error: Literal["unsupported_protocol"]
    message: str
    supported: tuple[int, ...]


class Rating(msgspec.Struct, frozen=True, kw_only=True):
    family: str
    mu: float
    name: str
    ordinal: float
    rated: int
    sigma: float
    won: int
    key: str = ""


class RatingPoint(msgspec.Struct, frozen=True, kw_only=True):
    ended: float
    family: str
    match_id: str
    mu: float
    ordinal: float
    sigma: float


class RatingsAnswer(msgspec.Struct, frozen=True, kw_only=True):
    family: Literal["express", "straight"]
    ratings: tuple[Rating, ...]


class RecentMatch(msgspec.Struct, frozen=True, kw_only=True):
    ended: float
    family: str
    match_id: str
    players: tuple[str, ...]
    reason: str | None
    scores: tuple[int, ...]
    seats: tuple[int, ...]
    sides: tuple[int, ...]
    winner: int | None


class RegisterBody(msgspec.Struct, frozen=True, kw_only=True):
    name: str


class Registered(msgspec.Struct, frozen=True, kw_only=True):
    account: AccountInfo
    token: str


class RejectedError(msgspec.Struct, frozen=True, kw_only=True):
    error: Literal["rejected"]
    message: str
    reason: str
    rule: str
    accepted: Literal[False] | None = None


class Replay(msgspec.Struct, frozen=True, kw_only=True):
    frames: tuple[ReplayFrame, ...]
    match_id: str
    seat: int | None
    status: Literal["finished", "live"]


class ReplayFrame(msgspec.Struct, frozen=True, kw_only=True):
    event: SeenEvent
    id: int
    view: View


class RoundEnded(Event, frozen=True, kw_only=True, tag="round_ended"):
    counts: tuple[int, ...]
    hands: tuple[tuple[tuple[int, int], ...], ...]
    outcome: Literal["aborted", "blocked", "cancelled", "domino", "forfeit", "resigned", "target"]
    points: int
    round: int
    scores: tuple[int, ...]
    side: int | None
    stock: tuple[tuple[int, int], ...] | None
    winner: int | None
    salt: str | None = None
    seed: str | None = None


class RoundStarted(Event, frozen=True, kw_only=True, tag="round_started"):
    hand_sizes: tuple[int, ...]
    hands: tuple[tuple[tuple[int, int], ...] | None, ...]
    leader: int
    round: int
    stock: tuple[tuple[int, int], ...] | None
    stock_size: int
    commitment: str | None = None
    forced_lead: tuple[int, int] | None = None
    salt: str | None = None
    seed: str | None = None


class Rules(msgspec.Struct, RulesHelpers, frozen=True, kw_only=True):
    family: Literal["express", "straight"] = "express"
    next_leader: Literal["after_winner", "rotate"] = "after_winner"
    partners: bool = True
    players: int = 4
    reveal_stock: bool = False
    target: int = 100
    top: int = 6


class SeatInfo(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["bot", "open", "taken"]
    name: str
    pool: str | None
    seat: int
    account: str | None = None


class SeatLinks(msgspec.Struct, frozen=True, kw_only=True):
    match: str
    moves: str
    spectate: str
    stream: str


class SeatOf(msgspec.Struct, frozen=True, kw_only=True):
    links: Links
    match_id: str
    seat: int


class SeekAnswer(msgspec.Struct, frozen=True, kw_only=True):
    seek: SeekInfo


class SeekBody(msgspec.Struct, frozen=True, kw_only=True):
    kind: str


class SeekExpired(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="seek_expired"):
    id: int
    seek: SeekInfo
    ts: float


class SeekInfo(msgspec.Struct, frozen=True, kw_only=True):
    account: str
    expires: float
    id: str
    kind: str
    name: str
    rating: float
    since: float


class SeekList(msgspec.Struct, frozen=True, kw_only=True):
    seeks: tuple[SeekInfo, ...]


class Snapshot(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="snapshot"):
    id: int
    match_id: str
    seat: int | None
    view: View | None
    deadline: float | None = None
    remaining_ms: int | None = None


class SocketError(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="error"):
    error: str
    match_id: str
    message: str
    seat: int
    key: str | None = None


class SocketLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="line"):
    line: Line
    match_id: str
    seat: int


class StandingRow(msgspec.Struct, frozen=True, kw_only=True):
    byes: int
    games: int
    interval: tuple[float, float]
    key: str
    name: str
    points: float
    rank: int
    rate: float
    score_against: int
    score_difference: int
    score_for: int
    wins: int


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    ends: tuple[tuple[str, int], ...]
    family: str
    match_id: str
    players: tuple[str, ...]
    round: int
    scores: tuple[int, ...]
    status: str
    turn: int | None
    version: int
    reason: str | None = None
    updated: float = 0.0
    winner: int | None = None


class TileDrawn(Event, frozen=True, kw_only=True, tag="tile_drawn"):
    seat: int
    tile: tuple[int, int] | None


class TilePlayed(Event, frozen=True, kw_only=True, tag="tile_played"):
    end: Literal["down", "left", "right", "up"] | None
    seat: int
    tile: tuple[int, int]
    points: int = 0


class TokenAnswer(msgspec.Struct, frozen=True, kw_only=True):
    token: str


class TooLargeError(msgspec.Struct, frozen=True, kw_only=True):
    error: Literal["body_too_large"]
    limit: Literal["body_bytes"]
    max: int
    message: str


class TurnLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="turn"):
    id: int
    view: View
    deadline: float | None = None
    remaining_ms: int | None = None


class TurnPassed(Event, frozen=True, kw_only=True, tag="turn_passed"):
    seat: int


class TurnTimedOut(Event, frozen=True, kw_only=True, tag="turn_timed_out"):
    seat: int


class View(msgspec.Struct, frozen=True, kw_only=True):
    ends: tuple[OpenEnd, ...]
    hand: tuple[tuple[int, int], ...] | None
    hand_sizes: tuple[int, ...]
    last_round: RoundEnded | None
    leader: int
    legal: tuple[Move, ...]
    legal_points: tuple[int, ...]
    phase: Literal["dealing", "over", "playing"]
    played: tuple[tuple[int, int], ...]
    players: tuple[str, ...]
    result: MatchEnded | None
    round: int
    rules: Rules
    scores: tuple[int, ...]
    seat: int | None
    spinner: tuple[int, int] | None
    stock_size: int
    turn: int | None
    version: int
    voids: tuple[tuple[int, ...], ...]


class Withdrawn(msgspec.Struct, frozen=True, kw_only=True):
    seek: SeekInfo
    status: Literal["withdrawn"]


AccountLine = (
    AccountState
    | ChallengeAccepted
    | ChallengeCancelled
    | ChallengeDeclined
    | ChallengeReceived
    | Gap
    | MatchFinished
    | MatchStarted
    | SeekExpired
)
AnyEvent = (
    MatchCreated
    | MatchEnded
    | RoundEnded
    | RoundStarted
    | TileDrawn
    | TilePlayed
    | TurnPassed
    | TurnTimedOut
)
ArenaLine = (
    ArenaCreated
    | ArenaFinished
    | ArenaJoined
    | ArenaLeft
    | ArenaMatchFinished
    | ArenaMatchStarted
    | ArenaRound
    | ArenaStandings
    | ArenaStarted
    | Gap
)
ChannelFrame = AccountFrame | ChannelLine
Line = EventLine | Gap | Snapshot | TurnLine
Move = DrawTile | PassTurn | PlayTile
SocketFrame = MoveAccepted | MoveLimited | MoveRejected | MoveTimedOut | SocketError | SocketLine
SeenEvent = AnyEvent | UnknownEvent
