"""Accounts, challenges, seeks and an account's events, exactly as the gateway encodes them.

An account plays as itself: its token (``dab_...``) opens every seat it holds. Two streams tell
it what it needs:

- the account stream (``GET /api/v1/account/stream``): one :class:`AccountEvent` a line, each
  with an ``id`` (1, 2, 3 …) to resume after — challenges made to it and answered, its matches
  starting and finishing, its seeks expiring. A fresh connection (not resuming) begins with an
  :class:`AccountState`: where things stand, and the id to resume after;
- the play stream (``GET /api/v1/account/play``): every line of every seat it holds, each
  wrapped as a :class:`PlayLine` with its match and seat. A fresh connection starts each live
  match with a snapshot (and the turn, when it is the seat's move).

Read them with :func:`decode_account_event` and :func:`decode_play_line`: as with the match's
events, an account event of a type this SDK does not know is read as
:class:`UnknownAccountEvent`, and a seat line of a type it does not know is skipped.
"""

from __future__ import annotations

from typing import Any, get_args

import msgspec

from domino_sdk.model import Rules
from domino_sdk.protocol import Line, decode_line


class Account(msgspec.Struct, frozen=True, kw_only=True):
    """An account: its id (``u-`` and 12 hex digits), its name, when it was made."""

    id: str
    name: str
    created: float = 0.0  # seconds since the epoch
    banned: bool = False


class Registered(msgspec.Struct, frozen=True, kw_only=True):
    """A new account and its token: the token is shown this once."""

    account: Account
    token: str


class Seek(msgspec.Struct, frozen=True, kw_only=True):
    """An account waiting in the queue for a game of ``kind`` (e.g. ``express-4p``)."""

    id: str
    kind: str
    account: str
    name: str
    rating: float = 0.0
    since: float = 0.0
    expires: float = 0.0


