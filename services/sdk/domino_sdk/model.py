"""The match's language as a bot reads it: tiles, rules, moves and events, exactly as the gateway
encodes them (JSON objects tagged by ``type``; docs/protocol.md).

A tile is a pair of pips ``(low, high)`` as dealt; an end is where a tile may go. The events are
the match log's, redacted for their reader: another seat's hand and drawn tile are ``None``.
An event of a type this SDK does not know — a newer server's — is read as
:class:`UnknownEvent`, so an older bot keeps playing.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Tile = tuple[int, int]
"""A tile: its two halves' pips, e.g. ``(3, 5)``."""

Hand = tuple[Tile, ...]

End = Literal["left", "right", "up", "down"]
"""An open end: the line's two arms, and the spinner's crosswise sides (Straight, S2)."""

Family = Literal["express", "straight"]
NextLeader = Literal["after_winner", "rotate"]
Outcome = Literal["domino", "blocked", "target", "resigned", "forfeit", "aborted", "cancelled"]
"""How a round ended; the last four end the match in the middle of a round (every hand shown)."""
EndReason = Literal["target", "resigned", "forfeit", "rounds", "aborted", "cancelled"]
"""Why a match ended: a side reached the target, a seat resigned, a seat timed out
``forfeit_after`` turns in a row, the last of ``max_rounds`` rounds was played, a seat aborted
before its side moved, or the operator cancelled it. Aborted and cancelled matches have no
winner."""


class Rules(msgspec.Struct, frozen=True, kw_only=True):
    """A match's rules (RULES.md): the family, the seats, the set and the target."""

    family: Family = "express"
    players: int = 4  # C3
    partners: bool = True  # C3: seats 0 and 2 against 1 and 3
    top: int = 6  # C1: the set's highest double
    target: int = 100  # E6 / S7
    next_leader: NextLeader = "after_winner"  # E3 (Express only)
    reveal_stock: bool = False  # C8: whether a round's end shows the stock

    @property
    def sides(self) -> int:
        """How many scoring sides: 2 with partners, else one per player."""
        return 2 if self.partners else self.players

    def side_of(self, seat: int) -> int:
        """The side a seat scores for, an index into ``scores`` (C3)."""
        return seat % 2 if self.partners else seat


# -- moves: what ``view.legal`` lists, and what a bot posts ------------------------------------


class PlayTile(msgspec.Struct, frozen=True, kw_only=True, tag="play_tile", tag_field="type"):
    """Play ``tile`` from the seat's hand on ``end`` (None for the lead)."""

    seat: int
    tile: Tile
    end: End | None = None


class DrawTile(msgspec.Struct, frozen=True, kw_only=True, tag="draw_tile", tag_field="type"):
    """Draw one tile from the boneyard (Straight only, S3)."""

    seat: int


class PassTurn(msgspec.Struct, frozen=True, kw_only=True, tag="pass_turn", tag_field="type"):
    """Pass: allowed only with no legal play and nothing to draw (E1, S3)."""

    seat: int


Move = PlayTile | DrawTile | PassTurn
"""A move a seat makes on its turn."""


# -- events ------------------------------------------------------------------------------------


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event: something that happened in the match."""


class MatchCreated(Event, frozen=True, tag="match_created"):
    """A match opened: its rules, and by seat the players' names, house bot pools (None: a
    seat played from outside) and accounts (None: a house bot or a guest). A seat that times
    out ``forfeit_after`` turns in a row forfeits (0: never); the match ends after
    ``max_rounds`` rounds (0: no cap)."""

    rules: Rules
    players: tuple[str, ...]
    bots: tuple[str | None, ...] = ()
    deadline_ms: int = 0
    accounts: tuple[str | None, ...] = ()
    forfeit_after: int = 0
    max_rounds: int = 0


class RoundStarted(Event, frozen=True, tag="round_started"):
    """A round was dealt: the reader's own hand is shown, every other hand and the stock are
    None. ``commitment`` binds the referee to the deal's secret seed before anyone moves; the
    seed and salt are None until ``RoundEnded`` reveals them (F1, :mod:`domino_sdk.fairness`).
    """

    round: int
    leader: int
    hands: tuple[Hand | None, ...]
    stock: Hand | None
    hand_sizes: tuple[int, ...]
    stock_size: int
    forced_lead: Tile | None = None  # E2: the first round's lead is forced
    commitment: str | None = None  # F1: sha256(salt ‖ seed), hex
    seed: str | None = None  # F1: always None for a reader: revealed at the round's end
    salt: str | None = None


class TilePlayed(Event, frozen=True, tag="tile_played"):
    """A tile went on the line; ``points`` is what the play scored (S4), 0 in Express."""

    seat: int
    tile: Tile
    end: End | None
    points: int = 0


class TileDrawn(Event, frozen=True, tag="tile_drawn"):
    """A seat drew from the boneyard; ``tile`` is None unless the reader drew it."""

    seat: int
    tile: Tile | None


class TurnPassed(Event, frozen=True, tag="turn_passed"):
    """A seat passed, holding no playable tile with nothing left to draw."""

    seat: int


class TurnTimedOut(Event, frozen=True, tag="turn_timed_out"):
    """A seat's deadline passed; the default move made for it follows."""

    seat: int


class RoundEnded(Event, frozen=True, tag="round_ended"):
    """A round ended: how, who won it, what they scored, and every hand shown (C8); ``seed``
    and ``salt`` reveal the deal's secret, so anyone can check it (F1)."""

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
"""Every event type this SDK knows."""


class UnknownEvent(Event, frozen=True, tag="unknown_event"):
    """An event of a type this SDK does not know, from a newer server: ``name`` is its ``type``
    on the wire and ``fields`` the rest of it, as plain JSON. Nothing on the wire carries this
    tag; :func:`domino_sdk.protocol.decode_event` makes one."""

    name: str
    fields: dict[str, Any]


SeenEvent = AnyEvent | UnknownEvent
"""An event as a bot receives it: one this SDK knows, or an :class:`UnknownEvent`."""
