"""The command line shared by the examples: a gateway URL and a token (or a match to join).

With an account token (``dab_...``) the example plays as the account: every match it is in,
the challenges of the accounts of ``--accept-from`` (none by default), and with
``--seek KIND --games N`` N games from the seek queue.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from domino_sdk import Bot, LobbyClient
from domino_sdk.account import is_account_token


def main(bot: Bot, argv: list[str] | None = None) -> int:
    """Parse ``--url`` and ``--token`` (or ``--join MATCH``), play, print the result."""
    parser = argparse.ArgumentParser(description=type(bot).__doc__)
    parser.add_argument("--url", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--token", help="a seat token, or an account token (dab_...)")
    who.add_argument("--join", metavar="MATCH_ID", help="join this match's first open seat")
    parser.add_argument("--seek", metavar="KIND", help="as an account: seek games of this kind")
    parser.add_argument("--games", type=int, help="as an account: play this many, then exit")
    parser.add_argument(
        "--accept-from",
        metavar="NAMES",
        help="as an account: accept challenges from these accounts (comma-separated; * for "
        "any); default: decline them all",
    )
    args = parser.parse_args(argv)
    token = args.token
    if token is not None and is_account_token(token):
        accept = None if args.accept_from is None else args.accept_from.split(",")
        finished = bot.run_account(
            args.url, token, seek=args.seek, games=args.games, accept_from=accept
        )
        for f in finished:
            print(f"{f.match_id}: {f.result}, scores {list(f.scores)} ({f.reason})")
        return 0
    if args.seek is not None or args.games is not None:
        parser.error("--seek and --games play as an account: give an account token (dab_...)")
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
