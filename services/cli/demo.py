"""``domino demo``: a real hosted series — embedded Redis, referee, bot workers, projector —
with a live progress bar, the results, and the command that replays one of the matches."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from engine.game import evolve
from engine.rules import Rules
from engine.state import MatchState
from events.codec import JSON
from events.model import MatchEnded
from services.cli.clients import open_clients, service_client
from services.cli.render import series_progress
from services.config import Settings
from services.core.commands import ServiceClient
from services.store.base import EventStore


@dataclass
class Tracked:
    """A match the demo follows, folded from its log as it grows."""

    match_id: str
    title: str
    state: MatchState | None = None
    moves: int = 0
    seen: list[str] = field(default_factory=list)

    @property
    def over(self) -> bool:
        """Whether the match has ended."""
        return self.state is not None and self.state.phase == "over"

    def final(self) -> tuple[MatchState, MatchEnded]:
        """The state at the end of the match and how it ended; raises UnfinishedMatch when it
        has not ended."""
        if self.state is None or self.state.result is None:
            raise UnfinishedMatch(f"match {self.match_id} has not ended")
        return self.state, self.state.result


class UnfinishedMatch(RuntimeError):
    """Raised when the results of a match that has not ended are asked for."""


SERIES: list[tuple[str, Rules, list[str]]] = [
    ("Express, pairs", Rules.make("express"), ["greedy", "random", "greedy", "random"]),
    ("Straight, 2 players", Rules.make("straight", players=2), ["greedy", "random"]),
    ("Express, 3 players", Rules.make("express", players=3), ["greedy", "random", "random"]),
    ("Straight, pairs", Rules.make("straight", partners=True), ["random", "greedy"] * 2),
]


async def play_series(
    url: str, settings: Settings, matches: int, console: Console, timeout: float = 300.0
) -> list[Tracked]:
    """Create ``matches`` matches for the house bots and follow them to their end."""
    async with open_clients(url, settings) as (redis, store):
        client = service_client(redis, settings, sender="demo")
        return await _follow(client, store, matches, console, timeout)


async def _follow(
    client: ServiceClient, store: EventStore, matches: int, console: Console, timeout: float
) -> list[Tracked]:
    """Create the series' matches and fold their logs as they grow, with a live bar."""
    tracked: list[Tracked] = []
    for k in range(matches):
        title, rules, seats = SERIES[k % len(SERIES)]
        match_id = await client.create_match(rules, seats)
        tracked.append(Tracked(match_id, title))
    start = time.monotonic()
    with series_progress(console) as progress:
        task = progress.add_task("matches", total=matches, moves=0)
        while not all(t.over for t in tracked):
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"the series did not finish in {timeout:.0f} s")
            for t in tracked:
                if t.over:
                    continue
                version = 0 if t.state is None else t.state.version
                for record in await store.read(t.match_id, version + 1):
                    event = JSON.decode_envelope(record.data).event
                    t.state = evolve(t.state, event)
                    t.moves += event.__struct_config__.tag in (
                        "tile_played",
                        "tile_drawn",
                        "turn_passed",
                    )
            done = sum(t.over for t in tracked)
            progress.update(task, completed=done, moves=sum(t.moves for t in tracked))
            await asyncio.sleep(0.1)
    for rejected in await client.rejections():
        console.print(f"[red]rejected[/]: {rejected}")
    return tracked


def report(console: Console, tracked: list[Tracked], elapsed: float) -> None:
    """The results table, wins by strategy, and how to replay a match."""
    table = Table(title="Results")
    table.add_column("match", no_wrap=True)  # whole, to copy into domino replay
    for column in ("game", "seats", "rounds", "score", "winner"):
        table.add_column(column)
    wins: dict[str, list[int]] = {}
    for t in tracked:
        s, result = t.final()
        side = result.winner
        winners = [p for seat, p in enumerate(s.players) if s.rules.side_of(seat) == side]
        for seat, name in enumerate(s.players):
            row = wins.setdefault(name, [0, 0])
            row[0] += s.rules.side_of(seat) == side
            row[1] += 1
        table.add_row(
            t.match_id,
            t.title,
            " ".join(s.players),
            str(s.round),
            " : ".join(str(x) for x in s.scores),
            " & ".join(winners),
        )
    console.print(table)
    moves = sum(t.moves for t in tracked)
    console.print(f"{len(tracked)} matches, {moves} moves in {elapsed:.1f} s.")
    console.print(
        "Seats won: " + ", ".join(f"{name} {w} of {n}" for name, (w, n) in sorted(wins.items()))
    )
    example = tracked[0].match_id
    console.print("Replay a match event by event (the log stays in .domino/):")
    console.print(f"  .venv/bin/domino replay {example}")
    console.print(f"  .venv/bin/domino replay {example} --seat 0 --at 20")
    console.print(f"  .venv/bin/domino verify {example}")
