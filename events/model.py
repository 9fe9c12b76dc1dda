"""Commands (imperative) and events (past tense): the stored language of the system.

Every message is a msgspec Struct in a tagged union. Tags are explicit and stable: renaming a
class never changes stored data. Evolve these only by adding fields with defaults.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from events.vocabulary import End, Rules, Tile

Hand = tuple[Tile, ...]


class Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every command: something a player or the referee asks for."""


class CreateMatch(Command, frozen=True, tag="create_match"):
    """Open a match with its rules and the names of the players by seat.

    ``bots`` names, by seat, the pool of house bots that plays it (None: an external player);
    empty means every seat is external. ``deadline_ms`` is each turn's time limit (0: none).
    ``accounts`` names, by seat, the account holding it (None: a house bot or a guest); empty
    means none. A seat that times out ``forfeit_after`` turns in a row forfeits the match for
    its side (0: never); the match ends after ``max_rounds`` rounds even if no side reached the
    target (0: no cap).
    """

    rules: Rules
    players: tuple[str, ...]
    bots: tuple[str | None, ...] = ()
    deadline_ms: int = 0
    accounts: tuple[str | None, ...] = ()
    forfeit_after: int = 0
    max_rounds: int = 0


class DealRound(Command, frozen=True, tag="deal_round"):
    """Start the next round with a shuffled set; randomness enters the log here.

    ``order`` is the whole set in shuffled order: seat k gets ``order[7k:7k+7]`` and the rest is
    the stock, drawn from the front. ``first_leader`` is the random draw for the first leader of
    a Straight match (S1); every other leader follows from the rules.

    ``seed`` and ``salt`` (hex) make the deal checkable (F1, docs/fairness.md): with a seed, the
    order and the first leader must be exactly what :mod:`engine.fairness` derives from it, and
    the round records ``sha256(salt ‖ seed)`` before anyone moves. None: a deal made without
    one (older logs, scripted tests).
    """

    order: tuple[Tile, ...]
    first_leader: int | None = None
    seed: str | None = None
    salt: str | None = None


class PlayTile(Command, frozen=True, tag="play_tile"):
    """Play a tile from the seat's hand on an open end (``end`` is None for the lead)."""

    seat: int
    tile: Tile
    end: End | None = None


class DrawTile(Command, frozen=True, tag="draw_tile"):
    """Draw one tile from the boneyard (Straight only, S3)."""

    seat: int


class PassTurn(Command, frozen=True, tag="pass_turn"):
    """Pass: allowed only with no legal play and nothing to draw (E1, S3)."""

    seat: int


class Resign(Command, frozen=True, tag="resign"):
    """Concede the match for the seat's side."""

    seat: int


class TimeOutTurn(Command, frozen=True, tag="time_out_turn"):
    """The referee's clock: the seat to move at match version ``version`` ran out of time."""

    seat: int
    version: int


class Abort(Command, frozen=True, tag="abort"):
    """Call the match off, unrated: allowed only while the seat's side has made no move of its
    own (a default move after a timeout is not its own)."""

    seat: int


class CancelMatch(Command, frozen=True, tag="cancel_match"):
    """The operator calls a live match off, unrated."""


AnyCommand = (
    CreateMatch
    | DealRound
    | PlayTile
    | DrawTile
    | PassTurn
    | Resign
    | TimeOutTurn
    | Abort
    | CancelMatch
)
Move = PlayTile | DrawTile | PassTurn
"""The commands a seat makes on its turn."""


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event: something that happened, recorded in the match log."""


class MatchCreated(Event, frozen=True, tag="match_created"):
    """A match opened; its rules and seats are stored here, whole (see :class:`CreateMatch`)."""

    rules: Rules
    players: tuple[str, ...]
    bots: tuple[str | None, ...] = ()
    deadline_ms: int = 0
    accounts: tuple[str | None, ...] = ()
    forfeit_after: int = 0
    max_rounds: int = 0


class RoundStarted(Event, frozen=True, tag="round_started"):
    """A round was dealt. The log holds every hand and the stock order (secret, C8).

    In what a seat or spectator sees, hidden hands and the stock are ``None``.

    ``commitment`` is ``sha256(salt ‖ seed)`` in hex, public from the start (F1); ``seed`` and
    ``salt`` are secret like the hands until the round ends, when ``RoundEnded`` reveals them.
    All three are None for a round dealt without a seed.
    """

    round: int
    leader: int
    hands: tuple[Hand | None, ...]
    stock: Hand | None
    hand_sizes: tuple[int, ...]
    stock_size: int
    forced_lead: Tile | None = None  # E2: the first round's lead is forced
    commitment: str | None = None  # F1: public
    seed: str | None = None  # F1: secret until the round ends (C8)
    salt: str | None = None


class TilePlayed(Event, frozen=True, tag="tile_played"):
    """A tile went on the line; ``points`` is what the play scored (S4), 0 in Express."""

    seat: int
    tile: Tile
    end: End | None
    points: int = 0


class TileDrawn(Event, frozen=True, tag="tile_drawn"):
    """A seat drew from the boneyard; ``tile`` is ``None`` in what other seats see."""

    seat: int
    tile: Tile | None


class TurnPassed(Event, frozen=True, tag="turn_passed"):
    """A seat passed, holding no playable tile with nothing left to draw."""

    seat: int


class TurnTimedOut(Event, frozen=True, tag="turn_timed_out"):
    """A seat's deadline passed; the default move that follows is recorded after this."""

    seat: int


