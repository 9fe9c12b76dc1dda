"""``domino bot``: play hosted matches over HTTP with one of the engine's strategies, as any
external bot would — through the SDK, reading the same JSON.

``domino bot run --token <seat token>`` plays one seat; with an account token (``dab_...``,
from ``domino bot register``) it plays as the account: every match it is in at once, the
challenges made to it, and with ``--seek KIND --games N`` N games from the seek queue.
"""

from __future__ import annotations

import argparse
import sys

import msgspec
from domino_sdk import Bot, MatchFinished, SeenAccountEvent
from domino_sdk import Move as SdkMove
from domino_sdk import View as SdkView

from engine.strategy import Strategy
from engine.views import View


class StrategyBot(Bot):
    """An SDK bot that plays one of the engine's strategies (the house bots' own)."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        self.name = strategy.name

    def choose(self, view: SdkView) -> SdkMove:
        """The strategy's move, chosen on the engine's view of what the gateway sent."""
        engine_view = engine_view_of(view)
        move = self.strategy.choose(engine_view)
        # the same move as the SDK's struct: the strategy answers with one of view.legal
        return view.legal[engine_view.legal.index(move)]


def engine_view_of(view: SdkView) -> View:
    """The engine's View of the same JSON: the SDK's and the engine's agree field for field
    (tests/sdk/test_wire.py)."""
    return msgspec.convert(msgspec.to_builtins(view), View)


class AccountStrategyBot(StrategyBot):
    """A strategy playing as an account, printing each of its matches as it starts and ends."""

    def on_account_event(self, event: SeenAccountEvent) -> None:
        """One line on stdout for each match started and finished."""
        from domino_sdk import MatchStarted

        if isinstance(event, MatchStarted):
            print(f"{event.match_id} started: {' v '.join(event.players)}", flush=True)
        elif isinstance(event, MatchFinished):
            print(f"{event.match_id} {_finished(event)}", flush=True)


def _finished(event: MatchFinished) -> str:
    scores = "-".join(str(s) for s in event.scores)
    return f"{event.result}: {scores} ({event.reason})"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bot`` subcommand and its ``run`` and ``register`` actions."""
    from engine.strategy import STRATEGIES

    p = sub.add_parser("bot", help="play hosted matches as an external bot, over HTTP")
    actions = p.add_subparsers(dest="action", required=True)
    run = actions.add_parser(
        "run",
        help="play one seat until its match ends, or (with an account token) as the account",
    )
    run.add_argument("--url", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    who = run.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--token", help="a seat token (from joining a match) or an account token (dab_...)"
    )
    who.add_argument("--join", metavar="MATCH_ID", help="join this match's first open seat")
    run.add_argument("--seat", type=int, help="with --join: the seat to take")
    run.add_argument("--name", help="with --join: the player's name")
    run.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    run.add_argument("--seed", type=int, default=None)
    run.add_argument(
        "--seek",
        metavar="KIND",
        help="with an account token: seek games of this kind (express-2p, express-4p, "
        "straight-2p, …), as many at once as --max-matches allows",
    )
    run.add_argument(
        "--games",
        type=int,
        help="with an account token: start this many matches, finish them and exit "
        "(default: play until Ctrl-C)",
    )
    run.add_argument(
        "--max-matches",
        type=int,
        default=4,
        help="with an account token: live matches at once at most (default 4)",
    )
    run.add_argument(
        "--accept-from",
        metavar="NAMES",
        help="with an account token: accept challenges from these accounts (comma-separated; "
        "* for any); default: decline every challenge",
    )
    run.set_defaults(func=cmd_bot_run)

    reg = actions.add_parser(
        "register", help="make a bot account; print its token (shown this once)"
    )
    reg.add_argument("--url", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    reg.add_argument("name", help="the account's name: 2-20 letters, digits, _ or -")
    reg.set_defaults(func=cmd_bot_register)


def _sdk_logs() -> None:
    """The service's log set-up, and the SDK's own lines at its level."""
    import logging

    from services.config import Settings
    from services.logs import LEVELS, configure

    settings = Settings.from_env()
    configure(settings.log_level, settings.log_format, service="bot")
    # the SDK logs through the standard library, which configure() leaves at warning
    logging.getLogger("domino_sdk").setLevel(LEVELS.get(settings.log_level, logging.INFO))


def cmd_bot_register(args: argparse.Namespace) -> int:
    """Make an account; print its token alone on stdout (what it is on stderr)."""
    import asyncio

    import httpx
    from domino_sdk import GatewayError
    from domino_sdk import register as register_account

    from services.cli.args import CliError

    try:
        made = asyncio.run(register_account(args.url, args.name))
    except (GatewayError, httpx.HTTPError) as e:
        raise CliError(f"{args.url}: {e}") from None
    print(
        f"account {made.account.name} ({made.account.id}) registered; its token, shown this "
        "once (keep it secret; `domino bot run --token` plays with it):",
        file=sys.stderr,
    )
    print(made.token)
    return 0


def cmd_bot_run(args: argparse.Namespace) -> int:
    """Play one seat (a seat token, or --join) or, with an account token, as the account."""
    from domino_sdk.account import is_account_token

    from services.cli.args import CliError

    if args.token is not None and is_account_token(args.token):
        return _run_account(args)
    if args.seek is not None or args.games is not None:
        raise CliError("--seek and --games play as an account: give an account token (dab_...)")
    return _run_seat(args)


def _run_account(args: argparse.Namespace) -> int:
    """Play as the account until its games are done (or Ctrl-C); print each match."""
    import httpx
    from domino_sdk import GatewayError

    from engine.strategy import make_strategy
    from services.cli.args import CliError

    if args.games is not None and args.games < 1:
        raise CliError("--games is at least 1")
    _sdk_logs()
    bot = AccountStrategyBot(make_strategy(args.strategy, args.seed))
    try:
        finished = bot.run_account(
            args.url,
            args.token,
            seek=args.seek,
            games=args.games,
            max_matches=args.max_matches,
            accept_from=_names(args.accept_from),
        )
    except (GatewayError, httpx.HTTPError) as e:
        raise CliError(f"{args.url}: {e}") from None
    results = [f.result for f in finished]
    print(
        f"played {len(finished)}: {results.count('win')} won, {results.count('loss')} lost, "
        f"{results.count('none')} called off"
    )
    return 0


def _names(listed: str | None) -> list[str] | None:
    """The names of a comma-separated option (None: not given)."""
    return None if listed is None else [n.strip() for n in listed.split(",") if n.strip()]


def _run_seat(args: argparse.Namespace) -> int:
    """Join (with --join) and play until the match ends; print how it ended."""
    import asyncio

    import httpx
    from domino_sdk import GatewayError, LobbyClient

    from engine.strategy import make_strategy
    from services.cli.args import CliError

    _sdk_logs()
    bot = StrategyBot(make_strategy(args.strategy, args.seed))
    token = args.token
    try:
        if token is None:

            async def join() -> str:
                lobby = LobbyClient(args.url)
                try:
                    seat = await lobby.join(args.join, name=args.name, seat=args.seat)
                finally:
                    await lobby.aclose()
                return seat.token

            token = asyncio.run(join())
        result = bot.run(args.url, token)
    except (GatewayError, httpx.HTTPError) as e:
        raise CliError(f"{args.url}: {e}") from None
    if result is None:
        print("the stream ended before the match did")
        return 1
    scores = "-".join(str(s) for s in result.scores)
    print(f"match over: side {result.winner} won, {scores} ({result.reason})")
    return 0
