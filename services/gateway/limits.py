"""Rate and concurrency limits, kept in Redis: every gateway process counts against one budget.

Four kinds, each keyed by a limit's name and a subject (an account id, a seat token's hash, a
client address) as ``<prefix>:{pN}:limit:<name>:<subject>``, N from the subject, so the keys
spread over the partitions' slots like every other key:

- :class:`RateLimit`: a token bucket, ``burst`` requests at once refilled at ``rate`` a second.
  The key holds the tokens left and when they were counted, and expires once it is full again.
- :class:`Concurrency`: streams open at once. A sorted set of stream ids scored by when their
  lease ends; the gateway holding a stream renews its lease (:meth:`Concurrency.renew`, from
  its sweep loop), so the streams of a gateway that crashed age out on their own.
- :class:`Cap`: what a subject holds until a match starts: open matches it created, seats it
  took in matches still waiting for players. Each hold is also listed under its match, so
  :func:`release_match` frees them all when the match starts; unreleased ones expire. (An open
  challenge's holds are listed under the challenge the same way, and freed when it closes.)
- :class:`LiveCap`: matches a subject caused that are not over yet (those with house bot
  seats). A sorted set of match ids; a check past the limit asks whether the oldest are over
  and stops counting those, so a match's end frees its place whoever saw it end.

Every check is one Lua script that reads the Redis server's clock (``TIME``), so gateways whose
own clocks disagree still count alike. A request over a limit raises :class:`LimitExceeded`,
answered 429 with ``Retry-After`` and the ``RateLimit-*`` headers of the limit it hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import structlog

from services.redis.lua import Call, Client, LuaScript
from services.store.keys import Keys, partition_of

log = structlog.get_logger()

_SUBJECT = re.compile(r"[A-Za-z0-9._:\-]{1,100}")
STREAM_RETRY_S = 1.0
"""When a client over a stream limit may try again: a closed stream frees its place at once."""
CAP_RETRY_S = 10.0
"""The longest a client over a cap is told to wait: a match starting frees its holds at once."""

BUCKET = """
-- A token bucket (hash: tokens left, when counted in microseconds) at rate a second, burst at
-- once. cost 1 takes a token if one is left; cost 0 only looks. Returns 1 if a token was left
-- (else 0), and the tokens left after.
local function take(key, rate, burst, cost, now)
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = burst
  if state[1] then
    local elapsed = math.max(0, now - tonumber(state[2])) / 1000000
    tokens = math.min(burst, tonumber(state[1]) + elapsed * rate)
  end
  if tokens < 1 then
    return 0, tokens
  end
  if cost > 0 then
    tokens = tokens - cost
    redis.call('HSET', key, 'tokens', tokens, 'at', now)
    -- once full again the bucket is like a new one: forget it then
    redis.call('PEXPIRE', key, math.ceil((burst - tokens) / rate * 1000) + 1000)
  end
  return 1, tokens
end
local function microseconds()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
"""
"""The token bucket's Lua: TAKE runs it, and so does a script that charges a request as it
does its work (the moves sender, :class:`Charge`)."""

TAKE = LuaScript(
    BUCKET
    + """
-- KEYS[1]: a token bucket; ARGV: rate (a second), burst, cost
-- Returns {1 if a token was left (and, at cost 1, is taken now), else 0; tokens left, as text}
local allowed, tokens = take(
  KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), microseconds())
return {allowed, string.format('%.6f', tokens)}
"""
)

HOLD = LuaScript(
    """
-- KEYS[1]: what a subject holds (sorted set: member -> when it ends, ms)
-- ARGV: limit, member, how long it lasts (ms)
-- Returns {1, held} when the member is (now) held, {0, held, ms until the first one ends}
-- when the subject already holds the limit.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  if held >= tonumber(ARGV[1]) then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {0, held, tonumber(first[2]) - now}
  end
  held = held + 1
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {1, held}
"""
)

RENEW = LuaScript(
    """
