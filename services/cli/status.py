"""``domino status``: the service on one screen, read from Redis alone.

For every role whose processes share the partitions by lease — referee, projector, archiver,
and any other found in Redis (``bots-<pool>``, say) — who holds each partition, how long its
lease has left and each process's heartbeat; the bot workers' heartbeats, each consumer group's
pending and lag, the dead letters, the live matches and the events a second of each partition
(the notification log sampled twice, ``--interval`` apart). Every command names one key and
they go pipelined without a transaction, and the roles are found by a SCAN, which a cluster
client sends to every master: it reads a Redis node and a Redis Cluster alike. Whatever came
from Redis is printed escaped (a name may hold a terminal's control characters); ``--json``
prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

import msgspec
from redis.exceptions import RedisError

from engine.strategy import STRATEGIES
from services.bots.worker import workers_key
from services.cli.args import CliError
from services.cli.render import shown
from services.config import ConfigError, Settings
from services.redis.connection import Client, connect, without_password
from services.redis.embedded import redis_url
from services.redis.lua import Call, LuaScript
from services.store.keys import Keys
from services.transport.stats import UNKNOWN_LAG, GroupState, group_states

DEAD_SHOWN = 3
"""The latest dead letters shown with their reasons."""
NAME_WIDTH = 64
"""The widest a column of names grows on the screen; a longer name is cut there."""
REFEREE = "referee"
SHOWN_ALWAYS = (REFEREE, "projector", "archiver")
"""The roles every deployment runs, shown even when Redis holds nothing of theirs (each
partition then held by nobody); another role is shown once a process of it has left its
heartbeats in ``<prefix>:holders:<role>``."""
_BEATS = LuaScript(
    """
