"""Tournaments between house bots through the running service, and their standings.

Who plays whom comes from the arena engine (:mod:`services.lobby.arena`), in one of three
schedules:

- ``lineup`` (the default): a line-up of strategies by seat, played again and again. Match
  ``k`` seats the line-up turned ``k`` places (seat ``i`` gets ``lineup[(i - k) mod n]``), so
  over ``n`` consecutive matches every strategy sits in every seat: with partners (C3) the two
  pairs swap strategies from one match to the next, and no side keeps an advantage of position.
- ``round_robin``: every group of different strategies that fills a table (every pair, with
  two sides) plays ``games`` matches, the sides turned each match; with partners a strategy
  holds both seats of its side.
- ``swiss``: ``rounds`` rounds, each drawn when the one before has finished: strategies with
  the nearest points who have met least play ``games`` matches, the sides turned.

The deals are the referee's, as in any hosted match. Standings count one entry per strategy
and side of each match it plays in: with partners the pair ``search, search`` is one entry;
without partners each seat is its own side and entry. An entry wins when its side wins the
match; its points are its side's final score, and against it the other sides' scores added up.
Win rates carry a Wilson score interval. A match called off (aborted or cancelled) counts for
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from engine.rules import Rules
from services.cli.series import Planned, Progress, play_series
from services.core.commands import ServiceClient
from services.lobby import arena
from services.lobby.arena import (
    Result,
    Standing,
    Table,
    round_robin,
    seatings,
    swiss_round,
)
from services.store import EventStore

Format = Literal["lineup", "round_robin", "swiss"]
FORMATS: tuple[Format, ...] = ("lineup", "round_robin", "swiss")


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

    def result(self) -> Result:
        """The match as the arena engine counts it."""
        return Result(seats=self.seats, sides=self.sides, winner=self.winner, scores=self.scores)


@dataclass
class Tournament:
    """What a tournament played: its matches in order, and the byes given (Swiss)."""

    played: list[Played] = field(default_factory=list)
    byes: list[str] = field(default_factory=list)


def standings(
    results: Sequence[Played], byes: Sequence[str] = (), *, by_points: bool = False
) -> list[Standing]:
    """Wins and points by strategy over the matches: best win rate first (a line-up may seat
    a strategy more often than another), or by the arena engine's ranking (points, then score
    difference) with ``by_points``."""
    rows = arena.standings([r.result() for r in results], byes)
    return rows if by_points else sorted(rows, key=lambda s: (-s.rate, s.entrant))


def planned(
    format: Format, strategies: Sequence[str], rules: Rules, matches: int, rounds: int = 0
) -> int:
    """How many matches a tournament will play: ``matches`` in a line-up, else ``matches``
    per pairing. Raises ArenaError when the strategies cannot fill the format's tables."""
    table = Table.of(rules)
    if format == "lineup":
        return matches
    if format == "round_robin":
        return sum(len(r.pairings) for r in round_robin(strategies, table, matches))
    return rounds * (len(swiss_round(1, strategies, table).pairings)) * matches


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


async def play_tournament(
    client: ServiceClient,
    store: EventStore,
    rules: Rules,
    format: Format,
    strategies: Sequence[str],
    *,
    matches: int,
    rounds: int = 0,
    parallel: int = 8,
    on_progress: Progress | None = None,
    timeout: float = 3600.0,
    poll: float = 0.05,
) -> Tournament:
    """Play a tournament between house bot pools: ``strategies`` is the line-up by seat
    (``lineup``) or the entrants (``round_robin``, ``swiss``); ``matches`` the line-up's
    matches, or the matches per pairing. Swiss rounds are drawn one at a time from the results
    so far. Raises TimeoutError after ``timeout`` seconds in all."""
    table = Table.of(rules)
    deadline = time.monotonic() + timeout
    done = Tournament()

    async def play(plan: Sequence[tuple[str, ...]], byes: Sequence[str] = ()) -> None:
        done.played += await play_matches(
            client,
            store,
            rules,
            plan,
            parallel=parallel,
            on_progress=_after(on_progress, done.played),
            timeout=max(0.0, deadline - time.monotonic()),
            poll=poll,
        )
        done.byes += byes

    if format == "lineup":
        await play(seatings(strategies, matches))
    elif format == "round_robin":
        # every round at once: a pool of house bots plays any number of matches together
        await play([p.seats for r in round_robin(strategies, table, matches) for p in r.pairings])
    else:
        for number in range(1, rounds + 1):
            results = [p.result() for p in done.played]
            drawn = swiss_round(number, strategies, table, results, done.byes, games=matches)
            await play([p.seats for p in drawn.pairings], drawn.byes)
    return done


def _after(on_progress: Progress | None, before: Sequence[Played]) -> Progress | None:
    """Progress of a round reported as progress of the whole, after the matches ``before``."""
    if on_progress is None:
        return None
    count, moves = len(before), sum(p.moves for p in before)

    def report(finished: int, created: int, moved: int) -> None:
        on_progress(count + finished, count + created, moves + moved)

    return report
