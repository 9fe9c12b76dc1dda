"""The message transport in memory: consumer groups, schedules and leases of this process.

It shares :class:`MemoryStreams` with a :class:`MemoryEventStore`, so what an append writes
(turns, deadlines, acknowledgements) is what the consumers read, as on Redis. Several referees
and bot workers in one event loop share one transport the way processes share a Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import structlog

from services.store.memory import MemoryEventStore, MemoryStreams
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
DEAD_KEPT = 10_000


class MemoryConsumer(Consumer):
    """One consumer of a group over streams kept in memory."""

    def __init__(
        self,
        streams: MemoryStreams,
        names: Sequence[str],
        group: str,
        name: str,
        *,
        count: int,
        block_ms: int,
        dead_letters: str,
        max_deliveries: int,
    ) -> None:
        self.memory = streams
        self.streams = list(names)
        self.group = group
        self.name = name
        self.count = count
        self.block_ms = block_ms
        self.dead_letters = dead_letters
        self.max_deliveries = max_deliveries
        self.held = set()

    async def start(self) -> None:
        """Create the group on every stream at the start."""
        for stream in self.streams:
            self.memory.create_group(stream, self.group)

    async def read(self, pending: bool = False) -> list[Entry]:
        """The next batch of new entries (waiting up to ``block_ms`` for one), or this
        consumer's own pending entries with ``pending``."""
        memory = self.memory
        if pending:
            return [
                Entry(
                    stream,
                    entry_id,
                    _data(memory.fields(stream, entry_id)),
                    p.deliveries,
                    memory.arrived(stream, entry_id),
                )
                for stream in self.streams
                for entry_id, p in memory.pending(stream, self.group).items()
                if p.consumer == self.name
            ]
        found = memory.deliver(self.group, self.name, self.streams, self.count)
        if not found:
            await memory.wait(self.block_ms / 1000)
            found = memory.deliver(self.group, self.name, self.streams, self.count)
        return [
            Entry(stream, entry_id, fields.get(DATA), 1, memory.arrived(stream, entry_id))
            for stream, entry_id, fields in found
        ]

    async def ack(self, entries: Sequence[Entry]) -> None:
        """Acknowledge processed entries."""
        for entry in entries:
            self.memory.ack(entry.stream, self.group, entry.id)

    async def claim(self, min_idle_ms: int) -> list[Entry]:
        """Take over entries pending for ``min_idle_ms``, but those this consumer holds;
        dead-letter those delivered too often."""
        claimed: list[Entry] = []
        for stream in self.streams:
            held = {entry_id for s, entry_id in self.held if s == stream}
            for entry_id, p in self.memory.claim(
                stream, self.group, self.name, min_idle_ms / 1000, self.count, skip=held
            ):
                fields = self.memory.fields(stream, entry_id)
                if fields is None:
                    self.memory.ack(stream, self.group, entry_id)
                    continue
                entry = Entry(
                    stream,
                    entry_id,
                    fields.get(DATA),
                    p.deliveries,
                    self.memory.arrived(stream, entry_id),
                )
                if entry.deliveries > self.max_deliveries:
                    await self.dead_letter(entry, f"delivered {entry.deliveries} times")
                else:
                    claimed.append(entry)
        return claimed

    async def answer(self, messages: Sequence[Message], done: Sequence[Entry]) -> None:
        """Add ``messages`` and acknowledge ``done``."""
        for message in messages:
            self.memory.add(message.stream, {DATA: message.payload})
        for entry in done:
            self.memory.ack(entry.stream, self.group, entry.id)

    async def dead_letter(self, entry: Entry, reason: str) -> None:
        """Park an entry on the dead-letter stream, acknowledge it, and log why."""
        self.memory.add(
            self.dead_letters,
            {
                b"stream": entry.stream.encode(),
                b"id": entry.id,
                b"group": self.group.encode(),
                b"reason": reason.encode(),
                DATA: entry.data or b"",
            },
            maxlen=DEAD_KEPT,
        )
        self.memory.ack(entry.stream, self.group, entry.id)
        log.warning(
            "message dead-lettered",
            stream=entry.stream,
            id=entry.id.decode(),
            group=self.group,
            reason=reason,
        )


def _data(fields: dict[bytes, bytes] | None) -> bytes | None:
    return None if fields is None else fields.get(DATA)


