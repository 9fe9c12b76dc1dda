"""``domino demo``: a real hosted series — embedded Redis, referee, bot workers, projector —
with a live progress bar, the results, and the command that replays one of the matches."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from engine.rules import Rules
from services.cli.clients import open_clients, service_client
from services.cli.render import series_progress
from services.cli.series import Followed, Planned, play_series
from services.config import Settings

SERIES: list[tuple[str, Rules, list[str]]] = [
    ("Express, pairs", Rules.make("express"), ["greedy", "random", "greedy", "random"]),
    ("Straight, 2 players", Rules.make("straight", players=2), ["greedy", "random"]),
    ("Express, 3 players", Rules.make("express", players=3), ["greedy", "random", "random"]),
    ("Straight, pairs", Rules.make("straight", partners=True), ["random", "greedy"] * 2),
]


async def play_demo(
    url: str, settings: Settings, matches: int, console: Console, timeout: float = 300.0
) -> list[Followed]:
    """Create ``matches`` matches for the house bots and follow them to their end, with a
    live progress bar."""
    plan = [
        Planned(rules, tuple(seats), title)
        for title, rules, seats in (SERIES[k % len(SERIES)] for k in range(matches))
    ]
    async with open_clients(url, settings) as (redis, store):
        client = service_client(redis, settings, sender="demo")
        with series_progress(console) as progress:
            task = progress.add_task("matches", total=matches, moves=0)

            def show(finished: int, created: int, moves: int) -> None:
                progress.update(task, completed=finished, moves=moves)

            return await play_series(
                client, store, plan, parallel=matches, on_progress=show, timeout=timeout, poll=0.1
            )


def report(
    console: Console, tracked: list[Followed], elapsed: float, pages: str | None = None
) -> None:
    """The results table, wins by strategy, and how to replay a match: in the terminal, and,
    when the gateway served ``pages``, in the browser."""
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
            t.plan.label,
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
    if pages is not None:
        console.print(
            "Watch them again in a browser, step by step: serve the pages with "
            "[bold].venv/bin/domino up[/bold], then open"
        )
        console.print(f"  {pages}/replay/{example}", markup=False)
        console.print(f"  {pages}/  (the lobby: every finished match)", markup=False)
