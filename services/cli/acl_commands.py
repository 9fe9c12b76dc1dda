"""``domino acl``: the Redis ACL users of a deployment, one per role, as commands to give it."""

from __future__ import annotations

import argparse
import sys

from engine.strategy import STRATEGIES
from services.cli.args import CliError
from services.config import ConfigError, Settings
from services.redis import acl


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``acl`` subcommand."""
    p = sub.add_parser(
        "acl",
        help="the ACL SETUSER commands that create a user per role on an external Redis",
        description="Print one ACL SETUSER command per role (referee, a bot pool's workers,"
        " projector, gateway, operator) for the key prefix, to pipe to redis-cli; the notes"
        " go to stderr. Each user is on and has no password: give each one with"
        " `ACL SETUSER <user> >password`, or let --passwords make them.",
    )
    p.add_argument("--prefix", help="the deployment's key prefix (default: DOMINO_PREFIX)")
    p.add_argument(
        "--pools",
        default=",".join(STRATEGIES),
        help="the house bot pools, comma separated (default: every strategy)",
    )
    p.add_argument(
        "--passwords",
        action="store_true",
        help="give each user a new random password, and show each role's REDIS_URL on stderr",
    )
    p.add_argument(
        "--redis-version",
        metavar="X.Y",
        help="the server's version: from 7.2 (or on 6.2) redis-py may name itself to it"
        " (CLIENT SETINFO); 7.0 and 7.1 refuse that rule, so it is left out unless given",
    )
    p.add_argument(
        "--aclfile",
        action="store_true",
        help="print an aclfile's `user` lines instead (needs --passwords; passwords hashed)",
    )
    p.set_defaults(func=cmd_acl)


def cmd_acl(args: argparse.Namespace) -> int:
    """Print the users' commands (or aclfile lines) for the prefix and pools."""
    try:
        prefix = args.prefix or Settings.from_env().prefix
    except ConfigError as e:
        raise CliError(str(e)) from None
    pools = [p for p in args.pools.split(",") if p]
    version = _version(args.redis_version)
    if args.aclfile and not args.passwords:
        raise CliError("--aclfile needs --passwords: an aclfile user signs in with one")
    try:
        names = acl.users(pools)
        passwords: dict[str, str | None] = (
            dict(acl.new_passwords(names)) if args.passwords else dict.fromkeys(names)
        )
        if args.aclfile:
            secrets = {n: p or "" for n, p in passwords.items()}
            lines = acl.config_lines(prefix, secrets, version)
        else:
            lines = acl.setuser_lines(prefix, passwords, version)
    except ValueError as e:
        raise CliError(str(e)) from None
    print("\n".join(lines))
    print(
        "# run each process as its role's user, REDIS_URL=redis://<user>:<password>@host:port;"
        " give the default user a strong password (ACL SETUSER default on >password) rather"
        " than turning it off: up to Redis 7.x an append-only file replayed without it drops"
        " every transaction (redis/redis#14541)",
        file=sys.stderr,
    )
    for name, password in passwords.items():
        if password is not None:
            print(f"# {name}: redis://{name}:{password}@<host>:<port>", file=sys.stderr)
    return 0


def _version(text: str | None) -> tuple[int, int] | None:
    """``X.Y`` (or ``X.Y.Z``) as (X, Y); CliError for anything else."""
    if text is None:
        return None
    major, _, rest = text.partition(".")
    minor = rest.partition(".")[0]
    if not (major.isdigit() and minor.isdigit()):
        raise CliError(f"--redis-version is X.Y (7.2, say), not {text!r}")
    return int(major), int(minor)
