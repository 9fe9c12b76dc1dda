"""The message transport on Redis: consumer groups read with XREADGROUP, schedules in sorted
sets, leases in expiring keys.

The hot loops read with XREADGROUP directly instead of through FastStream subscribers.
Measured on this machine (see docs/architecture.md): a FastStream batch subscriber decodes each
entry, re-encodes the batch and decodes it again, and pays about 1 ms per batch against 0.45 ms
raw, and it reads one stream per call where one XREADGROUP can read every partition's stream at
once. FastStream still runs each service: its broker, lifecycle and publishing.

On a Redis Cluster one XREADGROUP may name the streams of one hash slot only, and each
partition is a slot of its own; there a consumer keeps one blocking read per stream going
(:class:`FanIn`) and each batch takes whatever those reads have brought.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.typing import StreamIdT

from services.redis.clock import CLOCK_LUA
from services.redis.connection import Client, is_cluster
from services.redis.lane import Lane, lane_of
from services.redis.lua import Arg, Call, LuaScript
from services.store.keys import Keys
from services.transport.base import (
    DATA,
    Consumer,
    DueDeadlines,
    Entry,
    LeaseTable,
    Message,
    Transport,
)

log = structlog.get_logger()
REPLIES_KEPT = 10_000
"""A reply stream keeps about this many latest entries (a sender reads its own promptly)."""
DEAD_KEPT = 10_000
"""The dead-letter stream keeps exactly this many latest entries (docs/operations.md)."""


async def ensure_groups(redis: Client, streams: Sequence[str], group: str) -> None:
    """Create ``group`` on each stream at id 0 (so no earlier entry is missed), once."""
    for stream in streams:
        try:
            await redis.xgroup_create(stream, group, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise


class RedisConsumer(Consumer):
    """Reads, acks and reclaims entries of several streams for one consumer of a group."""

    def __init__(
        self,
        redis: Client,
        streams: Sequence[str],
        group: str,
        name: str,
        *,
        count: int = 500,
        block_ms: int = 20,
        dead_letters: str = "dom:dead",
        max_deliveries: int = 5,
    ) -> None:
        self.redis = redis
        self.streams = list(streams)
        self.group = group
        self.name = name
        self.count = count
        self.block_ms = block_ms
        self.dead_letters = dead_letters
        self.max_deliveries = max_deliveries
        self.held: set[tuple[str, bytes]] = set()
        self._fan = FanIn(self._read_one, block_ms) if is_cluster(redis) else None
        self._reads: Lane | None = None

    async def start(self) -> None:
        """Create the group on every stream (at 0) before the first read."""
        await ensure_groups(self.redis, self.streams, self.group)

    async def read(self, pending: bool = False) -> list[Entry]:
        """The next batch of new entries across all streams (this consumer's own pending
        entries instead, with ``pending``, as after a restart)."""
        if not self.streams:  # nothing to read from (yet): wait as a blocking read would
            await asyncio.sleep(self.block_ms / 1000)
            return []
        if self._fan is not None:
            if pending:
                return [e for s in self.streams for e in await self._read_one(s, pending=True)]
            return await self._fan.read(self.streams)
        if pending:
            reply = await self.redis.xreadgroup(
                self.group, self.name, dict.fromkeys(self.streams, "0"), count=self.count
            )
            return _entries(reply)
        # New entries come through a lane of this consumer's own: the read blocks, and
        # nothing else must queue behind it.
        if self._reads is None:
            self._reads = Lane.of(cast(Redis, self.redis))
        streams = self.streams
        command: list[Arg] = [
            "XREADGROUP", "GROUP", self.group, self.name, "COUNT", self.count,
            "BLOCK", self.block_ms, "STREAMS", *streams, *(">" for _ in streams),
        ]  # fmt: skip
        (raw,) = await self._reads.pipeline([command], block_s=self.block_ms / 1000)
        if isinstance(raw, Exception):
            raise raw
        return _raw_entries(raw)

    async def _read_one(self, stream: str, pending: bool = False) -> list[Entry]:
        """One stream's next entries (its pending ones with ``pending``), blocking for new."""
        reply = await self.redis.xreadgroup(
            self.group,
            self.name,
            {stream: "0" if pending else ">"},
            count=self.count,
            block=None if pending else self.block_ms,
        )
        return _entries(reply)

    async def close(self) -> None:
        """Stop the reads in flight (their entries, if any, stay pending and are claimed)."""
        if self._fan is not None:
            await self._fan.close()
        if self._reads is not None:
            await self._reads.aclose()
            self._reads = None

    async def ack(self, entries: Sequence[Entry]) -> None:
        """Acknowledge processed entries (after their effects are durable)."""
        await self.answer((), entries)

    async def answer(self, messages: Sequence[Message], done: Sequence[Entry]) -> None:
        """Add ``messages`` and acknowledge ``done`` in one pipelined round trip."""
        if not messages and not done:
            return
        commands: list[Sequence[Arg]] = [("XADD", m.stream, "*", DATA, m.payload) for m in messages]
        by_stream: dict[str, list[bytes]] = {}
        for entry in done:
            by_stream.setdefault(entry.stream, []).append(entry.id)
        for stream, ids in by_stream.items():
            commands.append(("XACK", stream, self.group, *ids))
        raise_first(await lane_of(self.redis).pipeline(commands))

    async def claim(self, min_idle_ms: int) -> list[Entry]:
        """Take over entries left pending for ``min_idle_ms`` (XPENDING IDLE, then XCLAIM of
        those ids), skipping the ones this consumer holds — it is handling them now, however
        long that takes — and those its fan-in has read but not handed out yet.

        An entry delivered more than ``max_deliveries`` times is parked on the dead-letter
        stream, acknowledged and logged instead of being returned.
        """
        claimed: list[Entry] = []
        for stream in list(self.streams):
            busy = {entry_id for s, entry_id in self.held if s == stream}
            if self._fan is not None:
                busy.update(e.id for e in self._fan.unread(stream))
            rows = await self.redis.xpending_range(
                stream, self.group, "-", "+", self.count + len(busy), idle=min_idle_ms
            )
            delivered = {_as_bytes(r["message_id"]): int(r["times_delivered"]) for r in rows}
            ids = [i for i in delivered if i not in busy][: self.count]
            if not ids:
                continue
            messages = cast(
                list[tuple[bytes | None, dict[bytes, bytes] | None]],
                await self.redis.xclaim(
                    stream, self.group, self.name, min_idle_ms, list[StreamIdT](ids)
                ),
            )
            found: set[bytes] = set()
            for msg_id, fields in messages:
                if msg_id is None or fields is None:  # deleted while pending (6.2 says so
                    continue  # without its id)
                found.add(msg_id)
                entry = Entry(
                    stream, msg_id, fields.get(DATA), delivered[msg_id] + 1, id_ms(msg_id)
                )
                if entry.deliveries > self.max_deliveries:
                    await self.dead_letter(entry, f"delivered {entry.deliveries} times")
                else:
                    claimed.append(entry)
            if len(found) < len(ids):
                await self._drop_deleted(stream, [i for i in ids if i not in found])
        return claimed

    async def _drop_deleted(self, stream: str, ids: Sequence[bytes]) -> None:
        """Acknowledge the entries among ``ids`` that were deleted from the stream while
        pending (Redis 7 drops them from the group itself; 6.2 keeps them)."""
        pipe = self.redis.pipeline(transaction=False)
        for entry_id in ids:
            pipe.xrange(stream, entry_id, entry_id)
        found = await pipe.execute()
        gone = [entry_id for entry_id, rows in zip(ids, found, strict=True) if not rows]
        if gone:
            await self.redis.xack(stream, self.group, *gone)

    async def dead_letter(self, entry: Entry, reason: str) -> None:
        """Park an entry that cannot be processed, acknowledge it, and say why in the log."""
        await self.redis.xadd(
            self.dead_letters,
            {
                "stream": entry.stream,
                "id": entry.id,
                "group": self.group,
                "reason": reason,
                DATA: entry.data or b"",
            },
            maxlen=DEAD_KEPT,
            approximate=False,
        )
        await self.redis.xack(entry.stream, self.group, entry.id)
        log.warning(
            "message dead-lettered",
            stream=entry.stream,
            id=entry.id.decode(),
            group=self.group,
            reason=reason,
        )


