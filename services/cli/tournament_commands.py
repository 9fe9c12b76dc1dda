"""``domino tournament`` and ``domino ratings``: house bots measured against each other.

``domino tournament --rules express --partners --matches 200 --seats search,greedy,search,greedy``
starts the service (Redis unless ``REDIS_URL``, a referee, a pool of bot workers per strategy,
the projector), plays the matches through it with a progress bar, turning the seats between
matches (see :mod:`services.cli.tournament`), and prints the standings and the ratings.
``--format round_robin`` or ``--format swiss --rounds N`` play the different strategies of
``--seats`` against each other instead, ``--matches`` to a pairing.
``domino ratings`` brings the ratings projection up to date and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.rules import Rules
from engine.strategy import STRATEGIES
from services.cli.args import CliError, rules_args, rules_from
from services.cli.clients import open_clients, service_client
from services.cli.render import series_progress, shown
from services.cli.series import Progress
from services.cli.supervisor import Stack
from services.cli.tournament import (
    FORMATS,
    Format,
    Tournament,
    planned,
    play_tournament,
    standings,
)
from services.config import ConfigError, Settings
from services.core.commands import ServiceClient
from services.lobby.arena import ArenaError, Standing
from services.projections.history import played
from services.projections.ratings import MatchResult, Rating, RatingsProjector, ratings_table
from services.redis.embedded import embedded_data_dir, redis_url, service_urls
from services.store import EventStore, MatchSource, open_archive
from services.store.projection import RedisCheckpoints

BUDGET_ENV = "DOMINO_SEARCH_BUDGET_MS"
"""The environment variable the bot workers read search's time per move from (ms)."""
SAMPLES_ENV = "DOMINO_SEARCH_SAMPLES"
"""The one they read the most deals a search move tries from."""


def register(sub: Any) -> None:
    """Add ``tournament`` and ``ratings`` to the ``domino`` command's subcommands."""
    p = sub.add_parser("tournament", help="play house bots against each other, with standings")
    rules_args(p)
    p.add_argument(
        "--seats",
        default="search,greedy",
        help="strategy by seat, comma-separated (repeated); with --format, the strategies",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="lineup",
        help="lineup: the seats turned each match; round_robin or swiss: strategy against strategy",
    )
    p.add_argument(
        "--matches",
        type=int,
        default=None,
        help="matches (lineup, default 100), or matches a pairing (default: one per side)",
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds of a swiss tournament")
    p.add_argument("--workers", type=int, default=None, help="workers per strategy (CPUs)")
    p.add_argument("--parallel", type=int, default=8, help="matches in play at once")
    p.add_argument(
        "--budget-ms", type=float, default=None, help=f"search's time per move ({BUDGET_ENV})"
    )
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help=f"most deals search tries a move, whatever its time left ({SAMPLES_ENV})",
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="give up after this many s")
    p.set_defaults(func=cmd_tournament)

    p = sub.add_parser(
        "ratings", help="ratings of accounts and house bot pools over every finished match"
    )
    p.add_argument("--rules", choices=("express", "straight"), help="one game's table only")
    p.add_argument("--rebuild", action="store_true", help="refold them from the whole log first")
    p.add_argument(
        "--player",
        metavar="KEY",
        help="one player's ratings and latest matches (an account id, house:<pool> or"
        " guest:<name>), the older ones from the archive",
    )
    p.add_argument("--limit", type=int, default=20, help="with --player: this many matches")
    p.set_defaults(func=cmd_ratings)


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as e:
        raise CliError(str(e)) from None


