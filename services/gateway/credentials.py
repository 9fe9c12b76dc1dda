"""Every open stream is bound to the credential it was opened with, and ends with it.

A stream opened with an account token (the account's event and play streams, a seat's stream
opened with its holder's account token) or with a seat token is bound here to that token. When
the token ends — rotated, revoked, re-issued by the operator, the account banned, the seat's
match called off — the stream gets a last line saying why (:func:`closed_line`) and ends, on
every gateway, within the time it takes one entry of the revocation stream
(services/lobby/revocations.py) to reach it. The same entry makes the gateway forget what it
remembered of the token (``on_end``), so a request bearing it is refused at once too.

Two things make it hold when the revocation stream cannot be relied on alone:

- an end this gateway learned of is remembered for :data:`REMEMBERED_S`: a stream bound just
  after its token ended (authenticated from a look-up that raced the end) is ended at once;
- :meth:`Credentials.verify`, run by the gateway's sweep, checks every account that has a
  stream open here against Redis, so a gateway that lost the stream for longer than it keeps
  entries still ends what it must.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import msgspec
import structlog
from redis.exceptions import RedisError

from services.gateway.seats import SeatCache
from services.lobby.accounts import Accounts
from services.lobby.revocations import REASONS, Ended, Reason, parse
from services.redis.connection import Client
from services.store.keys import Keys

log = structlog.get_logger()

REMEMBERED_S = 120.0
"""How long a gateway remembers a credential it was told has ended."""
REMEMBERED = 100_000
"""The most ended credentials a gateway remembers (the oldest forgotten first)."""
BLOCK_MS = 1000
"""How long one read of the revocation stream waits for an entry."""
RETRY_S = 0.5
"""How long the follower waits after Redis failed before it reads again."""


@dataclass(frozen=True, slots=True)
class Credential:
    """What a stream was opened with: an account token (``account`` its account) or a seat
    token; ``token`` is the token's SHA-256."""

    kind: Literal["account", "seat"]
    token: str
    account: str = ""


class Closed(msgspec.Struct, frozen=True, kw_only=True, tag="closed", tag_field="type"):
    """A stream's last line when the credential it was opened with ended: ``reason`` is a
    code (``token_rotated``, ``token_revoked``, ``token_reissued``, ``account_banned``,
    ``seat_ended``), ``message`` says it for people."""

    reason: str
    message: str


_ENCODER = msgspec.json.Encoder()


def closed_line(reason: str, sse: bool) -> bytes:
    """The closing line of a stream whose credential ended, as NDJSON or a server-sent
    event."""
    data = _ENCODER.encode(Closed(reason=reason, message=REASONS.get(reason, reason)))
    return b"event: closed\ndata: %s\n\n" % data if sse else data + b"\n"


class Binding:
    """One open stream bound to its credential; ``close(reason)`` ends it with that reason."""

    __slots__ = ("close", "credential", "ended")

    def __init__(self, credential: Credential, close: Callable[[str], None]) -> None:
        self.credential = credential
        self.close = close
        self.ended: str | None = None  # why the stream was closed, once it was

    def end(self, reason: str) -> None:
        """Close the stream (once) for ``reason``."""
        if self.ended is None:
            self.ended = reason
            self.close(reason)


