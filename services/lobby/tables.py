"""The lobby's records: matches waiting for players, their seats, and seat tokens.

A match created through the lobby is a hash ``<prefix>:{pN}:seat:<match>`` in its partition
until every open seat is taken; then the gateway sends ``CreateMatch`` with the players'
names, so no seat's clock runs before its bot has joined. A seat token is shown once, at
join, and stored only as its SHA-256: in the match's hash (``token:<seat>``) and in an index
``<prefix>:{pK}:token:<sha256>`` (K from the hash) that tells which match and seat it opens.
Open matches are listed in ``<prefix>:{pN}:lobby`` (a sorted set by creation time).

A match waiting for players lasts ``lobby_ttl_s`` (an hour by default): its record, its seat
tokens and the limit holds counted in it expire together, and the list forgets it. Once it
starts, its record and tokens last ``ttl_s`` (seven days), unless the archiver removes them
with the match first (services/projections/archiver.py).

A seat taken by an account (``account:<seat>``) is opened by that account's token as well as
by its seat token; a match's ``creator`` (an account id, or ``owner:<sha256>`` of the owner
token given at creation) may cancel it while it waits for players.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, cast

import msgspec
import structlog

from engine.rules import Rules
from events.codec import JSON, DecodeError
from services.lobby.revocations import Ended, announce
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.redis.paging import Cursor, page
from services.store.keys import Keys

log = structlog.get_logger()

_RULES = msgspec.json.Decoder(Rules)
_POOLS = msgspec.json.Decoder(list[str | None])

JOIN = LuaScript(
    """
-- KEYS: the match's seat hash, its partition's lobby set
-- ARGV: match id, seat (-1: the first open one), token hash, name ('' keeps the default),
--       account id ('' for a guest)
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1}
end
if redis.call('HGET', KEYS[1], 'status') == 'cancelled' then
  return {-1}
end
local players = tonumber(redis.call('HGET', KEYS[1], 'players'))
local seat = tonumber(ARGV[2])
if seat < 0 then
  for s = 0, players - 1 do
    if redis.call('HGET', KEYS[1], 'seat:' .. s) == 'open' then
      seat = s
      break
    end
  end
  if seat < 0 then
    return {-3, 'full'}
  end
end
if seat >= players then
  return {-2}
end
local kind = redis.call('HGET', KEYS[1], 'seat:' .. seat)
if kind ~= 'open' then
  return {-3, kind}
end
redis.call('HSET', KEYS[1], 'seat:' .. seat, 'taken', 'token:' .. seat, ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'name:' .. seat, ARGV[4])
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'account:' .. seat, ARGV[5])
end
local left = redis.call('HINCRBY', KEYS[1], 'open', -1)
if left == 0 then
  redis.call('HSET', KEYS[1], 'status', 'started')
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return {seat, left}
"""
)

CANCEL = LuaScript(
    """
-- KEYS: the match's seat hash, its partition's lobby set. ARGV: match id
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return -1
end
if status ~= 'open' then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""
)


SEAT_TOKEN_PREFIX = "dst_"
"""Every seat token begins with this (account tokens with ``dab_``): a token never begins with
``-``, which a command line would take for an option."""


def new_token() -> str:
    """A fresh seat token: the prefix and 256 random bits, URL-safe."""
    return SEAT_TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What is stored of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


class JoinError(Exception):
    """Raised when a seat cannot be taken; ``code`` says why (no_match, no_such_seat, seat_taken,
    seat_is_house_bot, match_full)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Seat:
    """One seat of a lobby match, as anyone may see it."""

    seat: int
    kind: str  # bot, open or taken
    name: str
    pool: str | None

    def public(self) -> dict[str, Any]:
        """The seat as JSON."""
        return {"seat": self.seat, "kind": self.kind, "name": self.name, "pool": self.pool}


@dataclass(frozen=True, slots=True)
class LobbyMatch:
    """A match created through the lobby: its rules, seats and whether it has started."""

    match_id: str
    rules: Rules
    seats: tuple[Seat, ...]
    deadline_ms: int
    status: str  # open (waiting for players), started or cancelled
    created: float
    accounts: tuple[str | None, ...] = ()  # by seat: the account holding it
    creator: str = ""  # an account id, or owner:<sha256> of the owner token; "" for none
    forfeit_after: int = 0
    max_rounds: int = 0

    def public(self) -> dict[str, Any]:
        """The match as JSON: nothing secret (no token hash)."""
        return {
            "match_id": self.match_id,
            "status": self.status,
            "rules": msgspec.to_builtins(self.rules),
            "deadline_ms": self.deadline_ms,
            "forfeit_after": self.forfeit_after,
            "max_rounds": self.max_rounds,
            "created": self.created,
            "seats": [
                {**s.public(), "account": a}
                for s, a in zip(self.seats, self.accounts or [None] * len(self.seats), strict=True)
            ],
        }

    @property
    def pools(self) -> tuple[str | None, ...]:
        """The house bot pool of each seat (None: played through the gateway)."""
        return tuple(s.pool for s in self.seats)

    @property
    def names(self) -> tuple[str, ...]:
        """The players' names by seat."""
        return tuple(s.name for s in self.seats)


