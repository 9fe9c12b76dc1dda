"""Check a recorded match against today's rules: every event must be what the engine decides."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine.fairness import SEED_BYTES, SeedError, parse_hex, seeded_deal, split_deal
from engine.game import FoldError, decide, evolve
from engine.state import MatchState
from events.model import (
    Abort,
    AnyCommand,
    AnyEvent,
    CancelMatch,
    CreateMatch,
    DealRound,
    DrawTile,
    MatchCreated,
    MatchEnded,
    PassTurn,
    PlayTile,
    Rejection,
    Resign,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TimeOutTurn,
    TurnPassed,
    TurnTimedOut,
)
from events.vocabulary import Tile

CUT_SHORT = frozenset({"resigned", "aborted", "cancelled"})
"""Outcomes of a round cut off by a command that ends the match: the round's end is recorded
first, then the match's, which says what the command was."""


class Discrepancy(msgspec.Struct, frozen=True, kw_only=True):
    """The first event (1-based version) where the log and the engine part ways, and why."""

    version: int
    message: str


def command_for(state: MatchState | None, event: AnyEvent) -> AnyCommand | None:
    """The command that must have produced ``event`` when it opens a command's events, or None
    when it is a consequence of the previous one (a round or match end)."""
    if isinstance(event, MatchCreated):
        return CreateMatch(
            rules=event.rules,
            players=event.players,
            bots=event.bots,
            deadline_ms=event.deadline_ms,
            accounts=event.accounts,
            forfeit_after=event.forfeit_after,
            max_rounds=event.max_rounds,
        )
    if isinstance(event, RoundStarted):
        if event.stock is None or any(h is None for h in event.hands):
            return None
        order = tuple(t for h in event.hands if h is not None for t in h) + event.stock
        if state is not None:
            order = _seeded_order(state, event) or order
        return DealRound(order=order, first_leader=event.leader, seed=event.seed, salt=event.salt)
    if isinstance(event, TilePlayed):
        return PlayTile(seat=event.seat, tile=event.tile, end=event.end)
    if isinstance(event, TileDrawn):
        return DrawTile(seat=event.seat)
    if isinstance(event, TurnPassed):
        return PassTurn(seat=event.seat)
    if isinstance(event, TurnTimedOut):
        return TimeOutTurn(seat=event.seat, version=state.version if state else 0)
    if isinstance(event, RoundEnded) and event.outcome in CUT_SHORT:
        return None  # its command is found from the MatchEnded that follows
    if isinstance(event, MatchEnded):
        return _ending_command(event)
    return None


def _seeded_order(state: MatchState, event: RoundStarted) -> tuple[Tile, ...] | None:
    """The order the round's seed gives, when it deals the hands and stock recorded: the log
    keeps each hand sorted, so only the seed knows the order within a hand (F1). None when
    there is no seed, or it deals otherwise: the deal is then refused by its F1 check."""
    if event.seed is None:
        return None
    try:
        seed = parse_hex(event.seed, SEED_BYTES, "seed")
    except SeedError:
        return None
    order = seeded_deal(seed, state.rules.top, state.rules.players).order
    hands, stock = split_deal(order, state.rules.players)
    return order if (hands, stock) == (event.hands, event.stock) else None


def _ending_command(event: MatchEnded) -> AnyCommand | None:
    """The command that ends a match by itself (a forfeit follows a timeout, and the other
    ends follow a move: their commands open with those)."""
    if event.reason == "cancelled":
        return CancelMatch()
    if event.resigned is None:
        return None
    if event.reason == "resigned":
        return Resign(seat=event.resigned)
    if event.reason == "aborted":
        return Abort(seat=event.resigned)
    return None


def verify(events: Sequence[AnyEvent]) -> Discrepancy | None:
    """Re-decide every command the log implies and compare, event by event; None if all agree."""
    state: MatchState | None = None
    i = 0
    while i < len(events):
        event = events[i]
        start = i
        if isinstance(event, RoundEnded) and event.outcome in CUT_SHORT and i + 1 < len(events):
            event = events[i + 1]  # e.g. a resignation records the round's end, then the match's
        command = command_for(state, event)
        if command is None:
            return Discrepancy(
                version=start + 1,
                message=f"{_tag(events[start])} does not follow from any move before it",
            )
        decided = decide(state, command)
        if isinstance(decided, Rejection):
            return Discrepancy(
                version=start + 1,
                message=f"{_tag(events[start])} is illegal: {decided.reason} ({decided.rule}): "
                f"{decided.message}",
            )
        for k, expected in enumerate(decided):
            at = start + k
            if at >= len(events):
                return Discrepancy(
                    version=at + 1, message=f"the log ends before {_tag(expected)}: {expected}"
                )
            if events[at] != expected:
                return Discrepancy(
                    version=at + 1,
                    message=f"the log has {events[at]}, the rules give {expected}",
                )
        try:
            for event in decided:
                state = evolve(state, event)
        except FoldError as e:  # pragma: no cover - decided events always fold
            return Discrepancy(version=start + 1, message=str(e))
        i = start + len(decided)
    return None


def _tag(event: AnyEvent) -> str:
    return str(event.__struct_config__.tag)