class FanIn:
    """Reads of many streams, one blocking read per stream at a time, merged into batches.

    Each stream has a task that reads it (``read_one``) and hands over what it got; the task
    reads again only once a batch has taken it, so no more is delivered than the consumer has
    asked for. A read that failed is raised to the consumer, and the stream is read again after
    a pause; the failures of one batch's wait are raised as one (while Redis is away, every
    stream fails alike). The streams read follow the list passed to :meth:`read` (a referee's
    change as leases move): a stream dropped has its read cancelled, whose entries, if Redis
    had delivered any, stay pending to be claimed.
    """

    def __init__(self, read_one: Callable[[str], Awaitable[list[Entry]]], block_ms: int) -> None:
        self.read_one = read_one
        self.block_ms = block_ms
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ready: list[Entry] = []
        self._errors: list[Exception] = []
        self._arrived = asyncio.Event()
        self._taken = asyncio.Event()

    async def read(self, streams: Sequence[str]) -> list[Entry]:
        """The entries the streams' reads have brought, waiting up to the block time for
        some; raises the error of a read that failed."""
        self._follow(streams)
        if not self._ready and not self._errors:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), self.block_ms / 1000)
        if self._errors:
            error = self._errors[0]
            self._errors.clear()
            raise error
        batch, self._ready = self._ready, []
        self._arrived.clear()
        self._taken.set()  # the readers that waited for this read again
        self._taken = asyncio.Event()
        return batch

    def unread(self, stream: str) -> list[Entry]:
        """The entries of ``stream`` read and not yet handed out by :meth:`read`."""
        return [e for e in self._ready if e.stream == stream]

    async def close(self) -> None:
        """Cancel every read."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)

    def _follow(self, streams: Sequence[str]) -> None:
        wanted = set(streams)
        for stream in list(self._tasks):
            if stream not in wanted:
                self._tasks.pop(stream).cancel()
        for stream in streams:
            task = self._tasks.get(stream)
            if task is None or task.done():  # a read that ended on its own is started again
                self._tasks[stream] = asyncio.create_task(self._reader(stream), name=stream)

    def _followed(self, stream: str) -> bool:
        """Whether the running reader is still the one that reads ``stream`` (a stream
        dropped, or the fan-in closed, has its reader taken off before it is cancelled)."""
        return self._tasks.get(stream) is asyncio.current_task()

    async def _reader(self, stream: str) -> None:
        # A cancel that meets a timeout inside the Redis client can come out as the client's
        # TimeoutError (Python 3.11's asyncio.timeout), so the loop also checks it still reads.
        while self._followed(stream):
            try:
                entries = await self.read_one(stream)
            except asyncio.CancelledError:
                if self._followed(stream) and not cancelled_here():
                    # The Redis client cancels what it is waiting on when it drops a node's
                    # connections (a failover): that ends this read, not the reader.
                    self._errors.append(ConnectionError(f"a read of {stream} was cut off"))
                    self._arrived.set()
                    await asyncio.sleep(0.5)
                    continue
                raise
            except Exception as e:
                self._errors.append(e)
                self._arrived.set()
                await asyncio.sleep(0.5)
                continue
            if not self._followed(stream):  # dropped meanwhile: what it read is claimed later
                return
            if entries:
                self._ready.extend(entries)
                self._arrived.set()
                await self._taken.wait()


async def trim_consumed(redis: Client, stream: str) -> int:
    """``XTRIM stream MINID`` at the oldest entry some consumer group of the stream still
    needs: for each group, its oldest pending entry, else the last entry delivered to it (kept,
    so the stream's own last id survives). Every entry below was delivered to every group and
    acknowledged by it. A stream without groups (or without the stream) is left alone.

    Nothing between reading the groups and trimming can make an older entry needed again:
    deliveries and acknowledgements only move forward, and the services create their groups
    once, at the start of the stream (:func:`ensure_groups`), before anything is trimmed."""
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError:  # no such stream
        return 0
    floor: tuple[int, int] | None = None
    for group in groups:
        bound = _entry_id(group["last-delivered-id"])
        if int(group["pending"]):
            summary = await redis.xpending(stream, group["name"])
            oldest = summary.get("min")
            if oldest is not None:
                bound = min(bound, _entry_id(oldest))
        floor = bound if floor is None else min(floor, bound)
    if floor is None or floor == (0, 0):
        return 0
    removed: int = await redis.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=False)
    return removed


def _entry_id(raw: object) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def cancelled_here() -> bool:
    """Whether the running task was asked to stop (``Task.cancel``), as opposed to a
    CancelledError that a library raised from something it cancelled on its own."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def id_ms(entry_id: bytes | str) -> int:
    """The time in a stream entry id (``<ms>-<seq>``): when Redis added it, on its clock."""
    raw = entry_id if isinstance(entry_id, bytes) else entry_id.encode()
    return int(raw.partition(b"-")[0])


def raise_first(replies: Sequence[Any]) -> None:
    """Raise the first error among a pipeline's replies, as redis-py's pipeline does."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


def _raw_entries(reply: Any) -> list[Entry]:
    """The entries of a raw XREADGROUP reply, as a lane hands it: per stream its name and its
    entries, each an id and a flat list of fields and values (None: deleted while pending)."""
    out: list[Entry] = []
    if not reply:
        return out
    for stream, messages in reply:
        name = stream.decode()
        for msg_id, fields in messages:
            data = None
            if fields:
                for i in range(0, len(fields) - 1, 2):
                    if fields[i] == DATA:
                        data = fields[i + 1]
                        break
            out.append(Entry(name, msg_id, data, 1, id_ms(msg_id)))
    return out


def _entries(reply: Any) -> list[Entry]:
    out: list[Entry] = []
    if not reply:
        return out
    for stream, messages in reply:
        name = stream.decode() if isinstance(stream, bytes) else stream
        for msg_id, fields in messages:
            out.append(Entry(name, msg_id, fields.get(DATA) if fields else None, 1, id_ms(msg_id)))
    return out


_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

DEADLINES_DUE = LuaScript(
    CLOCK_LUA
    + """
-- KEYS[1]: the partition's deadlines, KEYS[2]: when they were last checked, KEYS[3]: the
-- partition's commands. ARGV[1]: the gap that is a stall (ms), ARGV[2]: the group that
-- processes the commands, ARGV[3]: how many due deadlines to return at most. A stall is made
-- up for first; then a deadline is due once every command that arrived before it is
-- processed: at most the arrival of the oldest command still pending or unread.
local now = server_now()
local shifted = make_up_for_stall(KEYS[1], KEYS[2], tonumber(ARGV[1]), now)
local limit = now
if redis.call('EXISTS', KEYS[3]) == 1 then
  local delivered
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do
    local name, last_id
    for i = 1, #group, 2 do
      if group[i] == 'name' then name = group[i + 1] end
      if group[i] == 'last-delivered-id' then last_id = group[i + 1] end
    end
    if name == ARGV[2] then delivered = last_id end
  end
  local oldest
  if delivered then
    local pending = redis.call('XPENDING', KEYS[3], ARGV[2])
    if pending[1] > 0 then
      oldest = pending[2]
    else
      local unread = redis.call('XRANGE', KEYS[3], '(' .. delivered, '+', 'COUNT', 1)
      if unread[1] then oldest = unread[1][1] end
    end
  else
    local unread = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)
    if unread[1] then oldest = unread[1][1] end
  end
  if oldest then
    local arrived = tonumber(string.match(oldest, '^(%d+)'))
    if arrived < limit then limit = arrived end
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', limit, 'LIMIT', 0, tonumber(ARGV[3]))
local held = 0
if limit < now then
  held = redis.call('ZCOUNT', KEYS[1], '(' .. limit, now)
