"""Consumer groups on Redis streams: create at 0, read in batches, ack, reclaim, dead-letter.

The services' hot loops read with XREADGROUP directly instead of through FastStream
subscribers. Measured on this machine (see docs/architecture.md): a FastStream batch
subscriber decodes each entry, re-encodes the batch and decodes it again, and pays about 1 ms
per batch against 0.45 ms raw, and it reads one stream per call where one XREADGROUP can read
every partition's stream at once. FastStream still runs each service: its broker, lifecycle
and publishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError

DATA = b"__data__"
log = structlog.get_logger()


@dataclass(slots=True)
class Entry:
    """One stream entry read through a group: where it came from, its id and its payload."""

    stream: str
    id: bytes
    data: bytes | None  # None when the entry has no ``__data__`` field
    deliveries: int = 1


async def ensure_groups(redis: Redis, streams: Sequence[str], group: str) -> None:
    """Create ``group`` on each stream at id 0 (so no earlier entry is missed), once."""
    for stream in streams:
        try:
            await redis.xgroup_create(stream, group, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise


class GroupReader:
    """Reads, acks and reclaims entries of several streams for one consumer of a group."""

    def __init__(
        self,
        redis: Redis,
        streams: Sequence[str],
        group: str,
        consumer: str,
        *,
        count: int = 500,
        block_ms: int = 20,
        dead_letters: str = "dom:dead",
        max_deliveries: int = 5,
    ) -> None:
        self.redis = redis
        self.streams = list(streams)
        self.group = group
        self.consumer = consumer
        self.count = count
        self.block_ms = block_ms
        self.dead_letters = dead_letters
        self.max_deliveries = max_deliveries
        self._claim_cursor = {s: "0-0" for s in self.streams}

    async def start(self) -> None:
        """Create the group on every stream (at 0) before the first read."""
        await ensure_groups(self.redis, self.streams, self.group)

    async def read(self, pending: bool = False) -> list[Entry]:
        """The next batch of new entries across all streams (this consumer's own pending
        entries instead, with ``pending``, as after a restart)."""
        if not self.streams:  # nothing to read from (yet): wait as a blocking read would
            await asyncio.sleep(self.block_ms / 1000)
            return []
        start = "0" if pending else ">"
        reply = await self.redis.xreadgroup(
            self.group,
            self.consumer,
            dict.fromkeys(self.streams, start),
            count=self.count,
            block=None if pending else self.block_ms,
        )
        return _entries(reply)

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
                self.consumer,
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
        return {r["message_id"]: int(r["times_delivered"]) for r in rows}

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


def _entries(reply: Any) -> list[Entry]:
    out: list[Entry] = []
    if not reply:
        return out
    for stream, messages in reply:
        name = stream.decode() if isinstance(stream, bytes) else stream
        for msg_id, fields in messages:
            out.append(Entry(name, msg_id, fields.get(DATA) if fields else None))
    return out


class GroupWorker:
    """The loops of one consumer: new entries in batches — the next read overlapping the work
    on the current one — entries claimed from consumers that died, and any periodic tasks the
    subclass adds; all until ``stop()``. Subclasses implement ``handle``."""

    reader: GroupReader
    claim_idle_ms: int
    what: str = "entries"  # for log lines

    def __init__(self) -> None:
        self._stopping = asyncio.Event()

    async def handle(self, entries: list[Entry]) -> None:
        """Process a batch; acknowledge what is done."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ask ``serve`` to return after the batch in hand."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopping.is_set()

    async def serve(self, *periodic: Callable[[], Awaitable[None]]) -> None:
        """Run the read and reclaim loops and ``periodic`` tasks until ``stop()``."""
        await self.handle(await self.reader.read(pending=True))  # our own, after a crash
        loops = [self._read_loop(), self._reclaim_loop(), *(task() for task in periodic)]
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            await self._stopping.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_loop(self) -> None:
        reading = asyncio.create_task(self.reader.read())
        try:
            while not self.stopping:
                try:
                    entries = await reading
                    reading = asyncio.create_task(self.reader.read())
                    if entries:
                        await self.handle(entries)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception(f"a batch of {self.what} failed; it stays pending")
                    await asyncio.sleep(0.5)
                    if reading.done():
                        reading = asyncio.create_task(self.reader.read())
        finally:
            reading.cancel()

    async def _reclaim_loop(self) -> None:
        idle = self.claim_idle_ms
        while not self.stopping:
            await asyncio.sleep(idle / 2000)
            try:
                entries = await self.reader.claim(idle)
                if entries:
                    log.info(f"claimed pending {self.what}", count=len(entries))
                    await self.handle(entries)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(f"reclaiming {self.what} failed")
