"""Accounts' event feeds and live matches: the stream an outside bot follows to learn of its
challenges and of its matches starting and ending.

Each account has a Redis stream of events whose entry ids are ``<n>-0`` with n = 1, 2, 3 …
(so a client resumes "after n", as on a seat stream), trimmed to the latest
:data:`FEED_KEPT`, and the set of its live matches. A match joins the set when it starts and
leaves it when it ends; each move into or out of the set is what writes the feed's
``match_started`` or ``match_finished`` — in one script, so a repeated start or a refolded end
never writes its event twice. The end is seen here, by a follower of the notification logs
that the projector feeds (:class:`FinishedFeeds`).

A match can end before its start is written (a deal that blocks at once ends it inside its own
creation, and the follower may see the end before the gateway writes the start). The end then
leaves a mark, the ``match_finished`` event, for :data:`MARK_S`: the start finds it and writes
both events, and the match never joins the live set. Once told, a match keeps an empty mark for
as long, so that a start sent again, or an end refolded, writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

import msgspec
import structlog

from services.projections.projector import Bookends
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.base import Recorded
from services.store.keys import Keys
from services.store.projection import WriteOp
from services.store.source import LogReader

log = structlog.get_logger()

FEED_KEPT = 1000
"""The most events an account's feed keeps; older ones are trimmed (a stream resumed from before
them is told so, with a ``gap`` line)."""
NAME = "accounts"

_APPEND = """
local n = redis.call('HINCRBY', KEYS[1], 'feed', 1)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], n .. '-0', 'd', ARGV[1])
return n
"""
APPEND = LuaScript(
    """
-- KEYS: the account's hash, its feed. ARGV: the event (JSON), how many to keep
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
"""
    + _APPEND
)
STARTED = LuaScript(
    """
-- KEYS: the account's hash, its feed, its live set, the match's mark
-- ARGV: the event, keep, match id, how long a mark lasts (s)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local ended = redis.call('GET', KEYS[4])
if ended then
  if ended == '' then return 0 end -- told already
  -- the match ended before this start: both events, and it never goes live
  local n = redis.call('HINCRBY', KEYS[1], 'feed', 2) - 1
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], n .. '-0', 'd', ARGV[1])
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], (n + 1) .. '-0', 'd', ended)
  redis.call('SET', KEYS[4], '', 'EX', ARGV[4])
  return n
end
if redis.call('SADD', KEYS[3], ARGV[3]) == 0 then return 0 end
"""
    + _APPEND
)
FINISHED = LuaScript(
    """