-- KEYS[1]: a subject's open streams; ARGV: stream id, lease (ms)
-- Returns 1 when the stream's lease is renewed, 0 when it had already ended (not renewed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
"""
)


@dataclass(frozen=True, slots=True)
class Quota:
    """Where a subject stands against one limit, as the ``RateLimit-*`` headers tell it."""

    limit: int  # requests at once (a bucket's burst), or things held at once
    remaining: int
    reset: float  # seconds until the whole limit is available again
    retry_after: float = 0.0  # seconds until one more is allowed (0: now)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """``RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (whole seconds, rounded up)."""
        return [
            (b"ratelimit-limit", b"%d" % self.limit),
            (b"ratelimit-remaining", b"%d" % self.remaining),
            (b"ratelimit-reset", b"%d" % math.ceil(self.reset)),
        ]


class LimitExceeded(Exception):
    """Raised when a request is over a limit: ``limit`` names it, ``quota`` says where the
    subject stands, ``retry_after`` (seconds, to the millisecond, rounded up) when trying
    again can succeed."""

    def __init__(self, limit: str, quota: Quota, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.quota = quota
        self.retry_after = max(0.001, math.ceil(quota.retry_after * 1000) / 1000)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The 429's headers: ``Retry-After`` is ``retry_after`` in whole seconds, rounded up,
        and ``RateLimit-Reset`` is never sooner."""
        retry = math.ceil(self.retry_after)
        quota = Quota(self.quota.limit, 0, max(self.quota.reset, retry))
        return [(b"retry-after", b"%d" % retry), *quota.headers()]


def subject_key(keys: Keys, name: str, subject: str) -> str:
    """The key of ``name``'s count for ``subject``, in the subject's partition; a subject that
    is not a plain name (an odd client address) is stored as its hash."""
    if _SUBJECT.fullmatch(subject) is None:
        subject = "h-" + hashlib.sha256(subject.encode()).hexdigest()[:32]
    tag = keys.tag(partition_of(subject, keys.partitions))
    return f"{keys.prefix}:{tag}:limit:{name}:{subject}"


class RateLimit:
    """A token bucket per subject, shared by every gateway: ``burst`` requests at once,
    refilled at ``rate`` a second."""

    def __init__(self, name: str, rate: float, burst: int, keys: Keys) -> None:
        self.name = name
        self.rate = rate
        self.burst = burst
        self.keys = keys

    def key(self, subject: str) -> str:
        """The bucket of ``subject``."""
        return subject_key(self.keys, self.name, subject)

    def quota(self, tokens: float) -> Quota:
        """Where a subject with ``tokens`` left stands."""
        return Quota(
            limit=self.burst,
            remaining=max(0, math.floor(tokens)),
            reset=max(0.0, (self.burst - tokens) / self.rate),
            retry_after=0.0 if tokens >= 1 else (1 - tokens) / self.rate,
        )

    async def hit(
        self,
        redis: Client,
        subject: str,
        *,
        unless_spent: Sequence[tuple[RateLimit, str]] = (),
    ) -> Quota:
        """Count one request of ``subject``; raise LimitExceeded when its bucket is empty, or
        when any ``(limit, subject)`` of ``unless_spent`` has an empty bucket (those are looked
        at, not counted; all in one round trip)."""
        asked = [(self, subject), *unless_spent]
        answers = await _take(
            redis, [(limit, who, int(i == 0)) for i, (limit, who) in enumerate(asked)]
        )
        for (limit, _), (allowed, quota) in zip(asked, answers, strict=True):
            if not allowed:
                raise limit.exceeded(quota)
        return answers[0][1]

    async def check(self, redis: Client, subject: str) -> Quota:
        """Raise LimitExceeded when ``subject``'s bucket is empty; count nothing."""
        ((allowed, quota),) = await _take(redis, [(self, subject, 0)])
        if not allowed:
            raise self.exceeded(quota)
        return quota

    async def count(self, redis: Client, subject: str) -> Quota:
        """Count a request of ``subject`` that has been answered already: take a token if one
        is left, never raise (the next request is refused)."""
        ((_, quota),) = await _take(redis, [(self, subject, 1)])
        return quota

    def exceeded(self, quota: Quota) -> LimitExceeded:
        """The error for a subject whose bucket is empty."""
        return LimitExceeded(
            self.name,
            quota,
            f"{self.name}: more than {self.rate:g} a second (at most {self.burst} at once); "
            f"retry in {quota.retry_after:.3f} s",
        )


