"""The seek queue: accounts wait for a game of a kind and are matched by rating.

A seek says "find me an ``express-4p`` game". Waiting seeks of a kind are one hash
``{mm}:seeks:<kind>`` (seek id -> JSON), beside ``{mm}:seekers:<kind>`` (account -> seek id, so
an account waits once per kind); every key of the queue shares the ``{mm}`` hash tag so a
group is taken out in one script. One matchmaker at a time (whichever gateway holds the
``{mm}:matchmaker`` lease) looks at the queue a few times a second: :func:`form_groups` puts
together accounts whose ratings are within a window that widens the longer they wait, and
after ``fill_after_s`` fills the seats nobody took with house bots.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import structlog

from engine.rules import Family, Rules
from services.lobby.accounts import Account
from services.projections.accounts import AccountFeeds
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.keys import Keys

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of game one can seek: its family, how many players, partners or not."""

    name: str
    family: Family
    players: int
    partners: bool

    def rules(self) -> Rules:
        """The rules a match of this kind is played by (the family's other defaults)."""
        return Rules.make(self.family, players=self.players, partners=self.partners)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("express-2p", "express", 2, False),
        Kind("express-3p", "express", 3, False),
        Kind("express-4p", "express", 4, True),
        Kind("straight-2p", "straight", 2, False),
        Kind("straight-3p", "straight", 3, False),
        Kind("straight-4p", "straight", 4, False),
        Kind("straight-4p-pairs", "straight", 4, True),
    )
}
"""Every kind of game the queue pairs, by name."""


class Seek(msgspec.Struct, frozen=True, kw_only=True):
    """An account waiting for a game of ``kind``, rated ``rating`` in that family."""

    id: str
    kind: str
    account: str
    name: str
    rating: float
    since: float
    expires: float
    client: str = ""  # the address that made it (for the gateway's limits; not shown)

    def public(self) -> dict[str, Any]:
        """The seek as JSON (what its account may see)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        out.pop("client", None)
        return out


@dataclass(frozen=True, slots=True)
class Group:
    """Seeks matched together, and how many seats house bots fill."""

    seeks: tuple[Seek, ...]
    house: int


@dataclass(frozen=True, slots=True)
class Window:
    """How far apart in rating two seeks may be: ``base`` at first, ``per_s`` more each second
    either has waited."""

    base: float = 5.0
    per_s: float = 1.0

    def of(self, seek: Seek, now: float) -> float:
        """The widest gap ``seek`` accepts now."""
        return self.base + self.per_s * max(0.0, now - seek.since)


def form_groups(
    seeks: Sequence[Seek],
    need: int,
    now: float,
    window: Window,
    fill_after_s: float | None,
    unfilled: Collection[str] = (),
) -> list[Group]:
    """Groups of ``need`` seeks to start now, the longest waiting served first.

    Two seeks go together when their ratings are within both their windows; a group takes the
    seeks nearest in rating to the one that has waited longest. A seek that has waited
    ``fill_after_s`` (None: never) and found too few takes what it can and house bots sit in
    the seats left; the seeks of ``unfilled`` (ids) play no match with house bots.
    """
    free = sorted(seeks, key=lambda s: (s.since, s.id))
    used: set[str] = set()
    out: list[Group] = []
    for first in free:
        if first.id in used:
            continue
        near = sorted(
            (
                s
                for s in free
                if s.id not in used
                and s.id != first.id
                and abs(s.rating - first.rating) <= min(window.of(first, now), window.of(s, now))
            ),
            key=lambda s: (abs(s.rating - first.rating), s.since),
        )
        chosen: list[Seek] = []
        for s in near:
            if len(chosen) == need - 1:
                break
            if all(abs(s.rating - c.rating) <= window.of(s, now) for c in chosen):
                chosen.append(s)
        waited = now - first.since
        if len(chosen) == need - 1:
            group = Group((first, *chosen), 0)
        elif fill_after_s is not None and waited >= fill_after_s and first.id not in unfilled:
            chosen = [s for s in chosen if s.id not in unfilled]
            group = Group((first, *chosen), need - 1 - len(chosen))
        else:
            continue
        used.update(s.id for s in group.seeks)
        out.append(group)
    return out


ADD = LuaScript(
    """
