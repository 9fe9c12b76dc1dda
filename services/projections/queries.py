"""Read the projections: match summaries by status, and results by player name."""

from __future__ import annotations

from typing import cast

import msgspec

from services.config import Settings
from services.projections.projector import Summary
from services.redis.connection import Client
from services.store.projection import RedisCheckpoints

_SUMMARY = msgspec.json.Decoder(Summary)


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
                out.extend(_SUMMARY.decode(r) for r in rows if r is not None)
        out.sort(key=lambda s: s.updated)
        return out if limit is None else out[-limit:]

    async def summary_of(self, match_id: str) -> Summary | None:
        """One match's summary, wherever it is."""
        for p in range(self.partitions):
            raw = await self.redis.hget(self.checkpoints.key(self.summary, p, "matches"), match_id)
            if raw is not None:
                return _SUMMARY.decode(raw)
        return None

    async def results(self) -> dict[str, dict[str, int]]:
        """Played, won, points for and against by player name, over all finished matches."""
        table: dict[str, dict[str, int]] = {}
        for p in range(self.partitions):
            raw = cast(
                dict[bytes, bytes],
                await self.redis.hgetall(self.checkpoints.key(self.results_name, p, "table")),
            )
            for field, value in raw.items():
                name, _, stat = field.decode().rpartition("|")
                row = table.setdefault(name, {})
                row[stat] = row.get(stat, 0) + int(value)
        return table
