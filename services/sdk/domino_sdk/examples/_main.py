"""The command line shared by the examples: a gateway URL and a token (or a match to join)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from domino_sdk import Bot, LobbyClient


def main(bot: Bot, argv: list[str] | None = None) -> int:
    """Parse ``--url`` and ``--token`` (or ``--join MATCH``), play, print the result."""
    parser = argparse.ArgumentParser(description=type(bot).__doc__)
    parser.add_argument("--url", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--token", help="a seat token")
    who.add_argument("--join", metavar="MATCH_ID", help="join this match's first open seat")
    args = parser.parse_args(argv)
    token = args.token
    if token is None:

        async def join() -> str:
            lobby = LobbyClient(args.url)
            try:
                return (await lobby.join(args.join, name=bot.name)).token
            finally:
                await lobby.aclose()

        token = asyncio.run(join())
    result = bot.run(args.url, token)
    if result is None:
        print("the stream ended before the match did", file=sys.stderr)
        return 1
    print(f"match over: side {result.winner} won, scores {list(result.scores)}")
    return 0
