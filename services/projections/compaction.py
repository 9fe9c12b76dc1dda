"""Compacted ratings: the results of archived matches folded into a table as of a checkpoint,
then out of Redis.

The ratings are a fold of every finished match's result in one fixed order, (the match_ended
time, the match id) (services/projections/ratings.py). Kept whole, the results grow for ever.
The compactor folds a prefix of that order into a :class:`Compacted` table — the ratings as
of its checkpoint ``through`` — and the ratings read is that table with the results after the
checkpoint rated on top: what rating every result from the start gives.

**Which results may be folded.** Only those no partition can still add a result before: a
partition's ratings projection may lag (its projector killed, its lease not yet run out), and
a result it adds later must not fall behind the checkpoint. A partition has passed the time
of its ratings position (a log entry id: the Redis server's clock), or, with its log read to
the end, the server's time now (any later entry gets a later id); the horizon is the earliest
of these, less ``margin_s`` for the time between the referee stamping a match's end (its own
clock) and the end reaching the log. A result is folded only when it ended before the horizon
and its match is archived (its log no longer in Redis), and every result before it in the
order is too: the checkpoint moves only over a prefix of the order.

**One compactor at a time**: the archiver holding partition 0's lease runs it
(:meth:`Compactor.run`). A compactor whose lease ran out unnoticed writes nothing: the table
is written by one script only if its version is still the one read (a compare and set).

**A crash loses and doubles nothing.** A round goes in steps, each safe to repeat:

1. write the new table (checkpoint ``through``, its ``version`` one more) in one script: from
   then on the reads pass over the results up to ``through``, still in Redis or not;
2. write each player's page of the results folded (``indexed``, ``through``] to the archive
   (services/store/archive.py), then the table again with ``indexed`` = ``through``: the pages
   are made from the results, still in Redis, and the rating points the table keeps for them
   until then, so a page written twice is written with the same bytes;
3. delete from Redis the results up to ``indexed``, and their places in the players' indexes.

A round that finds ``indexed`` behind ``through`` (a crash between 1 and 2) does 2 and 3 first.
``domino projections rebuild`` refolds every result into the projection again; the reads pass
over those up to the checkpoint, and the next round deletes them again: the same table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import msgspec
import structlog

from services.projections.history import PlayedPage
from services.projections.ratings import (
    Checkpoint,
    Compacted,
    MatchResult,
    RatingPoint,
    RatingsProjector,
    order_of,
    read_compacted,
    read_results,
    standings,
)
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.archive import Archive, page_name

log = structlog.get_logger()

BATCH = 5000
"""At most this many results are folded by one write of the table."""


class Pending(msgspec.Struct, frozen=True, kw_only=True):
    """The rating points of the results folded last (up to ``through``), kept with the table
    until each player's page of them is in the archive."""

    through: Checkpoint | None = None
    points: dict[str, tuple[RatingPoint, ...]] = {}


_PENDING = msgspec.json.Decoder(Pending)
_ENCODE = msgspec.json.Encoder()

_WRITE = LuaScript(
    """
-- KEYS: the compacted table's hash
-- ARGV: the version read, the new version, the table, its indexed checkpoint, the rating
--   points pending
-- Returns 1 when written; 0 (nothing written) when another compactor wrote meanwhile.
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'table', ARGV[3], 'indexed', ARGV[4],
  'pending', ARGV[5])
return 1
"""
)

_PASSED = LuaScript(
    """
-- KEYS: a partition's notification log, its ratings projection's checkpoint
-- Returns the server's time (ms), the log's latest entry id ('0': none), the position read to.
local now = redis.call('TIME')
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local position = redis.call('GET', KEYS[2]) or '0'
local id = '0'
if #last > 0 then
  id = last[1][1]
end
return {tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), id, position}
"""
)


class CompactionConflict(Exception):
    """Raised when the table was written by another compactor since it was read: nothing was
    written by this one."""