-- KEYS: the account's hash, its feed, its live set, the match's mark
-- ARGV: the event, keep, match id, how long a mark lasts (s), '1' when the end is recent
if redis.call('SREM', KEYS[3], ARGV[3]) == 0 then
  -- not live: told already, or its start is still to come (a recent end leaves the event)
  if ARGV[5] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('SET', KEYS[4], ARGV[1], 'EX', ARGV[4], 'NX')
  end
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[4], '', 'EX', ARGV[4])
"""
    + _APPEND
)
MARK_S = 600
"""How long the mark of a match's end lasts: a start written later than this after the end (or
an end refolded later than this after it was told) is not matched with it."""
_ENCODE = msgspec.json.Encoder()


class AccountFeeds:
    """Appends to and reads accounts' feeds and live sets."""

    def __init__(self, redis: Client, keys: Keys, kept: int = FEED_KEPT) -> None:
        self.redis = redis
        self.keys = keys
        self.kept = kept

    def _keys(self, account_id: str, match_id: str | None = None) -> list[str]:
        k = self.keys
        keys = [k.account(account_id), k.account_feed(account_id), k.account_live(account_id)]
        if match_id is not None:
            keys.append(k.account_mark(account_id, match_id))
        return keys

    async def append(self, account_id: str, kind: str, body: dict[str, Any]) -> int:
        """Add an event of type ``kind`` to the account's feed; return its id (0: no account)."""
        data = _ENCODE.encode({"type": kind, "ts": round(time.time(), 3), **body})
        return int(await APPEND(self.redis, self._keys(account_id)[:2], [data, self.kept]))

    async def started(self, account_id: str, match_id: str, body: dict[str, Any]) -> int:
        """The match started for the account: it joins the live set and the feed gets a
        ``match_started`` (once, however often this is called); return the event's id or 0."""
        data = _ENCODE.encode(
            {"type": "match_started", "ts": round(time.time(), 3), "match_id": match_id, **body}
        )
        keys = self._keys(account_id, match_id)
        return int(await STARTED(self.redis, keys, [data, self.kept, match_id, MARK_S]))

    async def finished(
        self, account_id: str, match_id: str, body: dict[str, Any], ended_at: float | None = None
    ) -> int:
        """The match ended (at ``ended_at``, on the referee's clock; None: now): it leaves the
        live set and the feed gets a ``match_finished`` (once); return the event's id or 0. An
        end before the match's start is written is kept for the start to write (a recent end
        only: an old one refolded is not waited for)."""
        now = time.time()
        data = _ENCODE.encode(
            {"type": "match_finished", "ts": round(now, 3), "match_id": match_id, **body}
        )
        recent = "1" if ended_at is None or now - ended_at < MARK_S else "0"
        keys = self._keys(account_id, match_id)
        return int(await FINISHED(self.redis, keys, [data, self.kept, match_id, MARK_S, recent]))

    async def live(self, account_id: str) -> list[str]:
        """The account's matches that have started and not ended, sorted."""
        raw = cast(set[bytes], await self.redis.smembers(self.keys.account_live(account_id)))
        return sorted(m.decode() for m in raw)

    async def read(self, account_id: str, after: int, count: int = 100) -> list[tuple[int, bytes]]:
        """The feed's events after id ``after`` (at most ``count``), each as (id, JSON with its
        ``id`` set)."""
        entries = await self.redis.xrange(
            self.keys.account_feed(account_id), f"({after}-0", "+", count=count
        )
        return self._lines(account_id, entries)

    async def since(
        self, account_id: str, after: int, count: int = 100
    ) -> tuple[int, list[tuple[int, bytes]]]:
        """The id of the oldest event the feed still holds (the next id to come when it holds
        none), and its events after ``after`` as :meth:`read` gives them, read at one instant:
        an ``after`` below that id minus one is a resume from events already trimmed."""
        feed = self.keys.account_feed(account_id)
        pipe = self.redis.pipeline(transaction=True)
        pipe.xrange(feed, "-", "+", count=1)
        pipe.hget(self.keys.account(account_id), "feed")
        pipe.xrange(feed, f"({after}-0", "+", count=count)
        first, last, entries = await pipe.execute()
        oldest = _entry_number(first[0][0]) if first else int(last or 0) + 1
        return oldest, self._lines(account_id, entries)

    def _lines(self, account_id: str, raw: Any) -> list[tuple[int, bytes]]:
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], raw)
        out = []
        for entry_id, fields in entries:
            n = _entry_number(entry_id)
            data = fields.get(b"d", b"")
            if not _an_object(data):  # not an event the service wrote: no line for it
                log.error(
                    "unreadable account feed event passed over",
                    account=account_id,
                    id=entry_id.decode(),
                )
                continue
            out.append((n, b'{"id":%d,%s' % (n, data[1:])))
        return out

    async def last(self, account_id: str) -> int:
        """The id of the feed's latest event (0: none yet)."""
        raw = await self.redis.hget(self.keys.account(account_id), "feed")
        return int(raw or 0)


class FinishedFeeds:
    """A follower of the notification logs (fed by the projector): when a match with account
    seats ends, each account's feed is told, and the match leaves its live set."""

    name = NAME

    def __init__(self, store: LogReader, feeds: AccountFeeds) -> None:
        self.store = store
        self.feeds = feeds
        self.bookends = Bookends(store)

    def forget(self) -> None:
        """Drop the matches' first events remembered (read again when needed)."""
        self.bookends.forget()

    async def handle(
        self, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        """Tell the accounts of every match that ended in this batch; nothing to commit with
        the checkpoint (each write is idempotent on its own)."""
        for _, record in entries:
            if record.type not in ("match_created", "match_ended"):
                continue
            ends = await self.bookends.see(record)
            if ends is None:
                continue
            accounts = getattr(ends.created, "accounts", ())
            ended = ends.ended
            rules = ends.created.rules
            for seat, account in enumerate(accounts):
                if account is None:
                    continue
                seats = [s for s, a in enumerate(accounts) if a == account]
                if seat != seats[0]:
                    continue
                side = rules.side_of(seat)
                result = (
                    "none" if ended.winner is None else ("win" if ended.winner == side else "loss")
                )
                await self.feeds.finished(
                    account,
                    record.match_id,
                    {
                        "seats": seats,
                        "side": side,
                        "result": result,
                        "winner": ended.winner,
                        "scores": list(ended.scores),
                        "reason": ended.reason,
                        "players": list(ends.created.players),
                    },
                    ended_at=ends.ts,
                )
                log.debug("account told match ended", match_id=record.match_id, account=account)
        return []


def _entry_number(entry_id: bytes) -> int:
    """The n of a feed entry id ``<n>-0``."""
    return int(entry_id.split(b"-")[0])


def _an_object(data: bytes) -> bool:
    """Whether ``data`` is one JSON object, as every feed event is."""
    if not data.startswith(b"{"):
        return False
    try:
        return isinstance(msgspec.json.decode(data), dict)
    except msgspec.DecodeError:
        return False