end
return {now, shifted, held, due}
"""
)

HEARTBEAT = LuaScript(
    _NOW
    + """
-- KEYS: the heartbeats. ARGV: the process, how long a beat lasts (ms). Reply: who is alive.
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""
)

RENEW = LuaScript(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)

RELEASE = LuaScript(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
)


class RedisLeaseTable(LeaseTable):
    """Leases as ``<prefix>:{pN}:owner`` keys with a TTL; heartbeats in ``<prefix>:referees``.

    Another ``role`` (the archiver, say) has leases of its own: ``<prefix>:{pN}:lease:<role>``,
    heartbeats in ``<prefix>:holders:<role>``."""

    def __init__(self, redis: Client, keys: Keys, role: str = "referee") -> None:
        self.redis = redis
        self.keys = keys
        self.role = role
        self._heartbeats = keys.heartbeats_of(role)

    def _lease(self, partition: int) -> str:
        return self.keys.lease_of(partition, self.role)

    async def heartbeat(self, name: str, ttl_ms: int) -> list[str]:
        """Record that ``name`` is alive; return every holder alive within ``ttl_ms``. Both
        on the Redis server's clock, so a holder whose own clock is behind or ahead is
        counted alive exactly as long as any other."""
        members = await HEARTBEAT(self.redis, [self._heartbeats], [name, ttl_ms])
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]

    async def renew(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Extend ``name``'s lease on ``partition``; False if it no longer holds it."""
        return bool(await RENEW(self.redis, [self._lease(partition)], [name, ttl_ms]))

    async def take(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Take ``partition`` if nobody holds it; True if ``name`` holds it now."""
        return bool(await self.redis.set(self._lease(partition), name, nx=True, px=ttl_ms))

    async def release(self, partition: int, name: str) -> None:
        """Give ``partition`` back if ``name`` holds it."""
        await RELEASE(self.redis, [self._lease(partition)], [name])

    async def leave(self, name: str) -> None:
        """Remove ``name``'s heartbeat (on a clean stop)."""
        await self.redis.zrem(self._heartbeats, name)


class RedisTransport(Transport):
    """The transport on one Redis node, sharing the services' client."""

    def __init__(self, redis: Client, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def consumer(
        self,
        group: str,
        name: str,
        streams: Sequence[str],
        *,
        count: int,
        max_deliveries: int,
        block_ms: int = 20,
    ) -> RedisConsumer:
        """A consumer ``name`` of ``group`` over ``streams``."""
        return RedisConsumer(
            self.redis,
            streams,
            group,
            name,
            count=count,
            block_ms=block_ms,
            dead_letters=self.keys.dead_letters,
            max_deliveries=max_deliveries,
        )

    async def publish(self, messages: Sequence[Message]) -> None:
        """Add ``messages`` in one pipelined round trip."""
        if not messages:
            return
        commands = [("XADD", m.stream, "*", DATA, m.payload) for m in messages]
        raise_first(await lane_of(self.redis).pipeline(commands))

    async def reply(self, stream: str, payload: bytes) -> None:
        """Add a reply to a sender's reply stream, which keeps only its latest entries."""
        await self.redis.xadd(stream, {DATA: payload}, maxlen=REPLIES_KEPT)

    async def due(self, keys: Sequence[str], now_ms: int, count: int) -> list[list[str]]:
        """For each schedule, the members due by ``now_ms``, soonest first; one pipeline."""
        if not keys:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.zrangebyscore(key, 0, now_ms, start=0, num=count)
        replies = await pipe.execute()
        return [[m.decode() if isinstance(m, bytes) else str(m) for m in raw] for raw in replies]

    async def deadlines_due(
        self, partitions: Sequence[int], group: str, count: int, stall_ms: int
    ) -> list[DueDeadlines]:
        """Each partition's deadlines checked on the server's clock, in one script per
        partition (pipelined): stalls made up for, then what is due."""
        keys = self.keys
        calls: list[Call] = [
            ([keys.deadlines(p), keys.clock(p), keys.commands(p)], [stall_ms, group, count])
            for p in partitions
        ]
        out: list[DueDeadlines] = []
        for reply in await DEADLINES_DUE.many(self.redis, calls):
            if isinstance(reply, Exception):
                raise reply
            now, shifted, held, due = reply
            matches = [m.decode() if isinstance(m, bytes) else str(m) for m in due]
            out.append(DueDeadlines(matches, int(now), int(shifted), int(held)))
        return out

    async def reschedule(self, key: str, member: str, at_ms: int | None) -> None:
        """Set a member's time in a schedule, or remove it (``at_ms`` None)."""
        if at_ms is None:
            await self.redis.zrem(key, member)
        else:
            await self.redis.zadd(key, {member: at_ms})

    def leases(self) -> RedisLeaseTable:
        """The partition lease table of this layout."""
        return RedisLeaseTable(self.redis, self.keys)

    async def trim(self, streams: Sequence[str]) -> int:
        """Trim each stream below what its groups still need (:func:`trim_consumed`)."""
        removed = 0
        for stream in streams:
            removed += await trim_consumed(self.redis, stream)
        return removed
