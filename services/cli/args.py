"""What every ``domino`` subcommand shares: the user-facing error and the rules options."""

from __future__ import annotations

import argparse

from engine.rules import Rules, RulesError


class CliError(Exception):
    """A user-facing error: printed on stderr, exit status 2."""


def rules_args(p: argparse.ArgumentParser) -> None:
    """Add the options that name a rule set (read back by :func:`rules_from`)."""
    p.add_argument("--rules", choices=("express", "straight"), default="express", help="family")
    p.add_argument("--players", type=int, default=None, help="2, 3 or 4 (default 4 / 2)")
    p.add_argument("--partners", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--set", dest="top", type=int, default=6, choices=(6, 9, 12))
    p.add_argument("--target", type=int, default=None, help="points to win (100 / 250)")
    p.add_argument("--next-leader", choices=("after_winner", "rotate"), default="after_winner")


def rules_from(args: argparse.Namespace) -> Rules:
    """The rule set named by the command line options."""
    players = args.players or (4 if args.rules == "express" else 2)
    try:
        return Rules.make(
            args.rules,
            players=players,
            partners=args.partners,
            top=args.top,
            target=args.target,
            next_leader=args.next_leader,
        )
    except RulesError as e:
        raise CliError(str(e)) from None
