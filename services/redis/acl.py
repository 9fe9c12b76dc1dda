"""Redis ACL users, one per role of the service: which keys and commands each process may use.

Every role is data (:data:`ROLES`): the key patterns it may touch, written after the
deployment's prefix (``{p*}:log`` is ``<prefix>:{p*}:log``), and the commands it may run. From
them come the ``ACL SETUSER`` lines an operator gives an external Redis (``domino acl``) and the
``user`` lines of the config of a Redis the project starts itself (``domino up``).

What the roles keep apart:

- a bot worker (one user per pool, ``bots-<pool>``) reads its pool's turns streams and writes
  commands; it cannot read a match log, the notification log, the lobby or the accounts;
- the referee reads and writes the matches and streams of play, and nothing of the lobby, the
  accounts or the seat tokens;
- the projector (with its archiver) folds the logs into the projections and moves finished
  matches out; the gateway serves the lobby, accounts and matches over HTTP;
- the operator (``domino status``, ``replay``, ``export``, ``projections rebuild`` ...) may use
  every key of the prefix, and no administrative command.

No role has CONFIG (nor any command of ``@admin`` or ``@dangerous`` but INFO): a client
cannot reconfigure the server, point its files elsewhere or read its settings. A Redis the
project starts has CONFIG renamed away as well (``services/redis/servers.py``).

Key patterns are plain ``~pattern`` (Redis 6.2 has no read-only ``%R~``): a role may read and
write each key it names. Redis does not filter SCAN or KEYS replies by ACL, so the names of
keys are not secret; their contents are.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from engine.strategy import STRATEGIES
from events.vocabulary import POOL_NAME

ADMIN = "admin"
"""The user a Redis the project starts gives its own tooling (forming a cluster, moving slots,
replication, shutting down): every command but CONFIG, every key. It is never handed to a
service process."""

_DATA = (
    "+@read",
    "+@write",
    "+@transaction",
    "+@connection",
    "+evalsha",
    "+eval",
    "+script|load",
    "+time",
    "+wait",
)
"""The commands of a service: its data (streams, hashes, sorted sets, strings, TTLs), its Lua
scripts (loaded on demand: SCRIPT LOAD after NOSCRIPT), the server's clock and replication
waits."""
_CLIENT = (
    "+info",
    "+cluster|slots",
    "+cluster|shards",
    "+cluster|nodes",
    "+cluster|info",
    "+cluster|myid",
    "+cluster|keyslot",
    "+readonly",
    "+readwrite",
    "+asking",
    "+client|setname",
    "+client|getname",
    "+client|id",
)
"""What a client asks a server or a cluster about itself: INFO (is it a cluster node), the
slots' layout and replica reads (redis-py's cluster client), and its connection's name."""
_SETINFO = ("+client|setinfo",)
_MAINT = ("+client|maint_notifications",)
"""On every connection redis-py names its library (CLIENT SETINFO) and asks for maintenance
notifications (CLIENT MAINT_NOTIFICATIONS), ignoring a refusal. An ACL rule may name only
the subcommands a server has: Redis 7.2 has SETINFO, 7.0 and 7.1 neither, and 6.2 takes any
subcommand's name (and would log each refusal)."""


@dataclass(frozen=True, slots=True)
class Role:
    """One kind of process and what it may do: key patterns after ``<prefix>:`` (``{pool}``
    stands for a bot pool's name), and ACL command rules after ``-@all``."""

    name: str
    keys: tuple[str, ...]
    commands: tuple[str, ...] = (*_DATA, "-@dangerous", *_CLIENT)
    meaning: str = ""


REFEREE = Role(
    "referee",
    (
        "{p*}:cmd",
        "{p*}:turns:*",
        "{p*}:m:*",
        "{p*}:log",
        "{p*}:dedupe:*",
        "{p*}:deadlines",
        "{p*}:began",
        "{p*}:clock",
        "{p*}:watch",
        "{p*}:owner",
        "referees",
        "replies:*",
        "dead",
    ),
    meaning="decides commands and appends to the match logs: the streams of play, the logs,"
    " their deadlines and leases",
)
BOTS = Role(
    "bots-{pool}",
    (
        "{p*}:turns:{pool}",
        "{p*}:cmd",
        "replies:bots-{pool}",
        "pool:{pool}",
        "{p*}:lease:bots-{pool}",
        "holders:bots-{pool}",
        "dead",
    ),
    meaning="one pool's house bots: its turns streams, the command streams they answer on,"
    " their reply stream, heartbeats and partition leases; no match log",
)
PROJECTOR = Role(
    "projector",
    (
        "{p*}:log",
        "{p*}:proj:*",
        "{p*}:m:*",
        "{p*}:dedupe:*",
        "{p*}:seat:*",
        "{p*}:limit:holds:*",
        "{p*}:token:*",
        "{p*}:lobby",
        "{p*}:deadlines",
        "{p*}:watch",
        "{p*}:acct:*",
        "{p*}:lease:archiver",
        "holders:archiver",
        "{p*}:lease:projector",
        "holders:projector",
    ),
    meaning="folds the notification logs into the projections and the accounts' feeds, and"
    " archives finished matches",
)
GATEWAY = Role(
    "gateway",
    (
        "{p*}:cmd",
        "{p*}:log",
        "{p*}:m:*",
        "{p*}:dedupe:*",
        "{p*}:inflight:*",
        "{p*}:deadlines",
        "{p*}:began",
        "{p*}:proj:*",
        "{p*}:seat:*",
        "{p*}:lobby",
        "{p*}:token:*",
        "{p*}:limit:*",
        "{p*}:acct:*",
        "{p*}:name:*",
        "{p*}:atoken:*",
        "{p*}:challenge:*",
        "{p*}:arena:*",
        "{p*}:lease:*",
        "{mm}:*",
        "accounts",
        "arenas",
        "arenas:*",
        "holders:*",
        "replies:*",
        "pool:*",
        "{p*}:turns:*",
        "referees",
        "revoked",
    ),
    meaning="HTTP for outside bots and spectators: moves, the logs it streams, the lobby,"
    " accounts, challenges, seeks, arenas, limits and the ends of credentials",
)
OPERATOR = Role(
    "operator",
    ("*",),
    commands=("+@all", "-@admin", "-@dangerous", *_CLIENT),
    meaning="the `domino` commands an operator runs (status, replay, export, import,"
    " projections rebuild): every key of the prefix, no administrative command",
)
ROLES: tuple[Role, ...] = (REFEREE, BOTS, PROJECTOR, GATEWAY, OPERATOR)
"""Every role, in the order ``domino up`` starts its processes (the operator last)."""