class Me(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /account``: the account, its live matches, its waiting seeks, and the id of the
    latest event of its stream (to follow it from there)."""

    account: Account
    live: tuple[str, ...] = ()
    seeks: tuple[Seek, ...] = ()
    last_event: int = 0


class Challenger(msgspec.Struct, frozen=True, kw_only=True):
    """Who made a challenge."""

    id: str
    name: str


class Challenged(msgspec.Struct, frozen=True, kw_only=True):
    """An account a challenge names, and whether it has accepted."""

    id: str
    name: str
    accepted: bool = False


class Challenge(msgspec.Struct, frozen=True, kw_only=True):
    """A challenge: the challenger sits at seat 0, the challenged in the order named; the
    match starts when the last of them accepts (``match_id`` is then set)."""

    id: str
    challenger: Challenger = msgspec.field(name="from")
    to: tuple[Challenged, ...]
    rules: Rules
    deadline_ms: int = 0
    # open, starting or started (its match made), or declined, cancelled, expired, failed
    status: str = "open"
    match_id: str | None = None
    created: float = 0.0
    expires: float = 0.0


class SeatLinks(msgspec.Struct, frozen=True, kw_only=True):
    """Where one seat's stream is read and its moves are posted."""

    stream: str
    moves: str


class MatchLinks(msgspec.Struct, frozen=True, kw_only=True):
    """A match's addresses: its record, its spectator stream, and each seat the account
    holds (keyed by the seat's number as a string)."""

    match: str
    spectate: str
    seats: dict[str, SeatLinks] = msgspec.field(default_factory=dict)


# -- the account stream ------------------------------------------------------------------------


class AccountEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every account event: its number ``id`` on the account's stream, and when."""

    id: int = 0
    ts: float = 0.0


class AccountState(AccountEvent, frozen=True, tag="state"):
    """The first line of a fresh account stream: the account's live matches, the challenges
    waiting for its answer and its seeks, as of event ``id`` (where a reconnect resumes)."""

    live: tuple[str, ...] = ()
    challenges: tuple[Challenge, ...] = ()
    seeks: tuple[Seek, ...] = ()


class AccountGap(AccountEvent, frozen=True, tag="gap"):
    """The stream was resumed after ``after``, but the account's feed keeps only its latest
    events: those from ``after`` + 1 to ``oldest`` - 1 (= ``id``) are lost. An AccountState
    follows, where things stand now, and the stream goes on from it."""

    after: int
    oldest: int


class ChallengeReceived(AccountEvent, frozen=True, tag="challenge"):
    """Another account challenged this one: accept, decline, or let it expire."""

    challenge: Challenge


class ChallengeAccepted(AccountEvent, frozen=True, tag="challenge_accepted"):
    """An account of a challenge this one is in accepted it (``by`` is its name)."""

    challenge: Challenge
    by: str = ""


class ChallengeDeclined(AccountEvent, frozen=True, tag="challenge_declined"):
    """An account named in a challenge this one is in declined it: it is closed."""

    challenge: Challenge
    by: str = ""


class ChallengeCancelled(AccountEvent, frozen=True, tag="challenge_cancelled"):
    """The challenger withdrew a challenge made to this account."""

    challenge: Challenge
    by: str = ""


class MatchStarted(AccountEvent, frozen=True, tag="match_started"):
    """A match with seats held by this account started: the seats, rules, players by seat,
    each turn's limit, and where to play."""

    match_id: str
    seats: tuple[int, ...]
    rules: Rules
    players: tuple[str, ...] = ()
    deadline_ms: int = 0
    links: MatchLinks | None = None


class MatchFinished(AccountEvent, frozen=True, tag="match_finished"):
    """A match of this account ended: its seats and side, how it went for the account, the
    winning side (None: called off), the final scores by side and why it ended."""

    match_id: str
    seats: tuple[int, ...]
    side: int
    result: str  # win, loss, or none when the match was called off (unrated)
    winner: int | None
    scores: tuple[int, ...]
    reason: str  # as MatchEnded.reason: target, resigned, forfeit, rounds, aborted, cancelled
    players: tuple[str, ...] = ()


class SeekExpired(AccountEvent, frozen=True, tag="seek_expired"):
    """A seek waited its whole time and nobody was paired with it: it left the queue."""

    seek: Seek


AnyAccountEvent = (
    AccountState
    | AccountGap
    | ChallengeReceived
    | ChallengeAccepted
    | ChallengeDeclined
    | ChallengeCancelled
    | MatchStarted
    | MatchFinished
    | SeekExpired
)
"""Every account event this SDK knows."""


class UnknownAccountEvent(AccountEvent, frozen=True, tag="unknown_account_event"):
    """An account event of a type this SDK does not know, from a newer server: ``name`` is its
    ``type`` on the wire and ``fields`` the rest of it, as plain JSON."""

    name: str
    fields: dict[str, Any]


SeenAccountEvent = AnyAccountEvent | UnknownAccountEvent
"""An account event as a bot receives it: one this SDK knows, or an UnknownAccountEvent."""


class _Tagged(msgspec.Struct, frozen=True):
    type: str


_EVENT: msgspec.json.Decoder[AnyAccountEvent] = msgspec.json.Decoder(AnyAccountEvent)
_TAG = msgspec.json.Decoder(_Tagged)
_JSON = msgspec.json.Decoder()
ACCOUNT_EVENT_TYPES = frozenset(str(t.__struct_config__.tag) for t in get_args(AnyAccountEvent))


def decode_account_event(data: bytes) -> SeenAccountEvent:
    """One line of the account stream; one of a type this SDK does not know becomes an
    UnknownAccountEvent.

    Raises msgspec.DecodeError for a line that is not JSON, and msgspec.ValidationError for a
    known event of the wrong shape (a broken server: a newer one only adds fields).
    """
    try:
        return _EVENT.decode(data)
    except msgspec.ValidationError:
        kind = _TAG.decode(data).type
        if kind in ACCOUNT_EVENT_TYPES:
            raise
        fields = _JSON.decode(data)
        del fields["type"]
        n, ts = fields.pop("id", 0), fields.pop("ts", 0.0)
        return UnknownAccountEvent(id=n, ts=ts, name=kind, fields=fields)


# -- the play stream ---------------------------------------------------------------------------


class PlayLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of one seat the account holds: a snapshot, an event or a turn (as on that
    seat's own stream), with its match and seat."""

    match_id: str
    seat: int
    line: Line


class _PlayLineOnWire(msgspec.Struct, frozen=True, kw_only=True):
    match_id: str
    seat: int
    line: msgspec.Raw


_PLAY = msgspec.json.Decoder(_PlayLineOnWire)


def decode_play_line(data: bytes) -> PlayLine | None:
    """One line of the play stream; None when the seat line inside is of a type this SDK does
    not know.

    Raises msgspec.DecodeError for a line that is not JSON, and msgspec.ValidationError for
    one of the wrong shape.
    """
    wrapped = _PLAY.decode(data)
    line = decode_line(bytes(wrapped.line))
    if line is None:
        return None
    return PlayLine(match_id=wrapped.match_id, seat=wrapped.seat, line=line)
