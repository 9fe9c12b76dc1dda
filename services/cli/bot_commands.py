"""``domino bot run``: play a seat of a hosted match over HTTP with one of the engine's
strategies, as any external bot would — through the SDK, reading the same JSON."""

from __future__ import annotations

import argparse

import msgspec
from domino_sdk import Bot
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
    import logging

    import httpx
    from domino_sdk import GatewayError, LobbyClient

    from engine.strategy import make_strategy
    from services.cli.args import CliError
    from services.config import Settings
    from services.logs import LEVELS, configure

    settings = Settings.from_env()
    configure(settings.log_level, settings.log_format, service="bot")
    # the SDK logs through the standard library, which configure() leaves at warning
    logging.getLogger("domino_sdk").setLevel(LEVELS.get(settings.log_level, logging.INFO))
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
