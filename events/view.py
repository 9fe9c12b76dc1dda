"""What a seat, or a spectator, may see of a match at one version: the ``View`` struct (C8).

The engine builds views (``engine.views.view_for``, the one choke point for what a seat may
know); turn messages and the gateway carry them. The struct lives here, with the schema, so
that messages can hold one without depending on the engine.
"""

from __future__ import annotations

import msgspec

from events.model import MatchEnded, Move, RoundEnded
from events.vocabulary import End, Phase, Rules, Tile


class OpenEnd(msgspec.Struct, frozen=True, kw_only=True):
    """An end a tile may be played on: its name, the number it shows, whether a crosswise
    double lies there (S4 counts both halves), and how many tiles its arm holds beyond the lead
    (a spinner side with none counts 0, S4)."""

    end: End
    number: int
    double: bool
    tiles: int = 0


class View(msgspec.Struct, frozen=True, kw_only=True):
    """A seat's (or, with ``seat`` None, a spectator's) view of a match at one version."""

    seat: int | None
    rules: Rules
    players: tuple[str, ...]
    version: int
    phase: Phase
    round: int
    leader: int
    turn: int | None  # the seat to move while a round is on
    scores: tuple[int, ...]
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
