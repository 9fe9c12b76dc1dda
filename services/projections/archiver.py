"""Finished matches leave Redis: their command ids after a few minutes, their logs after the
retention period (into the archive), and the notification log is trimmed behind the
projections.

The projector runs an :class:`Archiver` beside the projections, for the partitions it holds a
lease on (``<prefix>:{pN}:lease:archiver``: several projector processes share the partitions
and never work on the same one). What it does to a partition, every ``DOMINO_TRIM_EVERY_S``:

1. **Command ids.** A finished match's dedupe hash goes ``DOMINO_DEDUPE_KEEP_S`` after the
   match ended: until then a late retry of one of its moves is still answered "replayed".
2. **Archive.** A match that ended ``DOMINO_ARCHIVE_AFTER_S`` ago is written to the archive
   (its log, compressed, checked by reading it back), then one script deletes from Redis its
   log, its dedupe hash, its lobby record, its summary and its place in the lists — all keys of
   its partition's slot — unless the log has changed since it was read. Its seat tokens (each
   in the slot of its own hash) are deleted just before. Every step can be repeated: a crash
   anywhere leaves the match in Redis, in the archive, or in both, and the next round finishes
   the move. Its result stays until the compactor folds it (step 3).
3. **Compacted ratings.** The archiver holding partition 0 runs the compactor
   (services/projections/compaction.py) every ``DOMINO_COMPACT_EVERY_S``: the results of
   archived matches are folded into the compacted ratings table and leave Redis, each
   player's page of them going to the archive.
4. **Notification log.** Trimmed (``XTRIM MINID``, exact) below the oldest position any
   projection of the partition has committed, and never within the last ``DOMINO_LOG_KEEP_S``
   (the gateway follows the log's tail, and reads any gap back from the match streams).

Which matches are due comes from a projection of its own, ``archive``: the projector adds a
match to ``…:proj:archive:due`` (scored by its end's time) when it applies the match's end, and
as the last projection of each batch — so a match is due only once every projection has read
its end: none of them needs its log any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import msgspec
import structlog

from events.model import MatchEnded
from services.core.leases import PartitionLeases
from services.metrics import fresh
from services.projections.compaction import Compactor, log_order
from services.projections.projector import QUEUE as PROJECTOR_QUEUE
from services.projections.records import envelope_of
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.archive import Archive, ArchiveError, encode_log
from services.store.base import START, EventStore, Recorded
from services.store.projection import Checkpoints, WriteOp, op
from services.transport.redis import RedisLeaseTable

log = structlog.get_logger()

QUEUE = PROJECTOR_QUEUE
"""The projection that lists finished matches by when they ended."""
BATCH = 200
"""At most this many matches of a partition are archived per round."""

_ARCHIVED = LuaScript(
    """
-- KEYS: the match log, its dedupe hash, its lobby record, its limit holds; then the summary
--   projection's matches hash, its finished and live lists, the archive queue, the lobby's
--   list, the deadlines and the watch list of the partition
-- ARGV: match id, the version archived
-- Returns 1 once the match is out of Redis; 0 (nothing deleted) when its log has another
-- length than the one archived.
local length = redis.call('XLEN', KEYS[1])
if length ~= 0 and length ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('HDEL', KEYS[5], ARGV[1])
for k = 6, #KEYS do
  redis.call('ZREM', KEYS[k], ARGV[1])
