"""Read the projections: match summaries by status, and results by account, house bot pool or
guest."""

from __future__ import annotations

from typing import cast

import msgspec
import structlog

from services.config import Settings
from services.projections.identity import Kind, kind_of, shown_name
from services.projections.projector import RESULT_STATS, Named, Summary
from services.redis.connection import Client
from services.redis.paging import Cursor, page
from services.store.projection import RedisCheckpoints

_SUMMARY = msgspec.json.Decoder(Summary)
_NAMED = msgspec.json.Decoder(Named)
log = structlog.get_logger()


class ResultLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the results: an account, a house pool or a guest, and its record."""

    key: str  # an account id, house:<pool> or guest:<name>
    name: str  # shown as: the account's latest name, the pool's, the guest's
    kind: Kind
    played: int = 0  # matches played to their end
    won: int = 0
    points_for: int = 0
    points_against: int = 0
    aborted: int = 0  # matches called off, not counted as played
    cancelled: int = 0


class Queries:
    """What the lobby and the results table read, across every partition."""

    def __init__(
        self, redis: Client, settings: Settings, summary: str = "summary", results: str = "results"
    ) -> None:
        self.redis = redis
        self.partitions = settings.partitions
        self.checkpoints = RedisCheckpoints(
            redis, partitions=settings.partitions, prefix=settings.prefix
        )
        self.summary = summary
        self.results_name = results

    async def matches(self, finished: bool = False, limit: int | None = None) -> list[Summary]:
        """Summaries of the live (or finished) matches, oldest first; with ``limit``, only the
        ``limit`` most recently updated, read as at most ``limit`` from each partition (a
        request never reads every finished match there ever was)."""
        out: list[Summary] = []
        status = "finished" if finished else "live"
        last = -1 if limit is None else limit - 1
        for p in range(self.partitions):
            key = self.checkpoints.key
            # a bytes client: members and fields come back as bytes, as redis-py cannot know
            ids = cast(
                list[bytes], await self.redis.zrevrange(key(self.summary, p, status), 0, last)
            )
            if ids:
                rows = await self.redis.hmget(key(self.summary, p, "matches"), ids)
                out.extend(s for s in map(_summary, rows) if s is not None)
        out.sort(key=lambda s: s.updated)
        return out if limit is None else out[-limit:]

    async def page(
        self, finished: bool, limit: int, before: Cursor | None = None
    ) -> tuple[list[Summary], Cursor | None]:
        """A page of the live (or finished) matches' summaries: the ``limit`` most recently
        updated before ``before`` (from the latest, without it), oldest first, and the cursor
        of the page of older ones (None: none older). Reads at most ``limit`` ids from each
        partition and the summaries of the page only."""
        status = "finished" if finished else "live"
        key = self.checkpoints.key
        index = [key(self.summary, p, status) for p in range(self.partitions)]
        window, after = await page(self.redis, index, limit, before, newest_first=True)
        by_partition: dict[int, list[str]] = {}
        for match_id, _, p in window:
            by_partition.setdefault(p, []).append(match_id)
        out: list[Summary] = []
        for p, ids in by_partition.items():
            rows = await self.redis.hmget(key(self.summary, p, "matches"), ids)
            out.extend(s for s in map(_summary, rows) if s is not None)
        out.sort(key=lambda s: (s.updated, s.match_id))
        return out, after

    async def summary_of(self, match_id: str) -> Summary | None:
        """One match's summary, wherever it is."""
        for p in range(self.partitions):
            raw = await self.redis.hget(self.checkpoints.key(self.summary, p, "matches"), match_id)
            if raw is not None:
                return _summary(raw)
        return None

    async def results(self) -> list[ResultLine]:
        """Every key's record over all finished matches, most wins first."""
        table: dict[str, dict[str, int]] = {}
        latest: dict[str, Named] = {}  # account id → the name it last played as
        for p in range(self.partitions):
            key = self.checkpoints.key
            # a bytes client: fields and values come back as bytes
            raw = cast(
                dict[bytes, bytes], await self.redis.hgetall(key(self.results_name, p, "table"))
            )
            for field, value in raw.items():
                who, _, stat = field.decode().rpartition("|")
                if stat in RESULT_STATS:
                    row = table.setdefault(who, {})
                    row[stat] = row.get(stat, 0) + int(value)
            names = cast(
                dict[bytes, bytes], await self.redis.hgetall(key(self.results_name, p, "names"))
            )
            for account, value in names.items():
                seen = _NAMED.decode(value)
                known = latest.get(account.decode())
                if known is None or seen.ts >= known.ts:
                    latest[account.decode()] = seen
        lines = [
            ResultLine(
                key=who,
                name=shown_name(who, latest[who].name if who in latest else who),
                kind=kind_of(who),
                **stats,
            )
            for who, stats in table.items()
        ]
        return sorted(lines, key=lambda line: (-line.won, line.name, line.key))

    async def result(self, who: str) -> ResultLine | None:
        """One key's line of :meth:`results`, read from its own fields only; None when the
        key has no record."""
        fields = [f"{who}|{stat}" for stat in RESULT_STATS]
        stats = dict.fromkeys(RESULT_STATS, 0)
        found = False
        latest: Named | None = None
        for p in range(self.partitions):
            key = self.checkpoints.key
            values = await self.redis.hmget(key(self.results_name, p, "table"), fields)
            for stat, value in zip(RESULT_STATS, values, strict=True):
                if value is not None:
                    found = True
                    stats[stat] += int(value)
            raw = await self.redis.hget(key(self.results_name, p, "names"), who)
            if raw is not None:
                seen = _NAMED.decode(raw)
                if latest is None or seen.ts >= latest.ts:
                    latest = seen
        if not found:
            return None
        name = shown_name(who, latest.name if latest is not None else who)
        return ResultLine(key=who, name=name, kind=kind_of(who), **stats)


def _summary(raw: bytes | str | None) -> Summary | None:
    """A stored summary, or None for one that cannot be read (said in the log): a list goes on
    with the others, a match without a readable summary is one without a summary."""
    if raw is None:
        return None
    try:
        return _SUMMARY.decode(raw)
    except msgspec.DecodeError as e:
        log.error("unreadable match summary passed over", error=str(e)[:300], raw=raw[:100])
        return None