-- KEYS: a set of heartbeats. They, and the server's clock they were written on (s, us).
local t = redis.call('TIME')
return {t[1], t[2], redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
"""
)


class Heartbeat(msgspec.Struct, frozen=True):
    """A process that says it is alive, and how long ago it last did."""

    name: str
    age_s: float


class Lease(msgspec.Struct, frozen=True):
    """Who holds one partition for a role, and how long the lease has left (None: nobody)."""

    partition: int
    holder: str | None
    lease_left_s: float | None


class Role(msgspec.Struct, frozen=True):
    """A role whose processes share the partitions by lease: their heartbeats (on the Redis
    server's clock) and each partition's lease."""

    role: str
    heartbeats: list[Heartbeat]
    leases: list[Lease]


class Partition(msgspec.Struct, frozen=True):
    """One partition: its referee's lease, its live matches and how fast its log grows."""

    partition: int
    owner: str | None
    lease_left_s: float | None
    live_matches: int
    log_entries: int
    events_per_s: float | None


class Group(msgspec.Struct, frozen=True):
    """One consumer group on one stream (lag -1: Redis cannot count it, before 7.0)."""

    group: str
    stream: str
    consumers: int
    pending: int
    lag: int


class DeadLetter(msgspec.Struct, frozen=True):
    """A parked message: where it came from and why it was parked."""

    id: str
    stream: str
    group: str
    reason: str


class Status(msgspec.Struct, frozen=True):
    """Everything ``domino status`` shows."""

    prefix: str
    sampled_s: float
    referees: list[Heartbeat]
    pools: dict[str, list[Heartbeat]]
    roles: list[Role]
    partitions: list[Partition]
    groups: list[Group]
    dead_letters: int
    latest_dead_letters: list[DeadLetter]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


async def _log_counts(redis: Client, keys: Keys) -> list[int]:
    """How many entries each partition's log has had added (its length where Redis does not
    count them, before 7.0): the difference over a second is the events of that second."""
    pipe = redis.pipeline(transaction=False)
    for p in range(keys.partitions):
        pipe.xinfo_stream(keys.log(p))
    counts = []
    for info in await pipe.execute(raise_on_error=False):
        if isinstance(info, Exception):  # no log yet
            counts.append(0)
        else:
            counts.append(int(info.get("entries-added", info.get("length", 0))))
    return counts


def _server_now(reply: Any) -> float:
    """The server's clock (s) in a ``_BEATS`` reply."""
    return int(reply[0]) + int(reply[1]) / 1e6


def _heartbeats(reply: Any, per_s: float) -> list[Heartbeat]:
    """The heartbeats of a ``_BEATS`` reply whose scores count ``per_s`` to a second."""
    now, flat = _server_now(reply) * per_s, reply[2]
    return [
        Heartbeat(_text(flat[i]), round((now - float(flat[i + 1])) / per_s, 1))
        for i in range(0, len(flat), 2)
    ]


async def _pools(redis: Client, keys: Keys) -> dict[str, list[Heartbeat]]:
    calls: list[Call] = [([workers_key(keys, pool)], []) for pool in STRATEGIES]
    pools: dict[str, list[Heartbeat]] = {}
    for pool, reply in zip(STRATEGIES, await _BEATS.many(redis, calls), strict=True):
        if isinstance(reply, Exception):
            raise reply
        workers = _heartbeats(reply, 1)  # a worker beats in seconds
        if workers:
            pools[pool] = workers
    return pools


def _role_keys(keys: Keys, role: str) -> tuple[str, list[str]]:
    """A role's heartbeats and each partition's lease, as its lease table names them."""
    return keys.heartbeats_of(role), [keys.lease_of(p, role) for p in range(keys.partitions)]


async def _roles_found(redis: Client, keys: Keys) -> list[str]:
    """:data:`SHOWN_ALWAYS`, then by name every other role with heartbeats in Redis."""
    head = keys.holders(REFEREE).removesuffix(REFEREE)  # "<prefix>:holders:"
    found = set()
    # every prefix's heartbeats matched, this one's picked here: a prefix may hold a glob's *
    async for raw in redis.scan_iter(match="*:holders:*", count=1000, _type="zset"):
        key = _text(raw)
        role = key.removeprefix(head)
        with contextlib.suppress(ValueError):  # not a role's name: no process of ours wrote it
            if key.startswith(head) and keys.holders(role) == key:
                found.add(role)
    return [*SHOWN_ALWAYS, *sorted(found - set(SHOWN_ALWAYS))]


async def _roles(redis: Client, keys: Keys) -> list[Role]:
    """Every role's heartbeats and leases, the heartbeats' scripts and the leases' reads each
    in one pipeline."""
    roles = await _roles_found(redis, keys)
    named = [_role_keys(keys, role) for role in roles]
    beats = await _BEATS.many(redis, [([heartbeats], []) for heartbeats, _ in named])
    pipe = redis.pipeline(transaction=False)
    for _, lease_keys in named:
        for key in lease_keys:
            pipe.get(key)
            pipe.pttl(key)
    replies = iter(await pipe.execute())
    out = []
    for role, reply in zip(roles, beats, strict=True):
        if isinstance(reply, Exception):
            raise reply
        leases: list[Lease] = []
        for p in range(keys.partitions):
            holder, ttl = next(replies), next(replies)
            left = round(int(ttl) / 1000, 1) if holder is not None and int(ttl) >= 0 else None
            leases.append(Lease(p, None if holder is None else _text(holder), left))
        out.append(Role(role, _heartbeats(reply, 1000), leases))  # a holder beats in ms
    return out


async def _live(redis: Client, keys: Keys) -> list[int]:
    """Each partition's live matches."""
    pipe = redis.pipeline(transaction=False)
    for p in range(keys.partitions):
        pipe.zcard(keys.watch(p))
    return [int(live) for live in await pipe.execute()]


async def _dead_letters(redis: Client, keys: Keys) -> tuple[int, list[DeadLetter]]:
    pipe = redis.pipeline(transaction=False)
    pipe.xlen(keys.dead_letters)
    pipe.xrevrange(keys.dead_letters, "+", "-", count=DEAD_SHOWN)
    count, latest = await pipe.execute()
    letters = [
        DeadLetter(
            id=_text(entry_id),
            stream=_text(fields.get(b"stream", b"")),
            group=_text(fields.get(b"group", b"")),
            reason=_text(fields.get(b"reason", b"")),
        )
        for entry_id, fields in latest
    ]
    return int(count), letters


async def read_status(redis: Client, keys: Keys, interval_s: float = 1.0) -> Status:
    """The service's state as Redis holds it, the logs sampled ``interval_s`` apart."""
    before, started = await _log_counts(redis, keys), time.monotonic()
    streams = [keys.commands(p) for p in range(keys.partitions)]
    streams += [keys.turns(p, pool) for pool in STRATEGIES for p in range(keys.partitions)]
    groups = await group_states(redis, streams)
    roles = await _roles(redis, keys)
    pools = await _pools(redis, keys)
    live = await _live(redis, keys)
    dead, latest = await _dead_letters(redis, keys)
    await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    after, elapsed = await _log_counts(redis, keys), time.monotonic() - started
    referee = roles[SHOWN_ALWAYS.index(REFEREE)]
    partitions = [
        Partition(
            partition=p,
            owner=lease.holder,
            lease_left_s=lease.lease_left_s,
            live_matches=live[p],
            log_entries=after[p],
            events_per_s=round((after[p] - before[p]) / elapsed, 1) if elapsed > 0 else None,
        )
        for p, lease in enumerate(referee.leases)
    ]
    return Status(
        prefix=keys.prefix,
        sampled_s=round(elapsed, 2),
        referees=referee.heartbeats,
        pools=pools,
        roles=roles,
        partitions=partitions,
        groups=[_group(g) for g in groups],
        dead_letters=dead,
        latest_dead_letters=latest,
    )


def _group(state: GroupState) -> Group:
    return Group(state.group, state.stream, state.consumers, state.pending, state.lag)


# -- the screen --------------------------------------------------------------------------------


def _beats(beats: list[Heartbeat]) -> str:
    return ", ".join(f"{shown(b.name)} {b.age_s:.1f} s ago" for b in beats) or "none"


def _lag(lags: list[int]) -> str:
    if UNKNOWN_LAG in lags:
        return "?"
    return str(sum(lags))


def _ranges(partitions: list[int]) -> str:
    """Partitions in order, each run of them shortened: ``0-3 6 8-9``."""
    runs: list[list[int]] = []
    for p in sorted(partitions):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return " ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "-"


def _width(names: list[str], least: int, most: int = NAME_WIDTH) -> int:
    """A column wide enough for ``names`` (escaped), at least ``least`` and at most ``most``."""
    return max(least, min(most, max((len(shown(n)) for n in names), default=0)))


def _holders(roles: list[Role]) -> list[str]:
    """Every process named in the roles' heartbeats and leases."""
    beats = [b.name for role in roles for b in role.heartbeats]
    return beats + [lease.holder for role in roles for lease in role.leases if lease.holder]


def _role_lines(role: Role, roles_width: int, names_width: int) -> list[str]:
    """A role's processes, one a line — the heartbeat's age, the shortest lease left and the
    partitions held — then ``nobody`` and the partitions nobody holds, if any. A process with
    leases and no heartbeat left is one whose heartbeat ran out before its leases did."""
    ages = {b.name: b.age_s for b in role.heartbeats}
    held: dict[str | None, list[Lease]] = {}
    for lease in role.leases:
        held.setdefault(lease.holder, []).append(lease)
    named = sorted(set(ages) | {h for h in held if h is not None})
    holders: list[str | None] = [*named, *([None] if None in held else [])]
    lines = []
    for k, holder in enumerate(holders):
        leases = held.get(holder, [])
        lefts = [lease.lease_left_s for lease in leases if lease.lease_left_s is not None]
        age = None if holder is None else ages.get(holder)
        beat = "-" if holder is None else "none" if age is None else f"{age:.1f} s ago"
        left = f"{min(lefts):.1f} s" if lefts else "-"
        name = "nobody" if holder is None else shown(holder)
        label = shown(role.role) if k == 0 else ""
        lines.append(
            f"{label[:roles_width]:<{roles_width}} {name[:names_width]:<{names_width}} "
            f"{beat:>12} {left:>10}  {_ranges([lease.partition for lease in leases])}"
        )
    return lines


def render(status: Status, where: str) -> list[str]:
    """The screen's lines; every name and text from Redis escaped, each column of names as
    wide as its longest (up to :data:`NAME_WIDTH`): pods' names differ only at their ends."""
    roles = _width([r.role for r in status.roles], len("role"))
    names = _width(_holders(status.roles), len("process"))
    lines = [
        f"domino status of {shown(where)}, prefix {shown(status.prefix)}, "
        f"{len(status.partitions)} partitions (logs sampled over {status.sampled_s:.1f} s)",
        "",
        f"{'role':<{roles}} {'process':<{names}} {'heartbeat':>12} {'lease left':>10}  "
        "partitions held",
    ]
    for role in status.roles:
        lines += _role_lines(role, roles, names)
    if status.pools:
        lines.append("")
    for pool, workers in sorted(status.pools.items()):
        lines.append(f"bot pool {shown(pool)} (heartbeats): {_beats(workers)}")
    commands = {g.stream: g for g in status.groups if g.group == REFEREE}
    referees = _width([p.owner for p in status.partitions if p.owner], len("referee"))
    lines += [
        "",
        f"{'partition':>9}  {'referee':<{referees}} {'lease left':>10} {'live':>6} "
        f"{'cmd pending':>11} {'cmd lag':>7} {'events/s':>9}",
    ]
    keys = Keys(status.prefix, len(status.partitions))
    for p in status.partitions:
        group = commands.get(keys.commands(p.partition))
        held = "nobody" if p.owner is None else shown(p.owner)
        left = "-" if p.lease_left_s is None else f"{p.lease_left_s:.1f} s"
        rate = "-" if p.events_per_s is None else f"{p.events_per_s:.1f}"
        pending = "-" if group is None else str(group.pending)
        lag = "-" if group is None else _lag([group.lag])
        lines.append(
            f"{p.partition:>9}  {held[:referees]:<{referees}} {left:>10} {p.live_matches:>6} "
            f"{pending:>11} {lag:>7} {rate:>9}"
        )
    lines += ["", f"{'group':<24} {'streams':>7} {'consumers':>9} {'pending':>9} {'lag':>9}"]
    by_group: dict[str, list[Group]] = {}
    for g in status.groups:
        by_group.setdefault(g.group, []).append(g)
    for name, groups in sorted(by_group.items()):
        lines.append(
            f"{shown(name)[:24]:<24} {len(groups):>7} {max(g.consumers for g in groups):>9} "
            f"{sum(g.pending for g in groups):>9} {_lag([g.lag for g in groups]):>9}"
        )
    if any(g.lag == UNKNOWN_LAG for g in status.groups):
        lines.append("(lag ?: this Redis cannot count it — before 7.0 — and the group is behind)")
    lines += ["", f"dead letters: {status.dead_letters}"]
    for d in status.latest_dead_letters:
        where = f"{shown(d.id)} from {shown(d.stream)} ({shown(d.group)})"
        lines.append(f"  {where}: {shown(d.reason)}")
    return lines


# -- the command -------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` subcommand."""
    p = sub.add_parser(
        "status", help="leases, heartbeats, groups' lag and pending, dead letters, events/s"
    )
    p.add_argument("--json", action="store_true", help="one JSON object, for machines")
    p.add_argument(
        "--interval", type=float, default=1.0, help="seconds between the logs' two samples"
    )
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    """Print the service's status, read from its Redis."""
    try:
        settings = Settings.from_env()
    except ConfigError as e:
        raise CliError(str(e)) from None
    if not 0 <= args.interval <= 60:
        raise CliError("--interval is 0 to 60 seconds")
    keys = Keys(settings.prefix, settings.partitions)
    with redis_url(settings) as url:
        status = asyncio.run(_read(url, settings, keys, args.interval))
        where = without_password(url)
    if args.json:  # every character past ASCII escaped too: nothing in it acts on a terminal
        print(json.dumps(msgspec.to_builtins(status), ensure_ascii=True))
    else:
        print("\n".join(render(status, where)))
    return 0


async def _read(url: str, settings: Settings, keys: Keys, interval_s: float) -> Status:
    try:
        redis = await connect(url, cluster=settings.cluster or "auto")
    except RedisError as e:
        raise CliError(f"cannot reach Redis at {without_password(url)}: {e}") from None
    try:
        return await read_status(redis, keys, interval_s)
    except RedisError as e:
        raise CliError(f"reading the status from {without_password(url)} failed: {e}") from None
    finally:
        await redis.aclose()