-- KEYS: the kind's seeks, its seekers, then every kind's seeks and seekers in turn
-- ARGV: account id, seek id, seek JSON, the most kinds the account may wait for (0: any)
-- Returns the account's seek of that kind if it has one, 0 when it waits for the most kinds
-- already, else nil (queued).
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held and redis.call('HEXISTS', KEYS[1], held) == 1 then
  return held
end
local most = tonumber(ARGV[4])
if most > 0 then
  local waiting = 0
  for i = 3, #KEYS, 2 do
    local other = redis.call('HGET', KEYS[i + 1], ARGV[1])
    if other and redis.call('HEXISTS', KEYS[i], other) == 1 then
      waiting = waiting + 1
    end
  end
  if waiting >= most then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return false
"""
)
TAKE = LuaScript(
    """
-- KEYS: the kind's seeks, its seekers. ARGV: pairs of seek id and account id
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then return 0 end
end
for i = 1, #ARGV, 2 do
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i + 1])
end
return 1
"""
)
_SEEK = msgspec.json.Decoder(Seek)

Starter = Callable[[Kind, Group], Awaitable[str | None]]
"""Starts the match of a group (house bots in the last seats); returns its id, or None."""
MayFill = Callable[[Seek], Awaitable[bool]]
"""Whether house bots may fill a seek's match (its account and address are within their
limits)."""
Rating = Callable[[str, str], Awaitable[float]]
"""An account's rating in a family (account id, family)."""


class SeekError(Exception):
    """Raised when a seek cannot be made or withdrawn; ``status`` and ``code`` say why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Seeks:
    """The queue's records: add, withdraw, list, and take groups out."""

    def __init__(self, redis: Client, keys: Keys, feeds: AccountFeeds, ttl_s: float) -> None:
        self.redis = redis
        self.keys = keys
        self.feeds = feeds
        self.ttl_s = ttl_s

    def _key(self, what: str, kind: str = "") -> str:
        return f"{self.keys.prefix}:{{mm}}:{what}" + (f":{kind}" if kind else "")

    def _queue_keys(self, kind_name: str) -> list[str]:
        """The kind's seeks and seekers, then every kind's (for counting an account's)."""
        keys = [self._key("seeks", kind_name), self._key("seekers", kind_name)]
        for kind in KINDS:
            keys += [self._key("seeks", kind), self._key("seekers", kind)]
        return keys

    async def add(
        self,
        account: Account,
        kind_name: str,
        rating: float,
        *,
        client: str = "",
        most: int = 0,
    ) -> tuple[Seek, bool]:
        """Queue ``account`` (asking from address ``client``) for ``kind_name``; return the
        seek and whether it is new (an account already waiting for that kind gets its existing
        seek back). Raises SeekError 429 ``seeks_per_account`` when the account already waits
        for ``most`` other kinds (0: no limit)."""
        if kind_name not in KINDS:
            raise SeekError(
                422, "unknown_kind", f"kind is one of {', '.join(KINDS)}, not {kind_name!r}"
            )
        now = round(time.time(), 3)
        seek = Seek(
            id="s-" + secrets.token_hex(6),
            kind=kind_name,
            account=account.id,
            name=account.name,
            rating=round(rating, 3),
            since=now,
            expires=now + self.ttl_s,
            client=client,
        )
        held = await ADD(
            self.redis,
            self._queue_keys(kind_name),
            [account.id, seek.id, msgspec.json.encode(seek), most],
        )
        if held == 0:
            raise SeekError(
                429,
                "seeks_per_account",
                f"{account.name} waits for {most} kinds of game already: withdraw a seek, or "
                "wait for one to be matched",
            )
        if held:
            existing = await self.get(kind_name, held.decode())
            if existing is not None:
                return existing, False
        return seek, True

    async def get(self, kind_name: str, seek_id: str) -> Seek | None:
        """A waiting seek, or None."""
        raw = await self.redis.hget(self._key("seeks", kind_name), seek_id)
        return None if raw is None else _SEEK.decode(raw)

    async def waiting(self, kind_name: str) -> list[Seek]:
        """Every seek waiting for ``kind_name``."""
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self._key("seeks", kind_name)))
        return [_SEEK.decode(v) for v in raw.values()]

    async def mine(self, account: Account) -> list[Seek]:
        """The account's waiting seeks."""
        out = []
        for kind in KINDS:
            held = cast(bytes | None, await self.redis.hget(self._key("seekers", kind), account.id))
            if held is not None and (seek := await self.get(kind, held.decode())) is not None:
                out.append(seek)
        return out

    async def withdraw(self, account: Account, seek_id: str) -> Seek:
        """Take the account's seek out of the queue; raises SeekError if it has none by that id
        (already matched, expired or never made)."""
        for seek in await self.mine(account):
            if seek.id == seek_id and await self.take([seek]):
                return seek
        raise SeekError(404, "no_seek", f"no waiting seek {seek_id!r} of yours")

    async def take(self, seeks: Sequence[Seek]) -> bool:
        """Take these seeks (all of one kind) out of the queue, all or none; False if one has
        gone (withdrawn, expired, or taken by another matchmaker)."""
        kind = seeks[0].kind
        args: list[str] = []
        for s in seeks:
            args += [s.id, s.account]
        keys = [self._key("seeks", kind), self._key("seekers", kind)]
        return bool(await TAKE(self.redis, keys, args))

    async def put_back(self, seeks: Sequence[Seek]) -> None:
        """Queue seeks again (their match could not start), keeping how long they waited."""
        for s in seeks:
            await ADD(
                self.redis,
                self._queue_keys(s.kind),
                [s.account, s.id, msgspec.json.encode(s), 0],
            )

    @property
    def lease(self) -> str:
        """The key naming the gateway that runs the matchmaker now."""
        return self._key("matchmaker")


