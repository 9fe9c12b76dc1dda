"""Scripted deals for the rules tests: hands and stock in, a ``DealRound`` order out.

A scripted move is written as text, seat first: ``"1: 5-3 left"`` plays 5-3 on the left end,
``"0: 6-6"`` leads (or lets the engine pick the only matching end), ``"2: draw"`` and
``"3: pass"`` draw and pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from engine.board import End
from engine.game import apply, decide
from engine.rules import HAND_SIZE, Rules
from engine.state import MatchState
from engine.tiles import Tile, full_set, parse_tile
from events.model import (
    AnyCommand,
    AnyEvent,
    CreateMatch,
    DealRound,
    DrawTile,
    MatchEnded,
    Move,
    PassTurn,
    PlayTile,
    Rejection,
    RoundEnded,
    RoundStarted,
    TilePlayed,
    TurnPassed,
)

Tiles = str | Iterable[Tile]
"""Tiles written as text (``"6-6 5-6 0-0"``) or given as tuples."""


def tiles(text: Tiles) -> tuple[Tile, ...]:
    """The tiles of a space-separated list such as ``"6-6 5-6 0-0"``, in the order written."""
    if isinstance(text, str):
        return tuple(parse_tile(word) for word in text.split())
    return tuple(parse_tile(f"{a}-{b}") for a, b in text)


def deal_order(
    hands: Sequence[Tiles], stock: Tiles | None = None, *, top: int = 6
) -> tuple[Tile, ...]:
    """The ``DealRound.order`` that gives seat k ``hands[k]`` and leaves ``stock``, front first.

    With ``stock`` None the tiles nobody was dealt form the stock in canonical order. Raises
    ValueError unless each hand has 7 tiles and hands plus stock are the whole double-``top``
    set, each tile once (C1, C5).
    """
    dealt = [tiles(hand) for hand in hands]
    for seat, hand in enumerate(dealt):
        if len(hand) != HAND_SIZE:
            raise ValueError(f"seat {seat} is dealt {len(hand)} tiles, not {HAND_SIZE}")
    order = [t for hand in dealt for t in hand]
    if stock is None:
        taken = set(order)
        rest = tuple(t for t in full_set(top) if t not in taken)
    else:
        rest = tiles(stock)
    order.extend(rest)
    whole = full_set(top)
    if sorted(order) != list(whole):
        missing = sorted(set(whole) - set(order))
        doubled = sorted({t for t in order if order.count(t) > 1})
        raise ValueError(
            f"not the whole double-{top} set: missing {missing}, more than once {doubled}"
        )
    return tuple(order)


def parse_move(text: str) -> Move:
    """The command a scripted move stands for, e.g. ``"1: 5-3 left"``, ``"2: draw"``."""
    seat_text, _, rest = text.partition(":")
    seat = int(seat_text)
    words = rest.split()
    if words == ["draw"]:
        return DrawTile(seat=seat)
    if words == ["pass"]:
        return PassTurn(seat=seat)
    if len(words) not in (1, 2):
        raise ValueError(f"not a scripted move: {text!r}")
    end = cast(End, words[1]) if len(words) == 2 else None
    return PlayTile(seat=seat, tile=parse_tile(words[0]), end=end)


class Table:
    """One match driven by scripted commands; ``state`` is the engine's, ``log`` every event."""

    def __init__(
        self,
        family: str = "express",
        *,
        forfeit_after: int = 0,
        max_rounds: int = 0,
        **options: object,
    ) -> None:
        rules = Rules.make(family, **options)  # type: ignore[arg-type]
        names = tuple(f"p{seat}" for seat in range(rules.players))
        create = CreateMatch(
            rules=rules, players=names, forfeit_after=forfeit_after, max_rounds=max_rounds
        )
        state, events = apply(None, create)
        self.state: MatchState = state
        self.log: list[AnyEvent] = list(events)

    @property
    def rules(self) -> Rules:
        """The match's rules."""
        return self.state.rules

    def send(self, command: AnyCommand) -> list[AnyEvent]:
        """Apply one command (it must be accepted) and return its events."""
        state, events = apply(self.state, command)
        self.state = state
        self.log.extend(events)
        return events

    def deal(
        self, hands: Sequence[Tiles], stock: Tiles | None = None, *, first_leader: int | None = None
    ) -> RoundStarted:
        """Deal the scripted round (see :func:`deal_order`) and return its ``RoundStarted``."""
        order = deal_order(hands, stock, top=self.rules.top)
        (started,) = self.send(DealRound(order=order, first_leader=first_leader))
        assert isinstance(started, RoundStarted)
        return started

    def deal_canonical(self, *, first_leader: int | None = None) -> RoundStarted:
        """Deal the set in canonical order (seat 0 gets 0-0 … 0-6 on double-six)."""
        (started,) = self.send(DealRound(order=full_set(self.rules.top), first_leader=first_leader))
        assert isinstance(started, RoundStarted)
        return started

    def run(self, *moves: str) -> list[AnyEvent]:
        """Make the scripted moves in order (each must be accepted); return all their events."""
        events: list[AnyEvent] = []
        for text in moves:
            events.extend(self.send(parse_move(text)))
        return events

    def reject(self, command: AnyCommand | str) -> Rejection:
        """The rejection of ``command`` (a command or a scripted move); the state is unchanged."""
        if isinstance(command, str):
            command = parse_move(command)
        version = self.state.version
        result = decide(self.state, command)
        assert isinstance(result, Rejection), f"{command!r} was accepted: {result!r}"
        assert self.state.version == version
        return result


def move_tiles(moves: Iterable[Move]) -> list[Tile]:
    """The tiles of the plays among ``moves``, in order."""
    return [m.tile for m in moves if isinstance(m, PlayTile)]


def played(events: Iterable[AnyEvent]) -> list[TilePlayed]:
    """The plays among ``events``."""
    return [e for e in events if isinstance(e, TilePlayed)]


def points_by_play(events: Iterable[AnyEvent]) -> list[tuple[int, str, int]]:
    """``(seat, tile, points)`` for each play among ``events``, the tile written ``a-b``."""
    return [(e.seat, f"{e.tile[0]}-{e.tile[1]}", e.points) for e in played(events)]


def passes(events: Iterable[AnyEvent]) -> list[int]:
    """The seats that passed among ``events``."""
    return [e.seat for e in events if isinstance(e, TurnPassed)]


def round_end(events: Iterable[AnyEvent]) -> RoundEnded:
    """The one ``RoundEnded`` among ``events``."""
    (ended,) = [e for e in events if isinstance(e, RoundEnded)]
    return ended


def match_end(events: Iterable[AnyEvent]) -> MatchEnded:
    """The one ``MatchEnded`` among ``events``."""
    (ended,) = [e for e in events if isinstance(e, MatchEnded)]
    return ended