def strategies_of(spec: str) -> list[str]:
    """The strategies named by ``--seats``, in order; raise CliError for a strategy the bot
    workers do not know."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise CliError("name at least one strategy with --seats")
    for name in names:
        if name not in STRATEGIES:
            raise CliError(
                f"unknown strategy {name!r}: choose from {', '.join(sorted(STRATEGIES))}"
            )
    return names


def lineup_of(spec: str, players: int) -> list[str]:
    """The strategy by seat named by ``--seats``, repeated to fill the seats; raise CliError
    for a strategy the bot workers do not know."""
    return (strategies_of(spec) * players)[:players]


def cmd_tournament(args: argparse.Namespace) -> int:
    """Play the tournament through the service; print the standings."""
    rules = rules_from(args)
    format: Format = args.format
    if format == "lineup":
        strategies = lineup_of(args.seats, rules.players)
        matches = 100 if args.matches is None else args.matches
    else:
        strategies = list(dict.fromkeys(strategies_of(args.seats)))
        matches = rules.sides if args.matches is None else args.matches
    if matches < 1 or args.parallel < 1 or args.rounds < 1:
        raise CliError("--matches, --parallel and --rounds must be at least 1")
    try:
        total = planned(format, strategies, rules, matches, args.rounds)
    except ArenaError as e:
        raise CliError(f"--format {format}: {e}; name more strategies in --seats") from None
    settings = _settings()
    if args.budget_ms is not None:
        if args.budget_ms <= 0:
            raise CliError("--budget-ms must be positive")
        # the stack hands its settings to the bot workers it starts
        settings = msgspec.structs.replace(settings, search_budget_ms=args.budget_ms)
    if args.samples is not None:
        if args.samples < 1:
            raise CliError("--samples must be at least 1")
        settings = msgspec.structs.replace(settings, search_samples=args.samples)
    budget = f"{settings.search_budget_ms:g} ms a move"
    if settings.search_samples:
        budget += f" or {settings.search_samples} deals, whichever comes first"
    workers = args.workers or max(1, os.cpu_count() or 1)
    pools = {name: workers for name in dict.fromkeys(strategies)}
    console = Console()
    thinks = f"search thinks {budget}; " if "search" in strategies else ""
    if format == "lineup":
        what = (
            f"{matches} matches of {_title(rules)}, seats {','.join(strategies)} turned each match"
        )
    else:
        rounds = f"{args.rounds} rounds, " if format == "swiss" else ""
        turned = ", sides turned" if matches > 1 else ""
        what = (
            f"{format.replace('_', ' ')} of {_title(rules)} between {', '.join(strategies)}: "
            f"{rounds}{_matches(matches)} a pairing{turned} ({_matches(total)})"
        )
    console.print(f"{what}; {thinks}{workers} worker(s) per strategy")

    def tournament(
        client: ServiceClient, store: EventStore, show: Progress
    ) -> Awaitable[Tournament]:
        return play_tournament(
            client,
            store,
            rules,
            format,
            strategies,
            matches=matches,
            rounds=args.rounds,
            parallel=args.parallel,
            on_progress=show,
            timeout=args.timeout,
        )

    with service_urls(settings) as urls:
        url = urls.operator
        log_dir = embedded_data_dir(settings).parent / "logs"
        with Stack(url, settings, pools=pools, log_dir=log_dir, users=urls.users) as stack:
            start = time.monotonic()
            done = asyncio.run(_play(url, settings, tournament, total, console, stack))
            elapsed = time.monotonic() - start
        results = done.played
        by_points = format != "lineup"
        print_standings(console, standings(results, done.byes, by_points=by_points), by_points)
        console.print(
            f"{len(results)} matches, {sum(r.rounds for r in results)} rounds, "
            f"{sum(r.moves for r in results)} moves in {elapsed:.0f} s (logs in {log_dir})"
        )
        asyncio.run(_ratings(url, settings, console, rebuild=False, family=rules.family))
    return 0


def _matches(n: int) -> str:
    return f"{n} match" if n == 1 else f"{n} matches"


def _title(rules: Rules) -> str:
    pairs = ", partners" if rules.partners else ""
    return f"{rules.family} ({rules.players} players{pairs}, to {rules.target})"


async def _play(
    url: str,
    settings: Settings,
    tournament: Callable[[ServiceClient, EventStore, Progress], Awaitable[Tournament]],
    total: int,
    console: Console,
    stack: Stack,
) -> Tournament:
    async with open_clients(url, settings) as (redis, store):
        client = service_client(redis, settings, sender="tournament")
        try:
            with series_progress(console) as progress:
                task = progress.add_task("matches", total=total, moves=0)

                def show(finished: int, created: int, moves: int) -> None:
                    dead = stack.check()
                    if dead:
                        raise CliError(f"{', '.join(dead)} exited; see the logs")
                    progress.update(task, completed=finished, moves=moves)

                return await tournament(client, store, show)
        except TimeoutError as e:
            raise CliError(str(e)) from None


def print_standings(console: Console, rows: Sequence[Standing], points: bool = False) -> None:
    """The standings table: wins, points for and against, the win rate's 95% interval (and
    with ``points``, the tournament's points and byes)."""
    table = Table(title="Standings")
    columns = ["strategy", "played", "won", "win rate", "95% interval", "for", "against"]
    for column in columns + (["points", "byes"] if points else []):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for row in rows:
        lo, hi = row.interval
        cells = [
            row.entrant,
            str(row.games),
            str(row.wins),
            f"{row.rate:.1%}",
            f"{lo:.1%} – {hi:.1%}",
            str(row.score_for),
            str(row.score_against),
        ]
        if points:
            cells += [f"{row.points:g}", str(row.byes)]
        table.add_row(*cells)
    console.print(table)


