"""What a seat may know of its match at one version (rule C8), as the gateway sends it.

A seat sees its own hand, every tile on the table, how many tiles each player holds and how
many are in the stock, and — what anyone at the table could work out — the numbers each seat
is known to lack. Every hand is shown once a round has ended (``last_round``). On its turn,
``legal`` lists the seat's moves, exactly as it may post them. A spectator's view has ``seat``
and ``hand`` None and never a legal move.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from domino_sdk.model import End, MatchEnded, Move, RoundEnded, Rules, Tile

Phase = Literal["dealing", "playing", "over"]


class OpenEnd(msgspec.Struct, frozen=True, kw_only=True):
    """An end a tile may be played on: its name, the number it shows, whether a crosswise
    double lies there (S4 counts both halves), and how many tiles its arm holds beyond the
    lead."""

    end: End
    number: int
    double: bool
    tiles: int = 0


class View(msgspec.Struct, frozen=True, kw_only=True):
    """A seat's (or, with ``seat`` None, a spectator's) view of a match at ``version``."""

    seat: int | None
    rules: Rules
    players: tuple[str, ...]  # the players' names, by seat
    version: int
    phase: Phase
    round: int
    leader: int
    turn: int | None  # the seat to move while a round is on
    scores: tuple[int, ...]  # by side (Rules.side_of)
    ends: tuple[OpenEnd, ...]
    spinner: Tile | None
    hand: tuple[Tile, ...] | None  # this seat's tiles; None for a spectator
    hand_sizes: tuple[int, ...]
    stock_size: int
    played: tuple[Tile, ...]  # this round's line, in the order the tiles were played
    voids: tuple[tuple[int, ...], ...]  # by seat: numbers it is known to hold none of
    legal: tuple[Move, ...]  # the seat's legal moves when it is its turn, else empty
    legal_points: tuple[int, ...]  # what each legal move would score now (S4), same order
    last_round: RoundEnded | None
    result: MatchEnded | None