_GLOB = re.compile(r"([*?\[\]\\])")


def user_name(role: Role, pool: str | None = None) -> str:
    """The ACL user of ``role`` (of ``pool``, for the bots' role)."""
    return role.name.replace("{pool}", pool) if pool is not None else role.name


def users(pools: Iterable[str] = STRATEGIES) -> dict[str, Role]:
    """Each user of a deployment whose house bots come from ``pools``, and its role; raises
    ValueError for a name no pool may have."""
    pools = list(pools)
    for pool in pools:
        if POOL_NAME.fullmatch(pool) is None:
            raise ValueError(f"invalid bot pool name {pool!r}")
    found: dict[str, Role] = {}
    for role in ROLES:
        if "{pool}" in role.name:
            found.update({user_name(role, pool): role for pool in pools})
        else:
            found[role.name] = role
    return found


def rules(
    role: Role, prefix: str, pool: str | None = None, version: tuple[int, int] | None = None
) -> list[str]:
    """The ACL rules of ``role`` for a deployment's key ``prefix``: its key patterns and its
    commands, with no channel and no password (add ``on`` and one). ``version`` is the
    server's (major, minor), if known: some rules depend on it."""
    if "{pool}" in role.name and pool is None:
        raise ValueError(f"the role {role.name} needs a pool")
    head = _escape(prefix) + ":"
    patterns = [f"~{head}{key.replace('{pool}', _escape(pool or ''))}" for key in role.keys]
    return ["resetkeys", *patterns, "resetchannels", "-@all", *role.commands, *_by(version)]


def _by(version: tuple[int, int] | None) -> tuple[str, ...]:
    """The rules a server of ``version`` takes that others refuse (none if not known)."""
    if version is None or (7, 0) <= version < (7, 2):
        return ()
    return _SETINFO if version >= (7, 2) else (*_SETINFO, *_MAINT)


def _escape(text: str) -> str:
    """``text`` matched literally by a glob pattern."""
    return _GLOB.sub(r"\\\1", text)


def password_hash(password: str) -> str:
    """The ``#<sha256>`` form of a password, as an ACL rule: the server never holds it."""
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def new_passwords(names: Iterable[str]) -> dict[str, str]:
    """A fresh random password for each user name."""
    return {name: secrets.token_urlsafe(24) for name in names}


def config_lines(
    prefix: str, passwords: Mapping[str, str], version: tuple[int, int] | None = None
) -> list[str]:
    """``user`` lines of a redis-server config (or aclfile) for the users in ``passwords``,
    each with its password's hash; ``passwords`` names users of :func:`users`, ``version``
    is the server's (see :func:`rules`)."""
    lines = []
    for name, password in passwords.items():
        role, pool = _role_of(name)
        secret = password_hash(password)
        lines.append(" ".join(["user", name, "on", secret, *rules(role, prefix, pool, version)]))
    return lines


def setuser_lines(
    prefix: str, passwords: Mapping[str, str | None], version: tuple[int, int] | None = None
) -> list[str]:
    """``ACL SETUSER`` commands creating (or resetting) each user; a user whose password is
    None is left without one (``nopass`` is never given: set it with ``>password``)."""
    lines = []
    for name, password in passwords.items():
        role, pool = _role_of(name)
        secret = [] if password is None else [password_hash(password)]
        words = ["ACL", "SETUSER", name, "reset", "on", *secret]
        lines.append(" ".join([*words, *rules(role, prefix, pool, version)]))
    return lines


def _role_of(name: str) -> tuple[Role, str | None]:
    """The role of a user name, and its pool for a bots' user; ValueError for another name."""
    for role in ROLES:
        head, found, tail = role.name.partition("{pool}")
        if not found and name == role.name:
            return role, None
        pool = name[len(head) : len(name) - len(tail)]
        if found and name == f"{head}{pool}{tail}" and POOL_NAME.fullmatch(pool):
            return role, pool
    raise ValueError(f"no role has the user {name!r}")


def url_for(url: str, user: str, password: str) -> str:
    """``url`` signed in as ``user`` with ``password`` (any credentials it had replaced)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a Redis URL: {url!r}")
    host = rest.rpartition("@")[2]
    return f"{scheme}://{user}:{password}@{host}"