async def _take(
    redis: Client, buckets: Sequence[tuple[RateLimit, str, int]]
) -> list[tuple[bool, Quota]]:
    """Run TAKE on each ``(limit, subject, cost)`` bucket, pipelined: whether each had a token
    left, and its quota after."""
    calls: list[Call] = [([b.key(s)], [b.rate, b.burst, cost]) for b, s, cost in buckets]
    if len(calls) == 1:
        replies = [await TAKE(redis, *calls[0])]
    else:
        replies = await TAKE.many(redis, calls)
    answers = []
    for (limit, _, _), reply in zip(buckets, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        answers.append((bool(int(reply[0])), limit.quota(float(reply[1]))))
    return answers


class Charge:
    """One request counted as :meth:`RateLimit.hit` counts it (a token of ``limit`` taken
    for ``subject``, refused while any ``unless_spent`` bucket is empty): by :meth:`hit`, or
    by a script that does the request's work in the same call — it runs :data:`BUCKET` on
    :meth:`keys` with :meth:`args`, in this order, and hands its answers to :meth:`settle`."""

    __slots__ = ("buckets", "limit", "quota", "subject", "unless_spent")

    def __init__(
        self, limit: RateLimit, subject: str, unless_spent: Sequence[tuple[RateLimit, str]] = ()
    ) -> None:
        self.limit = limit
        self.subject = subject
        self.unless_spent = unless_spent
        self.buckets = [(limit, subject, 1), *((b, who, 0) for b, who in unless_spent)]
        self.quota: Quota | None = None  # where the subject stands, once counted

    async def hit(self, redis: Client) -> Quota:
        """Count the request now, on its own (:meth:`RateLimit.hit`)."""
        self.quota = await self.limit.hit(redis, self.subject, unless_spent=self.unless_spent)
        return self.quota

    def keys(self) -> list[str]:
        """The buckets' keys."""
        return [b.key(who) for b, who, _ in self.buckets]

    def args(self) -> list[float]:
        """Each bucket's rate, burst and cost, in turn."""
        return [x for b, _, cost in self.buckets for x in (b.rate, b.burst, cost)]

    def settle(self, allowed: Sequence[int | bytes], tokens: Sequence[bytes | str]) -> Quota:
        """Raise LimitExceeded for the first bucket that had no token, as :meth:`RateLimit.hit`
        does; else return (and keep) the subject's quota."""
        for (limit, _, _), ok, left in zip(self.buckets, allowed, tokens, strict=True):
            if not int(ok):
                raise limit.exceeded(limit.quota(float(left)))
        self.quota = self.limit.quota(float(tokens[0]))
        return self.quota

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The ``RateLimit-*`` headers of the subject's quota, once counted."""
        return [] if self.quota is None else self.quota.headers()


@dataclass(frozen=True, slots=True)
class Lease:
    """A stream's place under a :class:`Concurrency` limit, held until released."""

    key: str
    member: str
    redis: Client = field(compare=False)


class Concurrency:
    """How many streams each subject has open, at most ``limit`` at once, counted across every
    gateway. A place is a lease of ``lease_s`` seconds that the gateway holding the stream
    renews (:meth:`renew`) until the stream ends."""

    def __init__(self, name: str, limit: int, keys: Keys, lease_s: float) -> None:
        self.name = name
        self.limit = limit
        self.keys = keys
        self.lease_ms = max(1, round(lease_s * 1000))
        self._held: set[Lease] = set()
        self._releasing: set[asyncio.Task[Any]] = set()

    async def acquire(self, redis: Client, subject: str) -> Lease:
        """Take a place for a new stream of ``subject``; raise LimitExceeded when it has
        ``limit`` open already."""
        lease = Lease(subject_key(self.keys, self.name, subject), secrets.token_hex(8), redis)
        reply = await HOLD(redis, [lease.key], [self.limit, lease.member, self.lease_ms])
        if not int(reply[0]):
            quota = Quota(self.limit, 0, STREAM_RETRY_S, STREAM_RETRY_S)
            raise LimitExceeded(
                self.name,
                quota,
                f"{self.limit} streams are already open with this credential; close one (a "
                "dropped stream is noticed within a keep-alive interval)",
            )
        self._held.add(lease)
        return lease

    def release(self, lease: Lease) -> None:
        """A stream ended: free its place now (in the background: the stream is already
        closing, and a place lost on the way ages out with its lease)."""
        if lease not in self._held:
            return
        self._held.discard(lease)
        task = asyncio.get_running_loop().create_task(self._free([lease]))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def renew(self, redis: Client) -> None:
        """Extend the lease of every stream this process holds (call well within ``lease_s``).
        A lease that had already ended stays ended: its stream goes uncounted until it closes."""
        calls: list[Call] = [([h.key], [h.member, self.lease_ms]) for h in self._held]
        if not calls:
            return
        results = await RENEW.many(redis, calls)
        lost = sum(1 for r in results if r == 0)
        failed = sum(1 for r in results if isinstance(r, Exception))
        if lost or failed:
            log.warning("stream leases not renewed", limit=self.name, lost=lost, failed=failed)

    async def close(self) -> None:
        """Free every place this process holds: its streams end with it."""
        held, self._held = list(self._held), set()
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._free(held)

    async def _free(self, leases: Sequence[Lease]) -> None:
        for lease in leases:
            try:
                await lease.redis.zrem(lease.key, lease.member)
            except Exception as e:  # the lease ages out instead
                log.warning("stream place not freed", limit=self.name, error=repr(e))

    @property
    def held(self) -> int:
        """How many places this process holds now."""
        return len(self._held)


@dataclass(frozen=True, slots=True)
class Hold:
    """One thing a subject holds under a :class:`Cap`, also listed under its match."""

    key: str
    member: str
    index: str  # the match's list of holds

    @property
    def entry(self) -> str:
        """How the match's list names this hold."""
        return f"{self.key} {self.member}"


class Cap:
    """How many of one kind of thing a subject holds at once (open matches it created, seats
    it took in matches not started), counted across every gateway. A hold ends when its match
    starts (:func:`release_match`), when dropped, or after ``ttl_s`` seconds."""

    def __init__(
        self,
        name: str,
        limit: int,
        keys: Keys,
        ttl_s: int,
        held: str = "this address already holds {limit}; each is freed when its match starts "
        "(or is cancelled)",
    ) -> None:
        self.name = name
        self.limit = limit
        self.keys = keys
        self.ttl_ms = ttl_s * 1000
        self.held = held  # what the 429's message says, {limit} filled in

    async def hold(self, redis: Client, subject: str, match_id: str) -> Hold:
        """Count one more thing ``subject`` holds in ``match_id``; raise LimitExceeded when it
        holds ``limit`` already. Call it before the thing is made (so the match, if it starts
        meanwhile, releases this hold too), and :meth:`drop` the hold if making it fails."""
        hold = Hold(
            subject_key(self.keys, self.name, subject),
            f"{match_id} {secrets.token_hex(4)}",
            holds_key(self.keys, match_id),
        )
        reply = await HOLD(redis, [hold.key], [self.limit, hold.member, self.ttl_ms])
        if not int(reply[0]):
            wait = min(CAP_RETRY_S, max(0.001, int(reply[2]) / 1000))
            raise LimitExceeded(
                self.name,
                Quota(self.limit, 0, wait, wait),
                f"{self.name}: " + self.held.format(limit=self.limit),
            )
        pipe = redis.pipeline(transaction=False)
        pipe.sadd(hold.index, hold.entry)
        pipe.pexpire(hold.index, self.ttl_ms)
        await pipe.execute()
        return hold

    async def drop(self, redis: Client, hold: Hold) -> None:
        """End one hold: what it counted was not made after all."""
        await redis.zrem(hold.key, hold.member)
        await redis.srem(hold.index, hold.entry)


def holds_key(keys: Keys, match_id: str) -> str:
    """The set of holds a match releases when it starts, in the match's partition."""
    return keys.holds(match_id)


async def release_match(redis: Client, keys: Keys, match_id: str) -> None:
    """The match started (or was cancelled): end every hold counted in it."""
    index = holds_key(keys, match_id)
    entries = cast(set[bytes], await redis.smembers(index))
    if entries:
        pipe = redis.pipeline(transaction=False)
        for entry in entries:
            key, member = entry.decode().split(" ", 1)
            pipe.zrem(key, member)
        await pipe.execute()
    await redis.delete(index)


LIVE = LuaScript(
    """
-- KEYS[1]: the matches a subject caused (sorted set: match id -> when counted, ms)
-- ARGV: limit, match id ('' only looks), how long a match is counted at most (ms)
-- Returns {1, counted, now} when the match is (now) counted (or, looking, one more may be),
-- {0, counted, now} when the subject is at its limit.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
local counted = redis.call('ZCARD', KEYS[1])
if ARGV[2] ~= '' and redis.call('ZSCORE', KEYS[1], ARGV[2]) then return {1, counted, now} end
if counted >= tonumber(ARGV[1]) then return {0, counted, now} end
if ARGV[2] == '' then return {1, counted, now} end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, counted + 1, now}
"""
)
LIVE_S = 86_400
"""The longest a match counts under a :class:`LiveCap`, over or not (a match that outlives it
stops counting)."""
STARTING_S = 5.0
"""How long a match counted under a :class:`LiveCap` is taken to be starting, not looked up:
it is counted before it is made."""

Over = Callable[[str], Awaitable[bool]]
"""Whether a match (by id) is over: ended, cancelled, or gone."""


@dataclass(frozen=True, slots=True)
class Counted:
    """One match counted for a subject under a :class:`LiveCap`."""

    key: str
    match_id: str


class LiveCap:
    """How many matches of one kind (with house bot seats) a subject caused that are not over
    yet, at most ``limit``, counted across every gateway. A match counts from just before it is
    made until it is seen over: each check past the limit asks ``over`` of the subject's
    matches, and those over stop counting (so the count is freed by a match's end, whichever
    process saw it)."""

    def __init__(self, name: str, limit: int, keys: Keys, what: str) -> None:
        self.name = name
        self.limit = limit
        self.keys = keys
        self.what = what  # the subject, as the 429's message names it
        self.ttl_ms = LIVE_S * 1000

    async def count(self, redis: Client, subject: str, match_id: str, over: Over) -> Counted:
        """Count ``match_id`` for ``subject`` (again: no change); raise LimitExceeded when the
        subject has ``limit`` matches not over. Call it before the match is made, and
        :meth:`drop` it if making it fails."""
        counted = Counted(subject_key(self.keys, self.name, subject), match_id)
        await self._call(redis, counted.key, match_id, over)
        return counted

    async def check(self, redis: Client, subject: str, over: Over) -> None:
        """Raise LimitExceeded when ``subject`` has ``limit`` matches not over; count nothing."""
        await self._call(redis, subject_key(self.keys, self.name, subject), "", over)

    async def drop(self, redis: Client, counted: Counted) -> None:
        """Stop counting a match: it was not made after all."""
        await redis.zrem(counted.key, counted.match_id)

    async def _call(self, redis: Client, key: str, match_id: str, over: Over) -> None:
        for first in (True, False):
            reply = await LIVE(redis, [key], [self.limit, match_id, self.ttl_ms])
            if int(reply[0]):
                return
            if not first or not await self._forget_over(redis, key, int(reply[2]), over):
                break
        raise LimitExceeded(
            self.name,
            Quota(self.limit, 0, CAP_RETRY_S, CAP_RETRY_S),
            f"{self.name}: {self.what} has {self.limit} matches with house bots not over yet; "
            "each is freed when its match ends",
        )

    async def _forget_over(self, redis: Client, key: str, now_ms: int, over: Over) -> int:
        """Stop counting the subject's matches that are over (those counted a while ago: a
        newer one may still be being made); return how many."""
        held = cast(
            list[bytes],
            await redis.zrangebyscore(key, "-inf", now_ms - int(STARTING_S * 1000)),
        )
        ended = [m for m in held if await over(m.decode())]
        if ended:
            await redis.zrem(key, *ended)
        return len(ended)
