"""Tournaments between house bots through the running service, and their standings.

A tournament is a line-up of strategies by seat, played again and again. Match ``k`` seats the
line-up turned ``k`` places (seat ``i`` gets ``lineup[(i - k) mod n]``), so over ``n``
consecutive matches every strategy sits in every seat: with partners (C3) the two pairs swap
strategies from one match to the next, and no side keeps an advantage of position. The deals
are the referee's, as in any hosted match.

Standings count one entry per strategy and side of each match it plays in: with partners the
pair ``search, search`` is one entry; without partners each seat is its own side and entry. An
entry wins when its side wins the match; its points are its side's final score, and against it
the other sides' scores added up. Win rates carry a Wilson score interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.rules import Rules
from services.cli.series import Planned, Progress, play_series
from services.core.commands import ServiceClient
from services.store import EventStore


def seatings(lineup: Sequence[str], matches: int) -> list[tuple[str, ...]]:
    """The strategy by seat of each match: the line-up turned one place further each time."""
    n = len(lineup)
    return [tuple(lineup[(i - k) % n] for i in range(n)) for k in range(matches)]


@dataclass(frozen=True, slots=True)
class Played:
    """A finished tournament match: who sat where, and how it ended."""

    match_id: str
    seats: tuple[str, ...]
    sides: tuple[int, ...]  # each seat's side
    winner: int | None  # None: called off (aborted or cancelled), left out of the standings
    scores: tuple[int, ...]  # by side
    rounds: int
    moves: int


@dataclass(frozen=True, slots=True)
class Standing:
    """One strategy's line of the standings."""

    name: str
    played: int
    won: int
    points_for: int
    points_against: int

    @property
    def rate(self) -> float:
        """The share of entries won."""
        return self.won / self.played if self.played else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """The Wilson 95% interval of the win rate."""
        return wilson(self.won, self.played)


def wilson(wins: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``wins / n`` (95% for the default ``z``)."""
    if n == 0:
        return (0.0, 1.0)
    p = wins / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def standings(results: Sequence[Played]) -> list[Standing]:
    """Wins and points by strategy over the matches, best win rate first."""
    rows: dict[str, list[int]] = {}
    for r in results:
        if r.winner is None:
            continue  # a match called off says nothing of the strategies
        entries = sorted(set(zip(r.seats, r.sides, strict=True)))
        total = sum(r.scores)
        for name, side in entries:
            row = rows.setdefault(name, [0, 0, 0, 0])
            row[0] += 1
            row[1] += side == r.winner
            row[2] += r.scores[side]
            row[3] += total - r.scores[side]
    table = [Standing(name, *row) for name, row in rows.items()]
    return sorted(table, key=lambda s: (-s.rate, s.name))


async def play_matches(
    client: ServiceClient,
    store: EventStore,
    rules: Rules,
    plan: Sequence[tuple[str, ...]],
    *,
    parallel: int = 8,
    on_progress: Progress | None = None,
    timeout: float = 3600.0,
    poll: float = 0.05,
) -> list[Played]:
    """Play the planned matches between house bot pools (pool = strategy name, which is also
    each seat's name), at most ``parallel`` at a time; see :func:`play_series`."""
    sides = tuple(rules.side_of(k) for k in range(rules.players))
    series = [Planned(rules, seats, " ".join(seats), names=seats) for seats in plan]
    played: list[Played] = []
    for match in await play_series(
        client,
        store,
        series,
        parallel=parallel,
        on_progress=on_progress,
        timeout=timeout,
        poll=poll,
    ):
        state, ended = match.final()
        played.append(
            Played(
                match.match_id,
                match.plan.seats,
                sides,
                ended.winner,
                ended.scores,
                state.round,
                match.moves,
            )
        )
    return played
