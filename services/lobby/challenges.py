"""Challenges: one account invites named accounts to a match; when every one accepts, it starts.

A challenge is a hash ``challenge:<id>`` that expires on its own after ``ttl_s``; each account
involved lists it in ``acct:<id>:challenges`` (a sorted set by expiry, pruned as it is read,
the latest 200 kept) and, while it is open, in ``acct:<id>:challenges:open`` (never trimmed:
how many may be open at once is the gateway's limit), so no flood of challenges made and
closed can push an open one out of an account's list.
Accepting is one script: it checks the challenge is still open and names the account, and
says when the last acceptance makes it ready, so exactly one caller starts the match. Every
step is told to the other accounts involved through their feeds.

Seats: the challenger sits at seat 0 and the challenged in the order named (with partners,
C3, the challenger's partner is the second one named).
"""

from __future__ import annotations

import secrets
import time
from typing import Any, cast

import msgspec

from engine.rules import Rules
from events.codec import JSON
from services.lobby.accounts import Account, Accounts
from services.projections.accounts import AccountFeeds
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.keys import Keys, partition_of

_RULES = msgspec.json.Decoder(Rules)
_IDS = msgspec.json.Decoder(list[str])

ACCEPT = LuaScript(
    """
-- KEYS: the challenge's hash. ARGV: the accepting account id
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {-1} end
if status ~= 'open' then return {-2, status} end
local to = cjson.decode(redis.call('HGET', KEYS[1], 'to'))
local named = false
for _, id in ipairs(to) do
  if id == ARGV[1] then named = true end
end
if not named then return {-3} end
local accepted = cjson.decode(redis.call('HGET', KEYS[1], 'accepted'))
for _, id in ipairs(accepted) do
  if id == ARGV[1] then return {0, #accepted, #to} end
end
table.insert(accepted, ARGV[1])
redis.call('HSET', KEYS[1], 'accepted', cjson.encode(accepted))
if #accepted == #to then
  redis.call('HSET', KEYS[1], 'status', 'starting')
  return {2, #accepted, #to}
end
return {1, #accepted, #to}
"""
)
CLOSE = LuaScript(
    """
-- KEYS: the challenge's hash. ARGV: the new status, who closes it, 'from' or 'to'
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status ~= 'open' then return -2 end
local field = redis.call('HGET', KEYS[1], ARGV[3])
if ARGV[3] == 'from' then
  if field ~= ARGV[2] then return -3 end
else
  local named = false
  for _, id in ipairs(cjson.decode(field)) do
    if id == ARGV[2] then named = true end
  end
  if not named then return -3 end
end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'closed_by', ARGV[2])
return 1
"""
)


LISTED = 100
"""The most challenges an account's list shows, unless more are open (each open one is shown)."""


class ChallengeError(Exception):
    """Raised when a challenge cannot be made or answered; ``code`` says why and ``status``
    the HTTP status it maps to."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def check_seats(opponents: list[str], rules: Rules) -> None:
    """Raise ChallengeError unless the challenger and ``opponents`` fill the rules' seats."""
    if len(opponents) + 1 != rules.players:
        raise ChallengeError(
            422,
            "bad_players",
            f"these rules seat {rules.players} players: name {rules.players - 1} opponents (C3)",
        )


class Challenge(msgspec.Struct, frozen=True, kw_only=True):
    """A challenge as anyone involved may see it."""

    id: str
    challenger: str  # account id
    opponents: tuple[str, ...]  # account ids, in seat order after the challenger
    names: tuple[str, ...]  # every seat's name, the challenger first
    rules: Rules
    deadline_ms: int
    status: str  # open, starting, started, declined, cancelled
    accepted: tuple[str, ...]
    match_id: str | None
    created: float
    expires: float

    @classmethod
    def against_house(
        cls, challenger: Account, pools: list[str], rules: Rules, deadline_ms: int, match_id: str
    ) -> Challenge:
        """A challenge of house bot pools, started as it is made: each pool is an opponent
        ``house:<pool>`` that has accepted (as arenas name house entrants)."""
        now = round(time.time(), 3)
        opponents = tuple(f"house:{pool}" for pool in pools)
        return cls(
            id="c-" + secrets.token_hex(6),
            challenger=challenger.id,
            opponents=opponents,
            names=(challenger.name, *pools),
            rules=rules,
            deadline_ms=deadline_ms,
            status="started",
            accepted=opponents,
            match_id=match_id,
            created=now,
            expires=now,
        )

    def public(self) -> dict[str, Any]:
        """The challenge as JSON."""
        return {
            "id": self.id,
            "from": {"id": self.challenger, "name": self.names[0]},
            "to": [
                {"id": a, "name": n, "accepted": a in self.accepted}
                for a, n in zip(self.opponents, self.names[1:], strict=True)
            ],
            "rules": msgspec.to_builtins(self.rules),
            "deadline_ms": self.deadline_ms,
            "status": self.status,
            "match_id": self.match_id,
            "created": self.created,
            "expires": self.expires,
        }

    @property
    def seats(self) -> tuple[str, ...]:
        """The account of each seat."""
        return (self.challenger, *self.opponents)