RENEW = LuaScript(
    """
-- KEYS: the lease. ARGV: holder, ms
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
)


class Matchmaker:
    """Pairs the queue a few times a second while this process holds the matchmaker lease
    (and does the ``also`` work, such as running arenas, under the same lease)."""

    def __init__(
        self,
        seeks: Seeks,
        start: Starter,
        name: str,
        *,
        window: Window | None = None,
        fill_after_s: float | None = 30.0,
        interval_s: float = 0.25,
        also: Sequence[Callable[[float], Awaitable[int]]] = (),
        may_fill: MayFill | None = None,
    ) -> None:
        self.seeks = seeks
        self.also = list(also)  # more work for the lease holder (the arenas' runner)
        self.start = start
        self.name = name
        self.window = window or Window()
        self.fill_after_s = fill_after_s
        self.interval_s = interval_s
        self.may_fill = may_fill

    async def run(self, stop: asyncio.Event) -> None:
        """Pair until ``stop`` is set; a failed round is logged and tried again."""
        while not stop.is_set():
            try:
                held = await RENEW(
                    self.seeks.redis,
                    [self.seeks.lease],
                    [self.name, int(self.interval_s * 1000 * 8)],
                )
                if held:
                    now = time.time()
                    await self.tick(now)
                    for work in self.also:
                        await work(now)
            except Exception:
                log.exception("matchmaking round failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)

    async def tick(self, now: float) -> int:
        """One look at every kind's queue: expire, group, start; return matches started."""
        started = 0
        for kind in KINDS.values():
            waiting = await self.seeks.waiting(kind.name)
            if not waiting:
                continue
            live: list[Seek] = []
            for seek in waiting:
                if seek.expires <= now:
                    if await self.seeks.take([seek]):
                        await self.seeks.feeds.append(
                            seek.account, "seek_expired", {"seek": seek.public()}
                        )
                else:
                    live.append(seek)
            for group in await self._groups(live, kind, now):
                if not await self.seeks.take(group.seeks):
                    continue
                match_id = None
                try:
                    match_id = await self.start(kind, group)
                finally:
                    if match_id is None:
                        await self.seeks.put_back(group.seeks)
                if match_id is not None:
                    started += 1
                    log.info(
                        "seeks matched",
                        match_id=match_id,
                        kind=kind.name,
                        accounts=[s.account for s in group.seeks],
                        house=group.house,
                    )
        return started

    async def _groups(self, live: Sequence[Seek], kind: Kind, now: float) -> list[Group]:
        """The groups to start now; a seek that house bots may not fill (:attr:`may_fill`)
        waits in the queue for other accounts, and the others are grouped without it."""
        unfilled: set[str] = set()
        asked: set[str] = set()
        while True:
            groups = form_groups(live, kind.players, now, self.window, self.fill_after_s, unfilled)
            if self.may_fill is None:
                return groups
            refused = set()
            for seek in (s for g in groups if g.house for s in g.seeks if s.id not in asked):
                asked.add(seek.id)
                if not await self.may_fill(seek):
                    refused.add(seek.id)
            if not refused:
                return groups
            unfilled |= refused
