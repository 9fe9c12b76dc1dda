"""``domino bot run``: play a seat of a hosted match over HTTP with one of the engine's
strategies, as any external bot would."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bot`` subcommand and its ``run`` action."""
    from engine.strategy import STRATEGIES

    p = sub.add_parser("bot", help="play a hosted match as an external bot, over HTTP")
    actions = p.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="play one seat until its match ends")
    run.add_argument("--url", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    who = run.add_mutually_exclusive_group(required=True)
    who.add_argument("--token", help="a seat token (from joining a match)")
    who.add_argument("--join", metavar="MATCH_ID", help="join this match's first open seat")
    run.add_argument("--seat", type=int, help="with --join: the seat to take")
    run.add_argument("--name", help="with --join: the player's name")
    run.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    run.add_argument("--seed", type=int, default=None)
    run.set_defaults(func=cmd_bot_run)


def cmd_bot_run(args: argparse.Namespace) -> int:
    """Join (with --join) and play until the match ends; print how it ended."""
    import asyncio

    import httpx

    from engine.strategy import make_strategy
    from services.cli.args import CliError
    from services.config import Settings
    from services.logs import configure
    from services.sdk.bot import StrategyBot
    from services.sdk.client import GatewayError, LobbyClient

    settings = Settings.from_env()
    configure(settings.log_level, settings.log_format, service="bot")
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