Outcome = Literal["domino", "blocked", "target", "resigned", "forfeit", "aborted", "cancelled"]
"""How a round ended; the last four end the match in the middle of a round (every hand shown)."""


class RoundEnded(Event, frozen=True, tag="round_ended"):
    """A round ended: how, who won it, what they scored, and every hand shown (C8); with
    ``seed`` and ``salt`` the deal's secret is revealed, so anyone can check it (F1)."""

    round: int
    outcome: Outcome
    winner: int | None  # the seat that dominoed, or the winning side's lowest hand (E3)
    side: int | None  # the side that scored
    points: int
    counts: tuple[int, ...]  # pips left in each seat's hand
    hands: tuple[Hand, ...]
    stock: Hand | None  # shown only with reveal_stock
    scores: tuple[int, ...]  # every side's match score after this round
    seed: str | None = None  # F1: the reveal (None: a round dealt without a seed)
    salt: str | None = None


EndReason = Literal["target", "resigned", "forfeit", "rounds", "aborted", "cancelled"]
"""Why a match ended: a side reached the target (C9), a seat resigned, a seat timed out
``forfeit_after`` turns in a row, the last of ``max_rounds`` rounds was played, a seat aborted
before its side moved, or the operator cancelled it. Aborted and cancelled matches have no
winner."""


class MatchEnded(Event, frozen=True, tag="match_ended"):
    """The match is over: how it ended, and the winning side (None: aborted or cancelled)."""

    winner: int | None  # the winning side
    scores: tuple[int, ...]
    reason: EndReason
    resigned: int | None = None  # the seat that resigned, forfeited or aborted


AnyEvent = (
    MatchCreated
    | RoundStarted
    | TilePlayed
    | TileDrawn
    | TurnPassed
    | TurnTimedOut
    | RoundEnded
    | MatchEnded
)

Reason = Literal[
    "draw_in_express",
    "not_your_turn",
    "no_such_seat",
    "tile_not_in_hand",
    "tile_does_not_match",
    "no_such_end",
    "ambiguous_end",
    "must_lead_forced_tile",
    "must_play",
    "boneyard_empty",
    "must_draw",
    "round_over",
    "match_over",
    "no_match",
    "match_exists",
    "bad_deal",
    "bad_players",
    "bad_rules",
    "stale_timeout",
    "late",
    "too_late_to_abort",
    "bad_command",
    "conflict",
]


REASONS: dict[Reason, tuple[tuple[str, ...], str]] = {
    "draw_in_express": (("E1",), "a draw in Express, where nobody draws"),
    "not_your_turn": (("C4",), "a seat moved out of turn"),
    "no_such_seat": (("C3",), "a seat the match does not have"),
    "tile_not_in_hand": (("C8",), "a tile the seat does not hold"),
    "tile_does_not_match": (("C6",), "a tile that matches no open end"),
    "no_such_end": (("C6", "S2"), "an end the line does not have, or not yet (the spinner's)"),
    "ambiguous_end": (("C6",), "a tile that fits more than one end, with no end named"),
    "must_lead_forced_tile": (("E2",), "the first round's lead is not the forced tile"),
    "must_play": (("S3",), "a draw or pass by a seat holding a playable tile"),
    "boneyard_empty": (("S3",), "a draw from an empty boneyard: pass"),
    "must_draw": (("S3",), "a pass while the boneyard still has tiles: draw"),
    "round_over": (("C10",), "a move after the round ended, before the next deal"),
    "match_over": (("C9",), "a move after the match ended"),
    "no_match": ((), "a command to a match that does not exist (or has not started)"),
    "match_exists": ((), "a match created twice"),
    "bad_deal": (("C1", "C5", "E3", "F1", "S1"), "a deal that is not a whole, fair deal"),
    "bad_players": (("C3",), "seats, names, bot pools or accounts the match cannot have"),
    "bad_rules": (("C1", "C3", "E6", "S7"), "a rule set, deadline or cap the engine refuses"),
    "stale_timeout": ((), "a timeout for a turn that has already passed"),
    "late": ((), "a move that reached the referee after its turn's deadline"),
    "too_late_to_abort": ((), "an abort after the seat's side has moved: resign instead"),
    "bad_command": ((), "a command that cannot be read (or of a newer schema)"),
    "conflict": ((), "the match kept moving while the move was decided: send it again"),
}
"""What each reason means, and the rules (RULES.md) a rejection for it may name ("-" when it
names none): the table of reasons in docs/protocol.md is made from this."""


class Rejection(msgspec.Struct, frozen=True, kw_only=True, tag="rejection", tag_field="type"):
    """Why a command was refused: a reason code, the rule it breaks, and a readable message."""

    reason: Reason
    rule: str
    message: str
