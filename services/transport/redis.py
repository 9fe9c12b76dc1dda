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
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from redis.exceptions import ResponseError

from services.redis.connection import Client, is_cluster
from services.redis.lua import LuaScript
from services.store.keys import Keys
from services.transport.base import DATA, Consumer, Entry, LeaseTable, Message, Transport

log = structlog.get_logger()
REPLIES_KEPT = 10_000
"""A reply stream keeps about this many latest entries (a sender reads its own promptly)."""


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
        self._claim_cursor: dict[str, str] = {}
        self._fan = FanIn(self._read_one, block_ms) if is_cluster(redis) else None

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
        start = "0" if pending else ">"
        reply = await self.redis.xreadgroup(
            self.group,
            self.name,
            dict.fromkeys(self.streams, start),
            count=self.count,
            block=None if pending else self.block_ms,
        )
        return _entries(reply)

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

    async def ack(self, entries: Sequence[Entry]) -> None:
        """Acknowledge processed entries (after their effects are durable)."""
        by_stream: dict[str, list[bytes]] = {}
        for e in entries:
            by_stream.setdefault(e.stream, []).append(e.id)
        if not by_stream:
            return
        pipe = self.redis.pipeline(transaction=False)
        for stream, ids in by_stream.items():
            pipe.xack(stream, self.group, *ids)
        await pipe.execute()

    async def answer(self, messages: Sequence[Message], done: Sequence[Entry]) -> None:
        """Add ``messages`` and acknowledge ``done`` in one pipelined round trip."""
        if not messages and not done:
            return
        pipe = self.redis.pipeline(transaction=False)
        for message in messages:
            pipe.xadd(message.stream, {DATA: message.payload})
        by_stream: dict[str, list[bytes]] = {}
        for entry in done:
            by_stream.setdefault(entry.stream, []).append(entry.id)
        for stream, ids in by_stream.items():
            pipe.xack(stream, self.group, *ids)
        await pipe.execute()

    async def claim(self, min_idle_ms: int) -> list[Entry]:
        """Take over entries another consumer left pending for ``min_idle_ms`` (XAUTOCLAIM).

        An entry delivered more than ``max_deliveries`` times is parked on the dead-letter
        stream, acknowledged and logged instead of being returned.
        """
        claimed: list[Entry] = []
        for stream in list(self.streams):
            reply = await self.redis.xautoclaim(
                stream,
                self.group,
                self.name,
                min_idle_time=min_idle_ms,
                start_id=self._claim_cursor.get(stream, "0-0"),
                count=self.count,
            )
            cursor, messages = reply[0], reply[1]
            self._claim_cursor[stream] = cursor.decode() if isinstance(cursor, bytes) else cursor
            if not messages:
                continue
            ids = [m[0] for m in messages if m[1] is not None]
            counts = await self._deliveries(stream, ids)
            for msg_id, fields in messages:
                if fields is None:  # deleted while pending
                    await self.redis.xack(stream, self.group, msg_id)
                    continue
                entry = Entry(stream, msg_id, fields.get(DATA), counts.get(msg_id, 1))
                if entry.deliveries > self.max_deliveries:
                    await self.dead_letter(entry, f"delivered {entry.deliveries} times")
                else:
                    claimed.append(entry)
        return claimed

    async def _deliveries(self, stream: str, ids: Sequence[bytes]) -> dict[bytes, int]:
        if not ids:
            return {}
        rows = await self.redis.xpending_range(
            stream, self.group, min=ids[0], max=ids[-1], count=len(ids) * 2
        )
        return {_as_bytes(r["message_id"]): int(r["times_delivered"]) for r in rows}

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


def cancelled_here() -> bool:
    """Whether the running task was asked to stop (``Task.cancel``), as opposed to a
    CancelledError that a library raised from something it cancelled on its own."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _as_bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _entries(reply: Any) -> list[Entry]:
    out: list[Entry] = []
    if not reply:
        return out
    for stream, messages in reply:
        name = stream.decode() if isinstance(stream, bytes) else stream
        for msg_id, fields in messages:
            out.append(Entry(name, msg_id, fields.get(DATA) if fields else None))
    return out


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
    """Leases as ``<prefix>:{pN}:owner`` keys with a TTL; heartbeats in ``<prefix>:referees``."""

    def __init__(self, redis: Client, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def heartbeat(self, name: str, ttl_ms: int) -> list[str]:
        """Record that ``name`` is alive; return every holder alive within ``ttl_ms``."""
        now = int(time.time() * 1000)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(self.keys.referees, {name: now})
        pipe.zremrangebyscore(self.keys.referees, "-inf", now - ttl_ms)
        pipe.zrange(self.keys.referees, 0, -1)
        members = (await pipe.execute())[2]
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]

    async def renew(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Extend ``name``'s lease on ``partition``; False if it no longer holds it."""
        return bool(await RENEW(self.redis, [self.keys.owner(partition)], [name, ttl_ms]))

    async def take(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Take ``partition`` if nobody holds it; True if ``name`` holds it now."""
        return bool(await self.redis.set(self.keys.owner(partition), name, nx=True, px=ttl_ms))

    async def release(self, partition: int, name: str) -> None:
        """Give ``partition`` back if ``name`` holds it."""
        await RELEASE(self.redis, [self.keys.owner(partition)], [name])

    async def leave(self, name: str) -> None:
        """Remove ``name``'s heartbeat (on a clean stop)."""
        await self.redis.zrem(self.keys.referees, name)


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
        pipe = self.redis.pipeline(transaction=False)
        for message in messages:
            pipe.xadd(message.stream, {DATA: message.payload})
        await pipe.execute()

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

    async def reschedule(self, key: str, member: str, at_ms: int | None) -> None:
        """Set a member's time in a schedule, or remove it (``at_ms`` None)."""
        if at_ms is None:
            await self.redis.zrem(key, member)
        else:
            await self.redis.zadd(key, {member: at_ms})

    def leases(self) -> RedisLeaseTable:
        """The partition lease table of this layout."""
        return RedisLeaseTable(self.redis, self.keys)
