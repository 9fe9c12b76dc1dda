"""What each seat, and a spectator, may know (C8) — every exit of the system goes through here.

A seat sees its own hand, every tile on the table, how many tiles each other player holds and
how many are in the stock; all hands once the round has ended; the stock only with the
``reveal_stock`` option. A spectator sees the same without any hand until the round ends.
Views carry what a player could work out from the table — the tiles played and, by seat, the
numbers a pass or a draw showed it lacks — rather than the round's whole history; the events
themselves, redacted by :func:`redact`, go to whoever follows a match event by event.
"""

from __future__ import annotations

import msgspec

from engine.game import legal_moves, play_points
from engine.state import MatchState
from events.model import AnyEvent, RoundStarted, TileDrawn
from events.view import OpenEnd as OpenEnd  # the structs are schema: events.view defines them
from events.view import View as View
from events.vocabulary import END_NAMES


def redact(event: AnyEvent, seat: int | None) -> AnyEvent:
    """The event as ``seat`` (None: a spectator) may see it: other hands, the stock and
    another seat's drawn tile are hidden (C8), and so is the first round's forced lead (E2),
    a tile of the leader's hand, until the leader plays it. The deal's seed and salt are hidden
    from everyone until ``RoundEnded`` reveals them; its commitment is public (F1)."""
    if isinstance(event, RoundStarted):
        hands = tuple(h if s == seat else None for s, h in enumerate(event.hands))
        forced = event.forced_lead if seat == event.leader else None
        return msgspec.structs.replace(
            event, hands=hands, stock=None, forced_lead=forced, seed=None, salt=None
        )
    if isinstance(event, TileDrawn) and event.seat != seat:
        return msgspec.structs.replace(event, tile=None)
    return event


def view_for(state: MatchState, seat: int | None) -> View:
    """Exactly what ``seat`` may know now (C8); ``None`` gives the public view."""
    if seat is not None and not 0 <= seat < state.rules.players:
        raise ValueError(f"seat {seat} does not exist (C3)")
    board = state.board
    ends = tuple(
        OpenEnd(end=END_NAMES[i], number=n, double=board.tips[i], tiles=board.arm_len[i])
        for i, n in enumerate(board.numbers)
        if n is not None
    )
    playing = state.phase == "playing"
    legal = tuple(legal_moves(state)) if playing and state.turn == seat else ()
    return View(
        seat=seat,
        rules=state.rules,
        players=state.players,
        version=state.version,
        phase=state.phase,
        round=state.round,
        leader=state.leader,
        turn=state.turn if playing else None,
        scores=tuple(state.scores),
        ends=ends,
        spinner=board.spinner,
        hand=None if seat is None else tuple(sorted(state.hands[seat])),
        hand_sizes=tuple(len(h) for h in state.hands),
        stock_size=len(state.stock),
        played=tuple(state.played),
        voids=tuple(tuple(sorted(v)) if v else () for v in state.voids),
        legal=legal,
        legal_points=tuple(play_points(state, m) for m in legal)
        if state.rules.family == "straight"
        else (0,) * len(legal),
        last_round=state.last_round,
        result=state.result,
    )


def public_view(state: MatchState) -> View:
    """What a spectator may know now (C8)."""
    return view_for(state, None)