class Credentials:
    """The streams this gateway has open, by the credential each was opened with, and the
    follower of the revocation stream that ends them."""

    def __init__(self, keys: Keys, on_end: Callable[[Ended], None]) -> None:
        self.keys = keys
        self.on_end = on_end  # forget what the gateway remembered of the credential
        self._accounts: dict[str, set[Binding]] = {}
        self._seats: dict[str, set[Binding]] = {}
        # the ends learned of, by _ended_key, remembered a while
        self._ended: SeatCache[Reason] = SeatCache(REMEMBERED_S, REMEMBERED)

    @property
    def bound(self) -> int:
        """How many streams are bound here now."""
        return sum(map(len, self._accounts.values())) + sum(map(len, self._seats.values()))

    def bind(self, credential: Credential, close: Callable[[str], None]) -> Binding:
        """Bind a stream to its credential; a credential already known to have ended closes it
        at once."""
        binding = Binding(credential, close)
        if credential.kind == "account":
            self._accounts.setdefault(credential.account, set()).add(binding)
            reason = self._ended.get(_ended_key("account", credential.account, credential.token))
            reason = reason or self._ended.get(_ended_key("account", credential.account, ""))
        else:
            self._seats.setdefault(credential.token, set()).add(binding)
            reason = self._ended.get(_ended_key("seat", "", credential.token))
        if reason is not None:
            binding.end(reason)
        return binding

    def unbind(self, binding: Binding) -> None:
        """The stream ended: it is no longer bound."""
        c = binding.credential
        index, key = (self._accounts, c.account) if c.kind == "account" else (self._seats, c.token)
        found = index.get(key)
        if found is not None:
            found.discard(binding)
            if not found:
                del index[key]

    def end(self, ended: Ended) -> int:
        """Apply an end: forget the credential, end every stream bound to it, remember it;
        return how many streams were ended."""
        self.on_end(ended)
        key = _ended_key(ended.kind, ended.account, ended.token)
        if ended.reason == "account_unbanned":  # the account's new streams are welcome
            self._ended.drop(key)
            return 0
        self._ended.put(key, ended.reason)
        if ended.kind == "account":
            hit = [
                b
                for b in self._accounts.get(ended.account, ())
                if not ended.token or b.credential.token == ended.token
            ]
        else:
            hit = list(self._seats.get(ended.token, ()))
        for binding in hit:
            binding.end(ended.reason)
        if hit:
            log.info(
                "streams closed: their credential ended",
                reason=ended.reason,
                account=ended.account or None,
                streams=len(hit),
            )
        return len(hit)

    # -- following the revocation stream -------------------------------------------------------

    async def follow(self, redis: Client, stop: asyncio.Event) -> None:
        """Read the revocation stream from its end now, and apply each end as it comes, until
        ``stop`` is set (Redis failing: it reads again from where it was). ``stop`` is looked
        at between reads: a cancelled blocking read may be retried by a cluster client."""
        key = self.keys.revocations
        last = b"0-0"
        while not stop.is_set():
            try:
                newest = cast(list[Any], await redis.xrevrange(key, count=1))
                last = newest[0][0] if newest else b"0-0"
                break
            except RedisError as e:
                log.warning("revocation stream unreadable", error=repr(e))
                await asyncio.sleep(RETRY_S)
        while not stop.is_set():
            try:
                reply = cast(list[Any], await redis.xread({key: last}, count=500, block=BLOCK_MS))
            except RedisError as e:
                log.warning("revocation stream unreadable", error=repr(e))
                await asyncio.sleep(RETRY_S)
                continue
            for _, entries in reply or ():
                for entry_id, fields in entries:
                    last = entry_id
                    ended = parse(cast(dict[bytes, bytes], fields))
                    if ended is None:
                        log.error("unreadable revocation entry passed over", entry=entry_id)
                        continue
                    self.end(ended)

    async def verify(self, accounts: Accounts) -> int:
        """Check every account with a stream open here against Redis, and end the streams
        whose token is no longer the account's, or whose account is banned; return how many
        were ended. (What the revocation stream tells, found without it.)"""
        ids = list(self._accounts)
        if not ids:
            return 0
        current = await accounts.current(ids)
        closed = 0
        for account_id in ids:
            token, banned = current.get(account_id, ("", False))
            for binding in list(self._accounts.get(account_id, ())):
                reason: Reason | None = None
                if banned:
                    reason = "account_banned"
                elif binding.credential.token != token:
                    reason = "token_revoked" if not token else "token_rotated"
                if reason is not None:
                    binding.end(reason)
                    closed += 1
        if closed:
            log.warning("streams closed by the sweep: their credential had ended", streams=closed)
        return closed


def _ended_key(kind: str, account: str, token: str) -> str:
    """Where an end is remembered: a token of an account (``token`` "" for all of them), or
    a seat token (``account`` "")."""
    return f"{kind} {account} {token}"