class Challenges:
    """Makes, answers and lists challenges, telling every account involved through its feed."""

    def __init__(
        self, redis: Client, keys: Keys, accounts: Accounts, feeds: AccountFeeds, ttl_s: int
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.accounts = accounts
        self.feeds = feeds
        self.ttl_s = ttl_s

    def key(self, challenge_id: str) -> str:
        """The challenge's hash."""
        tag = self.keys.tag(partition_of(challenge_id, self.keys.partitions))
        return f"{self.keys.prefix}:{tag}:challenge:{challenge_id}"

    def index(self, account_id: str) -> str:
        """The account's challenges, made or received, by expiry."""
        return f"{self.keys.account(account_id)}:challenges"

    def open_index(self, account_id: str) -> str:
        """The account's open challenges, made or received, by expiry."""
        return f"{self.index(account_id)}:open"

    async def create(
        self, challenger: Account, opponents: list[str], rules: Rules, deadline_ms: int
    ) -> Challenge:
        """Challenge the accounts named ``opponents`` (:meth:`prepare`, then :meth:`open`)."""
        challenge = await self.prepare(challenger, opponents, rules, deadline_ms)
        await self.open(challenge)
        return challenge

    async def prepare(
        self, challenger: Account, opponents: list[str], rules: Rules, deadline_ms: int
    ) -> Challenge:
        """The challenge of the accounts named ``opponents``, checked and not yet made; raises
        ChallengeError for an unknown, banned or repeated name, the challenger itself, or a
        count that is not the rules'."""
        check_seats(opponents, rules)
        found: list[Account] = []
        for name in opponents:
            account = await self.accounts.by_name(name) if isinstance(name, str) else None
            if account is None:
                raise ChallengeError(404, "no_account", f"no account named {name!r}")
            if account.banned:
                raise ChallengeError(409, "account_banned", f"{account.name!r} is banned")
            if account.id == challenger.id or account.id in (a.id for a in found):
                raise ChallengeError(
                    422, "bad_players", "each account plays one seat of a challenge"
                )
            found.append(account)
        now = round(time.time(), 3)
        return Challenge(
            id="c-" + secrets.token_hex(6),
            challenger=challenger.id,
            opponents=tuple(a.id for a in found),
            names=(challenger.name, *(a.name for a in found)),
            rules=rules,
            deadline_ms=deadline_ms,
            status="open",
            accepted=(),
            match_id=None,
            created=now,
            expires=now + self.ttl_s,
        )

    async def open(self, challenge: Challenge) -> None:
        """Make a prepared challenge: store it, list it for every account involved and tell
        those challenged."""
        key = self.key(challenge.id)
        await self.redis.hset(
            key,
            mapping={
                "from": challenge.challenger,
                "to": msgspec.json.encode(list(challenge.opponents)),
                "names": msgspec.json.encode(list(challenge.names)),
                "rules": JSON.encode(challenge.rules),
                "deadline_ms": challenge.deadline_ms,
                "status": "open",
                "accepted": "[]",
                "created": repr(challenge.created),
                "expires": repr(challenge.expires),
            },
        )
        await self.redis.expire(key, self.ttl_s + 3600)  # kept a while after it closes
        for account_id in challenge.seats:
            await self._index(account_id, challenge)
        for account_id in challenge.opponents:
            await self.feeds.append(account_id, "challenge", {"challenge": challenge.public()})

    async def _index(self, account_id: str, challenge: Challenge) -> None:
        key, still_open = self.index(account_id), self.open_index(account_id)
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(key, "-inf", now - 3600)
        pipe.zadd(key, {challenge.id: challenge.expires})
        pipe.zremrangebyrank(key, 0, -201)  # the latest 200 at most
        pipe.expire(key, self.ttl_s + 3600)
        pipe.zremrangebyscore(still_open, "-inf", now)  # expired
        pipe.zadd(still_open, {challenge.id: challenge.expires})
        pipe.expire(still_open, self.ttl_s)
        await pipe.execute()

    async def _closed(self, challenge: Challenge) -> None:
        """The challenge is no longer open: off every involved account's open list."""
        pipe = self.redis.pipeline(transaction=False)
        for account_id in challenge.seats:
            pipe.zrem(self.open_index(account_id), challenge.id)
        await pipe.execute()

    async def get(self, challenge_id: str) -> Challenge | None:
        """The challenge, or None (unknown or long gone)."""
        if not challenge_id.startswith("c-") or len(challenge_id) > 40:
            return None
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.key(challenge_id)))
        if not raw:
            return None
        challenge = _parse(challenge_id, raw)
        if challenge.status == "open" and challenge.expires <= time.time():
            return msgspec.structs.replace(challenge, status="expired")
        return challenge

    async def _involved(self, account: Account, challenge_id: str) -> Challenge:
        challenge = await self.get(challenge_id)
        if challenge is None or account.id not in challenge.seats:
            raise ChallengeError(404, "no_challenge", f"no challenge {challenge_id!r} for you")
        return challenge

    async def accept(self, account: Account, challenge_id: str) -> tuple[Challenge, bool]:
        """Accept a challenge made to ``account``; return it and whether this acceptance was the
        last (the caller then starts the match and calls :meth:`started`)."""
        challenge = await self._involved(account, challenge_id)
        if challenge.status == "expired":
            raise ChallengeError(409, "challenge_closed", "the challenge has expired")
        reply = await ACCEPT(self.redis, [self.key(challenge_id)], [account.id])
        code = int(reply[0])
        if code == -2:
            raise ChallengeError(
                409, "challenge_closed", f"the challenge is {reply[1].decode()}, not open"
            )
        if code < 0:
            raise ChallengeError(403, "not_challenged", "this challenge was not made to you")
        now = await self._involved(account, challenge_id)
        if code > 0:
            for other in now.seats:
                if other != account.id:
                    await self.feeds.append(
                        other, "challenge_accepted", {"challenge": now.public(), "by": account.name}
                    )
        return now, code == 2

    async def decline(self, account: Account, challenge_id: str) -> Challenge:
        """Decline a challenge made to ``account``."""
        return await self._close(account, challenge_id, "declined", "to")

    async def cancel(self, account: Account, challenge_id: str) -> Challenge:
        """Withdraw a challenge ``account`` made."""
        return await self._close(account, challenge_id, "cancelled", "from")

    async def _close(
        self, account: Account, challenge_id: str, status: str, role: str
    ) -> Challenge:
        challenge = await self._involved(account, challenge_id)
        code = int(await CLOSE(self.redis, [self.key(challenge_id)], [status, account.id, role]))
        if code == -2 or challenge.status == "expired":
            raise ChallengeError(
                409, "challenge_closed", f"the challenge is {challenge.status}, not open"
            )
        if code < 0:
            who = "made" if role == "from" else "made to you"
            raise ChallengeError(403, "not_yours", f"only a challenge you {who} can be {status}")
        now = await self._involved(account, challenge_id)
        await self._closed(now)
        for other in now.seats:
            if other != account.id:
                await self.feeds.append(
                    other, f"challenge_{status}", {"challenge": now.public(), "by": account.name}
                )
        return now

    async def started(self, challenge_id: str, match_id: str | None) -> None:
        """The match of a ready challenge was created (``match_id``), or could not be (None:
        the challenge is closed as failed)."""
        status = "started" if match_id else "failed"
        await self.redis.hset(
            self.key(challenge_id), mapping={"status": status, "match_id": match_id or ""}
        )
        challenge = await self.get(challenge_id)
        if challenge is not None:
            await self._closed(challenge)

    async def mine(self, account: Account) -> list[Challenge]:
        """The account's challenges, made or received, newest first: every one still open
        (however many others were made and closed since), then the latest closed within the
        hour, LISTED in all (more only if more are open)."""
        now = time.time()
        still_open = cast(
            list[bytes],
            await self.redis.zrangebyscore(self.open_index(account.id), now, "+inf"),
        )
        recent = cast(
            list[bytes],
            await self.redis.zrevrangebyscore(
                self.index(account.id), "+inf", now - 3600, 0, LISTED
            ),
        )
        ids = dict.fromkeys(i.decode() for i in [*still_open, *recent])
        found = [c for i in ids if (c := await self.get(i)) is not None]
        opened = [c for c in found if c.status in ("open", "starting")]
        closed = [c for c in found if c.status not in ("open", "starting")]
        closed.sort(key=lambda c: -c.created)
        out = opened + closed[: max(0, LISTED - len(opened))]
        return sorted(out, key=lambda c: -c.created)


def _parse(challenge_id: str, raw: dict[bytes, bytes]) -> Challenge:
    f = {k.decode(): v.decode() for k, v in raw.items()}
    return Challenge(
        id=challenge_id,
        challenger=f["from"],
        opponents=tuple(_IDS.decode(f["to"])),
        names=tuple(_IDS.decode(f["names"])),
        rules=_RULES.decode(f["rules"]),
        deadline_ms=int(f["deadline_ms"]),
        status=f["status"],
        accepted=tuple(_IDS.decode(f["accepted"])),
        match_id=f.get("match_id") or None,
        created=float(f["created"]),
        expires=float(f["expires"]),
    )