end
return 1
"""
)


class ArchiveQueue:
    """The ``archive`` projection: each finished match with the time it ended, until the
    archiver moves it out of Redis. Fed by the projector, last of every batch."""

    name = QUEUE

    def __init__(self, checkpoints: Checkpoints) -> None:
        self.checkpoints = checkpoints

    def forget(self) -> None:
        """Nothing is remembered between batches."""

    def due_key(self, partition: int) -> str:
        """The sorted set of a partition's finished matches, by when they ended (s)."""
        return self.checkpoints.key(self.name, partition, "due")

    async def handle(
        self, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        """A match's end puts it on the queue."""
        ops: list[WriteOp] = []
        for _, record in entries:
            if record.type == "match_ended":
                envelope, _ = envelope_of(record, MatchEnded)
                ops.append(op("ZADD", self.due_key(partition), envelope.ts, record.match_id))
        return ops


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each part of a finished match stays in Redis (seconds; 0 archive: never)."""

    archive_after_s: float = 3600.0
    dedupe_keep_s: float = 300.0
    log_keep_s: float = 60.0


class Archiver:
    """Moves the finished matches of the partitions it holds out of Redis; see the module."""

    def __init__(
        self,
        redis: Client,
        store: EventStore,
        checkpoints: Checkpoints,
        archive: Archive,
        projections: Sequence[str],
        name: str,
        *,
        retention: Retention = Retention(),
        lease_ms: int = 10_000,
        summary: str = "summary",
        compactor: Compactor | None = None,
    ) -> None:
        self.redis = redis
        self.compactor = compactor  # run by the holder of partition 0
        self.store = store
        self.keys = store.keys
        self.checkpoints = checkpoints
        self.archive = archive
        self.projections = list(projections)
        self.retention = retention
        self.summary = summary
        self.queue = ArchiveQueue(checkpoints)
        self.leases = PartitionLeases(
            RedisLeaseTable(redis, self.keys, role="archiver"), self.keys.partitions, name, lease_ms
        )
        self.owned: list[int] = []
        self.archived = 0
        self.trimmed = 0
        self.rounds_at: float | None = None
        self._dedupe_done: dict[int, float] = {}  # partition -> end time up to which dropped

    async def tick(self, now: float | None = None) -> int:
        """One round over the partitions held: leases, command ids, archive, log; return how
        many matches were archived."""
        now = time.time() if now is None else now
        self.owned = sorted(await self.leases.refresh())
        for p in self.leases.gained:
            self._dedupe_done.pop(p, None)  # read again from the start of the queue
        moved = 0
        for p in self.owned:
            await self.drop_command_ids(p, now)
            moved += await self.archive_due(p, now)
            self.trimmed += await self.trim_log(p, time.time())  # log ids: the clock's own
        if self.compactor is not None and 0 in self.owned:
            await self.compactor.run()
        self.rounds_at = time.monotonic()
        return moved

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        """A round every ``interval`` seconds until ``stop``; a failed round is logged."""
        try:
            while not stop.is_set():
                try:
                    await self.tick()
                except Exception:
                    log.exception("archiving round failed; trying again")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)
        finally:
            with contextlib.suppress(Exception):
                await self.leases.release_all()

    def readiness(self) -> str | None:
        """None while the rounds run (one ended within a minute)."""
        return fresh(self.rounds_at, 60.0, "an archiving round")

    async def _due(
        self, partition: int, until: float, start: float = 0.0
    ) -> list[tuple[str, float]]:
        """Up to ``BATCH * 10`` queued matches that ended between ``start`` and ``until``,
        the earliest first, with when they ended."""
        raw = await self.redis.zrangebyscore(
            self.queue.due_key(partition), start, until, start=0, num=BATCH * 10, withscores=True
        )
        return [
            (m.decode() if isinstance(m, bytes) else str(m), float(score))
            for m, score in cast(list[tuple[bytes, float]], raw)
        ]

    async def drop_command_ids(self, partition: int, now: float) -> int:
        """Delete the dedupe hashes of matches that ended at least ``dedupe_keep_s`` ago
        (each once per process: from where the last round got to)."""
        until = now - self.retention.dedupe_keep_s
        start = self._dedupe_done.get(partition, 0.0)
        if until <= start:
            return 0
        due = await self._due(partition, until, start)
        if due:
            pipe = self.redis.pipeline(transaction=False)
            for match_id, _ in due:
                pipe.delete(self.keys.dedupe(match_id))
            await pipe.execute()
        # a full page: go on next round from its last end (that one is deleted again: harmless)
        self._dedupe_done[partition] = until if len(due) < BATCH * 10 else due[-1][1]
        return len(due)

    async def archive_due(self, partition: int, now: float) -> int:
        """Move to the archive the matches that ended ``archive_after_s`` ago; return how
        many moved."""
        if not self.retention.archive_after_s:
            return 0
        due = (await self._due(partition, now - self.retention.archive_after_s))[:BATCH]
        moved = 0
        for match_id, _ in due:
            try:
                moved += await self.archive_one(partition, match_id)
            except (ArchiveError, OSError) as e:  # a copy that disagrees; a full or read-only
                # disk; a store that refuses: the match waits in Redis, the round goes on
                log.error("match not archived", match_id=match_id, error=str(e))
        self.archived += moved
        return moved

    async def archive_one(self, partition: int, match_id: str) -> int:
        """Write one finished match to the archive, check it, then delete it from Redis;
        return 1 when it moved (0 when it was not finished, or had changed meanwhile)."""
        records = await self.store.read(match_id)
        if records and records[-1].type != "match_ended":
            log.error("queued for the archive but not finished", match_id=match_id)
            return 0
        if records:
            lobby = await self._lobby(match_id)
            await self.archive.put(match_id, encode_log(records), lobby)
        elif not await self.archive.exists(match_id):
            log.error("queued for the archive but has no log anywhere", match_id=match_id)
        await self._drop_tokens(match_id)
        k = self.keys
        key = self.checkpoints.key
        done = await _ARCHIVED(
            self.redis,
            [
                k.match(match_id),
                k.dedupe(match_id),
                k.lobby_match(match_id),
                k.holds(match_id),
                key(self.summary, partition, "matches"),
                key(self.summary, partition, "finished"),
                key(self.summary, partition, "live"),
                self.queue.due_key(partition),
                k.lobby(partition),
                k.deadlines(partition),
                k.watch(partition),
            ],
            [match_id, len(records)],
        )
        if not int(done):
            log.error("match changed while it was archived: kept in Redis", match_id=match_id)
            return 0
        log.info("match archived", match_id=match_id, events=len(records))
        return 1

    async def _lobby(self, match_id: str) -> bytes | None:
        """The lobby record, kept in the archive beside the log: the gateway answers ``GET
        /matches/{id}`` with it, and opens a seat's stream to its token by the token's hash
        (``token:<seat>``, only ever a hash, as in Redis)."""
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.keys.lobby_match(match_id)))
        if not raw:
            return None
        return msgspec.json.encode({k.decode(): v.decode() for k, v in raw.items()})

    async def _drop_tokens(self, match_id: str) -> None:
        raw = cast(dict[bytes, bytes], await self.redis.hgetall(self.keys.lobby_match(match_id)))
        digests = [v.decode() for k, v in raw.items() if k.startswith(b"token:")]
        for digest in digests:  # each in its own slot: one call each
            await self.redis.delete(self.keys.seat_token(digest))

    async def trim_log(self, partition: int, now: float) -> int:
        """Trim the notification log below every projection's position and the last
        ``log_keep_s`` before ``now`` (the log's ids are Redis's clock in milliseconds: a
        few seconds' skew from this process's clock is within the margin); return how many
        entries went."""
        positions = [await self.checkpoints.position(n, partition) for n in self.projections]
        if not positions or START in positions:
            return 0
        oldest = min(log_order(p) for p in positions)
        floor = min(oldest, (int((now - self.retention.log_keep_s) * 1000), 0))
        if floor <= (0, 0):
            return 0
        removed: int = await self.redis.xtrim(
            self.keys.log(partition), minid=f"{floor[0]}-{floor[1]}", approximate=False
        )
        return removed