class Lobby:
    """Creates, joins and reads lobby matches and resolves seat tokens, in Redis."""

    def __init__(self, redis: Client, topo: Keys, ttl_s: int, lobby_ttl_s: int = 3600) -> None:
        self.redis = redis
        self.topo = topo
        self.ttl_s = ttl_s  # a started match's record and tokens
        self.lobby_ttl_s = lobby_ttl_s  # a match waiting for players, its record and tokens

    def key(self, match_id: str) -> str:
        """The match's seat hash (raises InvalidMatchId for a bad id)."""
        return self.topo.lobby_match(match_id)

    def index(self, partition: int) -> str:
        """The sorted set of a partition's open matches."""
        return self.topo.lobby(partition)

    def token_key(self, digest: str) -> str:
        """Where a token hash says which match and seat it opens."""
        return self.topo.seat_token(digest)

    async def create(
        self,
        match_id: str,
        rules: Rules,
        pools: tuple[str | None, ...],
        names: tuple[str, ...],
        deadline_ms: int,
        *,
        accounts: tuple[str | None, ...] = (),
        creator: str = "",
        forfeit_after: int = 0,
        max_rounds: int = 0,
    ) -> LobbyMatch:
        """Store a new lobby match; open seats wait for players, house bot seats are set, and
        seats given an account in ``accounts`` are taken by it."""
        now = time.time()
        fields: dict[str, Any] = {
            "rules": JSON.encode(rules),
            "pools": msgspec.json.encode(list(pools)),
            "players": len(pools),
            "deadline_ms": deadline_ms,
            "forfeit_after": forfeit_after,
            "max_rounds": max_rounds,
            "created": repr(now),
            "creator": creator,
        }
        held = accounts or (None,) * len(pools)
        open_seats = 0
        for seat, (pool, name, account) in enumerate(zip(pools, names, held, strict=True)):
            fields[f"seat:{seat}"] = "bot" if pool is not None else "open"
            fields[f"name:{seat}"] = name
            if account is not None:
                fields[f"seat:{seat}"] = "taken"
                fields[f"account:{seat}"] = account
            open_seats += pool is None and account is None
        fields["open"] = open_seats
        fields["status"] = "open" if open_seats else "started"
        key = self.key(match_id)
        index = self.index(self.topo.partition_of(match_id))
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key, mapping=cast(dict[Any, Any], fields))
        pipe.expire(key, self.lobby_ttl_s if open_seats else self.ttl_s)
        if open_seats:
            pipe.zadd(index, {match_id: now})
        pipe.zremrangebyscore(index, "-inf", now - self.lobby_ttl_s)  # expired ones
        await pipe.execute()
        return _parse(match_id, {k.encode(): _bytes(v) for k, v in fields.items()})

    async def join(
        self, match_id: str, seat: int | None, name: str | None, account: str | None = None
    ) -> tuple[LobbyMatch, int, str]:
        """Take a seat; return the match as it is now, the seat and its token (shown once).

        Raises JoinError when the match, the seat or a free seat does not exist.
        """
        token = new_token()
        digest = token_hash(token)
        partition = self.topo.partition_of(match_id)
        # the index first: if the join then fails, the index points at a seat it does not hold
        await self.redis.set(
            self.token_key(digest),
            f"{match_id} {-1 if seat is None else seat}",
            ex=self.lobby_ttl_s,
        )
        reply = await JOIN(
            self.redis,
            [self.key(match_id), self.index(partition)],
            [match_id, -1 if seat is None else seat, digest, name or "", account or ""],
        )
        code = int(reply[0])
        if code < 0:
            await self.redis.delete(self.token_key(digest))
            if code == -1:
                raise JoinError("no_match", f"no open match {match_id!r} in the lobby")
            if code == -2:
                raise JoinError("no_such_seat", f"seat {seat} does not exist (C3)")
            kind = reply[1].decode()
            if kind == "full":
                raise JoinError("match_full", "every seat of this match is taken")
            if kind == "bot":
                raise JoinError("seat_is_house_bot", f"seat {seat} is played by a house bot")
            raise JoinError("seat_taken", f"seat {seat} is already taken")
        taken, left = code, int(reply[1])
        await self.redis.set(self.token_key(digest), f"{match_id} {taken}", ex=self.lobby_ttl_s)
        if left == 0:
            await self._started(match_id)
        match = await self.get(match_id)
        if match is None:  # the record expired between the seat being taken and this read
            raise JoinError("no_match", f"no open match {match_id!r} in the lobby")
        return match, taken, token

    async def _started(self, match_id: str) -> None:
        """Every seat is taken: the record and its tokens last as long as a started match's."""
        key = self.key(match_id)
        await self.redis.expire(key, self.ttl_s)
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(key))
        for field, digest in raw.items():
            if field.startswith(b"token:"):  # each in the slot of its own hash
                await self.redis.expire(self.token_key(digest.decode()), self.ttl_s)

    async def cancel(self, match_id: str) -> bool | None:
        """Call off a match still waiting for players: True; False if it has started; None if
        there is no such match in the lobby."""
        partition = self.topo.partition_of(match_id)
        code = int(
            await CANCEL(self.redis, [self.key(match_id), self.index(partition)], [match_id])
        )
        if code == 1:  # its seats' tokens open nothing more: streams opened with them end
            raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.key(match_id)))
            for field, digest in raw.items():
                if field.startswith(b"token:") and digest:
                    ended = Ended(kind="seat", reason="seat_ended", token=digest.decode())
                    await announce(self.redis, self.topo, ended)
        return None if code < 0 else code == 1

    async def holder(self, match_id: str, seat: int) -> str | None:
        """The account holding a seat, or None."""
        raw = cast(bytes | None, await self.redis.hget(self.key(match_id), f"account:{seat}"))
        return None if raw is None else raw.decode()

    async def get(self, match_id: str) -> LobbyMatch | None:
        """A lobby match, or None."""
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.key(match_id)))
        return _parse(match_id, raw) if raw else None

    async def open_page(
        self, limit: int, after: Cursor | None = None
    ) -> tuple[list[LobbyMatch], Cursor | None]:
        """A page of the matches waiting for players: the ``limit`` oldest created after
        ``after`` (from the oldest, without it), oldest first, and the cursor of the next page
        (None: no more). Reads at most ``limit`` ids from each partition and the records of the
        page only; a match of the page that has started since is left out, so a page may hold
        fewer."""
        expired = time.time() - self.lobby_ttl_s
        indexes = [self.index(p) for p in range(self.topo.partitions)]
        for index in indexes:
            await self.redis.zremrangebyscore(index, "-inf", expired)
        window, after = await page(self.redis, indexes, limit, after, newest_first=False)
        out: list[LobbyMatch] = []
        for match_id, _, p in window:
            try:
                match = await self.get(match_id)
            except DecodeError as e:  # one corrupt record is left out, not the lobby
                log.error("unreadable lobby record passed over", error=str(e)[:300])
                continue
            if match is None:  # expired
                await self.redis.zrem(indexes[p], match_id)
            elif match.status == "open":
                out.append(match)
        return out, after

    async def resolve(self, token: str) -> tuple[str, int] | None:
        """The match and seat a token opens, or None for a token this lobby never issued."""
        digest = token_hash(token)
        raw = cast(bytes | None, await self.redis.get(self.token_key(digest)))
        if raw is None:
            return None
        match_id, _, seat_text = raw.decode().partition(" ")
        seat = int(seat_text)
        if seat < 0:
            return None
        stored = cast(bytes | None, await self.redis.hget(self.key(match_id), f"token:{seat}"))
        if stored is None or not secrets.compare_digest(stored.decode(), digest):
            return None
        return match_id, seat


