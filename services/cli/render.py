"""Human-readable lines for a match as it unfolds: the board, plays, hands and scores."""

from __future__ import annotations

from typing import assert_never

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.state import MatchState
from engine.tiles import Tile, format_tile
from events.model import (
    AnyEvent,
    MatchCreated,
    MatchEnded,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TurnPassed,
    TurnTimedOut,
)


def series_progress(console: Console) -> Progress:
    """The live bar of a series of matches: finished of total, moves so far, time."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[moves]} moves"),
        TimeElapsedColumn(),
        console=console,
    )


def tiles(hand: tuple[Tile, ...] | list[Tile]) -> str:
    """A hand as ``[0|1] [2|5]``."""
    return " ".join(format_tile(t) for t in hand) or "-"


def shown(name: str) -> str:
    """A name chosen by a player, safe to print on a terminal: control, format and separator
    characters (an escape sequence, a bell, a right-to-left override) appear as ``\\x1b``,
    ``\\u202e`` … instead of acting. Use ``rich.text.Text(shown(name))`` in a rich table, so
    ``[/]`` is not read as markup."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)


def side_name(state: MatchState, side: int) -> str:
    """'pair 0+2' with partners, else 'seat 3'."""
    if state.rules.partners:
        return f"pair {side}+{side + 2}"
    return f"seat {side}"


def ends(state: MatchState) -> str:
    """The open ends, e.g. ``left 3, right 5=`` (``=`` marks a crosswise double)."""
    board = state.board
    names = ("left", "right", "up", "down")
    parts = [
        f"{names[i]} {n}{'=' if board.tips[i] else ''}"
        for i, n in enumerate(board.numbers)
        if n is not None
    ]
    return ", ".join(parts)


def describe(state: MatchState, event: AnyEvent) -> list[str]:
    """Lines describing ``event``, given the state right after it was folded."""
    rules = state.rules
    if isinstance(event, MatchCreated):
        pairs = ", in pairs" if rules.partners else ""
        seats = ", ".join(f"{i}: {shown(p)}" for i, p in enumerate(event.players))
        return [
            f"{rules.family.title()}, {rules.players} players{pairs}, double-{rules.top}, "
            f"to {rules.target} points. Seats: {seats}"
        ]
    if isinstance(event, RoundStarted):
        lines = [f"Round {event.round}: seat {event.leader} leads"]
        for seat, hand in enumerate(event.hands):
            held = tiles(hand) if hand is not None else f"{event.hand_sizes[seat]} tiles"
            lines.append(f"  seat {seat} holds {held}")
        if event.stock is not None and event.stock:
            lines.append(f"  stock {tiles(event.stock)}")
        elif event.stock_size:
            lines.append(f"  stock: {event.stock_size} tiles")
        return lines
    if isinstance(event, TilePlayed):
        where = "leads" if event.end is None else f"plays on {event.end}:"
        scored = f"  +{event.points}" if event.points else ""
        return [f"  seat {event.seat} {where} {format_tile(event.tile)}  [{ends(state)}]{scored}"]
    if isinstance(event, TileDrawn):
        drawn = format_tile(event.tile) if event.tile is not None else "a tile"
        return [f"  seat {event.seat} draws {drawn}"]
    if isinstance(event, TurnPassed):
        return [f"  seat {event.seat} passes"]
    if isinstance(event, TurnTimedOut):
        return [f"  seat {event.seat} ran out of time"]
    if isinstance(event, RoundEnded):
        how = {
            "domino": f"seat {event.winner} dominoes",
            "blocked": f"blocked, seat {event.winner}'s side has the lowest count",
            "target": f"seat {event.winner} reaches the target during play",
            "resigned": "a seat resigned",
            "forfeit": "a seat forfeited",
            "aborted": "the match was aborted",
            "cancelled": "the match was cancelled",
        }[event.outcome]
        if event.side is not None and event.points:
            how += f"; {side_name(state, event.side)} scores {event.points}"
        counts = ", ".join(f"{s}: {c}" for s, c in enumerate(event.counts))
        return [
            f"  Round {event.round} over: {how}",
            f"  hands left: {counts}",
            f"  scores: {score_line(state, event.scores)}",
        ]
    if isinstance(event, MatchEnded):
        return [f"Match over: {ending(state, event)}, {score_line(state, event.scores)}"]
    assert_never(event)


def ending(state: MatchState, event: MatchEnded) -> str:
    """How a match ended, e.g. ``seat 1 forfeited …, seat 0 won`` or ``aborted by seat 1``."""
    seat = "a seat" if event.resigned is None else f"seat {event.resigned}"
    winner = "nobody" if event.winner is None else side_name(state, event.winner)
    return {
        "target": f"{winner} reached the target",
        "resigned": f"{seat} resigned, {winner} won",
        "forfeit": f"{seat} forfeited ({state.forfeit_after} timeouts in a row), {winner} won",
        "rounds": f"{winner} won on points after {state.round} rounds",
        "aborted": f"aborted by {seat}, unrated",
        "cancelled": "cancelled, unrated",
    }[event.reason]


def score_line(state: MatchState, scores: tuple[int, ...] | list[int]) -> str:
    """Scores by side, e.g. ``pair 0+2 105, pair 1+3 40``."""
    return ", ".join(f"{side_name(state, s)} {p}" for s, p in enumerate(scores))