def cmd_ratings(args: argparse.Namespace) -> int:
    """Bring the ratings projection up to date (or rebuild it) and print the table."""
    settings = _settings()
    if not 0 < args.limit <= 1000:
        raise CliError("--limit is 1 to 1000")
    with redis_url(settings) as url:
        asyncio.run(
            _ratings(
                url,
                settings,
                Console(),
                rebuild=args.rebuild,
                family=args.rules,
                player=args.player,
                limit=args.limit,
            )
        )
    return 0


async def _ratings(
    url: str,
    settings: Settings,
    console: Console,
    *,
    rebuild: bool,
    family: str | None,
    player: str | None = None,
    limit: int = 20,
) -> None:
    archive = open_archive(settings.archive_at(), settings.archive_s3_endpoint)
    async with open_clients(url, settings) as (redis, store):
        checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        source = MatchSource(store, archive)
        projector = RatingsProjector(store, checkpoints, source=source, archive=archive)
        await (projector.rebuild() if rebuild else projector.catch_up())
        rows = await ratings_table(redis, projector)
        matches = (
            [] if player is None else (await played(redis, projector, archive, player, limit))[0]
        )
    if player is None:
        print_ratings(console, rows, family)
        return
    mine = [r for r in rows if r.key == player]
    if not mine and not matches:
        raise CliError(f"no player {player!r} has played here")
    print_ratings(console, mine, family)
    print_played(console, player, matches)


def print_played(console: Console, player: str, matches: Sequence[MatchResult]) -> None:
    """A player's latest matches, newest first: when each ended, the game, the players, the
    scores by side and whether the player's side won."""
    table = Table(title=f"Latest matches of {shown(player)}")
    for column in ("ended (UTC)", "match", "game", "players", "scores", "result"):
        table.add_column(column)
    for m in matches:
        sides = {m.sides[s] for s, k in enumerate(m.keys()) if k == player}
        outcome = "called off" if m.winner is None else ("won" if m.winner in sides else "lost")
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(m.ended)),
            Text(shown(m.match_id)),
            m.family,
            Text(", ".join(shown(p) for p in m.players)),
            " - ".join(map(str, m.scores)),
            outcome,
        )
    console.print(table)


def print_ratings(console: Console, rows: Sequence[Rating], family: str | None = None) -> None:
    """One ratings table per game (``family`` alone if given): each account (its latest name
    and its id) and house pool (``house:<pool>``); names shown as typed, never read as markup
    or control sequences."""
    families = sorted({r.family for r in rows if family in (None, r.family)})
    if not families:
        console.print("no finished matches to rate yet")
    for game in families:
        table = Table(title=f"Ratings, {game} (openskill Plackett-Luce; ranked by mu - 3 sigma)")
        for column in ("player", "id", "rating", "mu", "sigma", "matches", "won"):
            table.add_column(column, justify="left" if column in ("player", "id") else "right")
        for r in rows:
            if r.family == game:
                table.add_row(
                    Text(shown(r.name)),
                    Text(shown(r.key)),
                    f"{r.ordinal:.2f}",
                    f"{r.mu:.2f}",
                    f"{r.sigma:.2f}",
                    str(r.rated),
                    str(r.won),
                )
        console.print(table)