class Compactor:
    """Folds the results no partition can still add before into the compacted table, writes
    the players' pages to the archive, and drops the results from Redis; see the module."""

    def __init__(
        self,
        redis: Client,
        ratings: RatingsProjector,
        archive: Archive,
        *,
        margin_s: float = 60.0,
        every_s: float = 60.0,
    ) -> None:
        self.redis = redis
        self.ratings = ratings
        self.archive = archive
        self.keys = ratings.store.keys
        self.margin_s = margin_s
        self.every_s = every_s
        self.compacted = 0  # results folded by this process
        self._last: float | None = None

    async def run(self) -> int:
        """A round, unless one ran within ``every_s``: return how many results it folded."""
        now = time.monotonic()
        if self._last is not None and now - self._last < self.every_s:
            return 0
        self._last = now
        try:
            return await self.round()
        except CompactionConflict as e:
            log.warning("ratings compacted by another compactor; trying again", detail=str(e))
            return 0

    async def round(self) -> int:
        """Finish what a round before left, then fold and drop what may be; return how many
        results were folded."""
        table = await read_compacted(self.redis, self.ratings)
        results = await read_results(self.redis, self.ratings)
        table = await self._index(table, results)
        await self._drop(table, results)
        horizon = await self.horizon()
        fresh = sorted((r for r in results if not table.folded(r)), key=order_of)
        due = await self._due(fresh, horizon)
        if not due:
            return 0
        folded = await asyncio.to_thread(standings, due, None, table)
        pending = Pending(
            through=order_of(due[-1]), points={k: tuple(v) for k, v in folded.history.items()}
        )
        table = await self._write(
            table,
            Compacted(
                version=table.version + 1,
                through=order_of(due[-1]),
                indexed=table.indexed,
                table=tuple(folded.table),
            ),
            pending,
        )
        log.info("ratings compacted", results=len(due), through=table.through)
        table = await self._index(table, results)
        await self._drop(table, results)
        self.compacted += len(due)
        return len(due)

    async def horizon(self) -> float:
        """The time (s) every partition has passed, less the margin: no partition can still
        add a result that ended before it."""
        passed: list[float] = []
        for p in range(self.keys.partitions):
            raw = await _PASSED(
                self.redis,
                [self.keys.log(p), self.keys.projection(self.ratings.name, p)],
                [],
            )
            now_ms, last, position = (_text(v) for v in raw)
            if log_order(position) >= log_order(last):
                passed.append(int(now_ms) / 1000)
            else:
                passed.append(log_order(position)[0] / 1000)
        return min(passed) - self.margin_s

    async def _due(self, fresh: Sequence[MatchResult], horizon: float) -> list[MatchResult]:
        """The longest prefix of ``fresh`` (in the rating order) that ended before the horizon
        and whose matches are archived, at most BATCH."""
        below = [r for r in fresh[:BATCH] if r.ended < horizon]
        if not below:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for r in below:
            pipe.exists(self.keys.match(r.match_id))
        live = await pipe.execute()
        due: list[MatchResult] = []
        for result, in_redis in zip(below, live, strict=True):
            if int(in_redis):
                break  # not archived yet: the checkpoint waits for it
            due.append(result)
        return due

    async def _write(self, read: Compacted, table: Compacted, pending: Pending) -> Compacted:
        done = await _WRITE(
            self.redis,
            [self.ratings.compacted_key()],
            [
                read.version,
                table.version,
                _ENCODE.encode(table),
                _ENCODE.encode(table.indexed),
                _ENCODE.encode(pending),
            ],
        )
        if not int(done):
            raise CompactionConflict(f"the compacted table is past version {read.version}")
        return table

    async def _index(self, table: Compacted, results: Sequence[MatchResult]) -> Compacted:
        """Write each player's page of the results in (``indexed``, ``through``] to the
        archive, then the table with ``indexed`` at ``through``."""
        if table.through is None or table.indexed == table.through:
            return table
        raw = await self.redis.hget(self.ratings.compacted_key(), "pending")
        pending = Pending() if raw is None else _PENDING.decode(raw)
        if pending.through != table.through:  # another compactor has moved on meanwhile
            raise CompactionConflict(f"the compacted table is past {table.through}")
        span = sorted(
            (r for r in results if _within(r, table.indexed, table.through)), key=order_of
        )
        by_player: dict[str, list[MatchResult]] = {}
        for result in span:
            for key in dict.fromkeys(result.keys()):
                by_player.setdefault(key, []).append(result)
        name = page_name(*table.through)
        for identity, played in by_player.items():
            page = PlayedPage(
                through=table.through,
                results=tuple(played),
                points=pending.points.get(identity, ()),
            )
            await self.archive.put_page(identity, name, _ENCODE.encode(page))
        indexed = msgspec.structs.replace(table, version=table.version + 1, indexed=table.through)
        return await self._write(table, indexed, Pending())

    async def _drop(self, table: Compacted, results: Sequence[MatchResult]) -> int:
        """Delete from Redis the results up to ``indexed`` and their places in the players'
        indexes; return how many."""
        gone = [r for r in results if _within(r, None, table.indexed)]
        if not gone:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for result in gone:
            p = self.keys.partition_of(result.match_id)
            pipe.hdel(self.ratings.results_key(p), result.match_id)
            for key in dict.fromkeys(result.keys()):
                pipe.zrem(self.ratings.played_key(p, key), result.match_id)
        await pipe.execute()
        return len(gone)


def _within(result: MatchResult, low: Checkpoint | None, high: Checkpoint | None) -> bool:
    """Whether ``result`` comes after ``low`` (None: the start) and up to ``high`` (None:
    nothing does)."""
    point = order_of(result)
    return high is not None and point <= high and (low is None or point > low)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def log_order(position: str) -> tuple[int, int]:
    """The order of a notification log's position (``"0"``, or an entry id ``ms-seq``)."""
    ms, _, seq = position.partition("-")
    return int(ms), int(seq or 0)