def parse_record(match_id: str, fields: dict[str, str]) -> LobbyMatch:
    """A lobby match from its record's fields as text (as the archive keeps them)."""
    return _parse(match_id, {k.encode(): v.encode() for k, v in fields.items()})


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _parse(match_id: str, raw: dict[bytes, bytes]) -> LobbyMatch:
    """The lobby record of a match; raises DecodeError when it is not one this lobby wrote (a
    field missing, unreadable or of the wrong type)."""
    try:
        return _fields(match_id, raw)
    except (KeyError, ValueError, msgspec.DecodeError) as e:
        raise DecodeError(f"the lobby record of match {match_id!r} is corrupt: {e!r}") from None


def _fields(match_id: str, raw: dict[bytes, bytes]) -> LobbyMatch:
    fields = {k.decode(): v.decode() for k, v in raw.items()}
    pools = _POOLS.decode(fields["pools"])
    seats = tuple(
        Seat(seat=i, kind=fields.get(f"seat:{i}", "open"), name=fields.get(f"name:{i}", ""), pool=p)
        for i, p in enumerate(pools)
    )
    return LobbyMatch(
        match_id=match_id,
        rules=_RULES.decode(fields["rules"]),
        seats=seats,
        deadline_ms=int(fields["deadline_ms"]),
        status=fields["status"],
        created=float(fields["created"]),
        accounts=tuple(fields.get(f"account:{i}") for i in range(len(pools))),
        creator=fields.get("creator", ""),
        forfeit_after=int(fields.get("forfeit_after", 0)),
        max_rounds=int(fields.get("max_rounds", 0)),
    )