class MemoryLeaseTable(LeaseTable):
    """Leases and heartbeats in dicts, timed by ``clock`` (seconds)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.holders: dict[int, tuple[str, float]] = {}
        self.alive: dict[str, float] = {}

    def _now_ms(self) -> float:
        return self.clock() * 1000

    async def heartbeat(self, name: str, ttl_ms: int) -> list[str]:
        """Record that ``name`` is alive; return every holder alive within ``ttl_ms``."""
        now = self._now_ms()
        self.alive[name] = now
        for other, seen in list(self.alive.items()):
            if seen <= now - ttl_ms:
                del self.alive[other]
        return sorted(self.alive)

    def holder(self, partition: int) -> str | None:
        """Who holds ``partition`` now (None if nobody or the lease ran out)."""
        held = self.holders.get(partition)
        if held is None or held[1] <= self._now_ms():
            return None
        return held[0]

    async def renew(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Extend ``name``'s lease on ``partition``; False if it no longer holds it."""
        if self.holder(partition) != name:
            return False
        self.holders[partition] = (name, self._now_ms() + ttl_ms)
        return True

    async def take(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Take ``partition`` if nobody holds it."""
        if self.holder(partition) is not None:
            return False
        self.holders[partition] = (name, self._now_ms() + ttl_ms)
        return True

    async def release(self, partition: int, name: str) -> None:
        """Give ``partition`` back if ``name`` holds it."""
        if self.holder(partition) == name:
            del self.holders[partition]

    async def leave(self, name: str) -> None:
        """Remove ``name``'s heartbeat."""
        self.alive.pop(name, None)


class MemoryTransport(Transport):
    """The transport over a memory store's streams; share one between services in a test."""

    def __init__(self, store: MemoryEventStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.keys = store.keys
        self.memory = store.streams
        self._leases = MemoryLeaseTable(clock)

    def consumer(
        self,
        group: str,
        name: str,
        streams: Sequence[str],
        *,
        count: int,
        max_deliveries: int,
        block_ms: int = 20,
    ) -> MemoryConsumer:
        """A consumer ``name`` of ``group`` over ``streams``."""
        return MemoryConsumer(
            self.memory,
            streams,
            group,
            name,
            count=count,
            block_ms=block_ms,
            dead_letters=self.keys.dead_letters,
            max_deliveries=max_deliveries,
        )

    async def publish(self, messages: Sequence[Message]) -> None:
        """Add ``messages``."""
        for message in messages:
            self.memory.add(message.stream, {DATA: message.payload})

    async def reply(self, stream: str, payload: bytes) -> None:
        """Add a reply, keeping the stream's latest entries."""
        self.memory.add(stream, {DATA: payload}, maxlen=REPLIES_KEPT)

    async def due(self, keys: Sequence[str], now_ms: int, count: int) -> list[list[str]]:
        """For each schedule, the members due by ``now_ms``, soonest first."""
        out: list[list[str]] = []
        for key in keys:
            times = self.memory.schedules.get(key, {})
            ready = sorted((at, member) for member, at in times.items() if at <= now_ms)
            out.append([member for _, member in ready[:count]])
        return out

    def _now_ms(self) -> int:
        return int(self.store.clock() * 1000)

    async def deadlines_due(
        self, partitions: Sequence[int], group: str, count: int, stall_ms: int
    ) -> list[DueDeadlines]:
        """Each partition's deadlines checked on the store's clock: stalls made up for, then
        what is due once the commands that arrived before it are processed."""
        out: list[DueDeadlines] = []
        for p in partitions:
            now = self._now_ms()
            shifted = self.memory.make_up_for_stall(
                self.keys.deadlines(p), self.keys.clock(p), now, stall_ms
            )
            oldest = self.memory.oldest_unprocessed(self.keys.commands(p), group)
            limit = now if oldest is None else min(now, oldest)
            times = self.memory.schedules.get(self.keys.deadlines(p), {})
            ready = sorted((at, member) for member, at in times.items() if at <= limit)
            held = sum(1 for at in times.values() if limit < at <= now)
            out.append(DueDeadlines([m for _, m in ready[:count]], now, shifted, held))
        return out

    async def reschedule(self, key: str, member: str, at_ms: int | None) -> None:
        """Set a member's time in a schedule, or remove it."""
        self.memory.schedule(key, member, at_ms)

    async def trim(self, streams: Sequence[str]) -> int:
        """Drop the entries every group of each stream was delivered and acknowledged."""
        return sum(self.memory.trim(stream) for stream in streams)

    def leases(self) -> MemoryLeaseTable:
        """The lease table shared by every referee on this transport."""
        return self._leases
