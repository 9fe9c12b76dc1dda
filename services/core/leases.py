"""Partition leases: which referee writes which partitions, so one writer serves each match.

Every referee keeps a heartbeat and holds an expiring lease on an even share of the
partitions. A referee that dies stops renewing; its leases expire after ``ttl_ms`` and the
others take its partitions, claiming the commands it left pending. The expected version of
every append stays the safety net for the moment of hand-over.
"""

from __future__ import annotations

import math

from services.transport.base import LeaseTable


class PartitionLeases:
    """The partitions this process holds, kept to its share of the live referees."""

    def __init__(self, table: LeaseTable, partitions: int, name: str, ttl_ms: int) -> None:
        self.table = table
        self.partitions = partitions
        self.name = name
        self.ttl_ms = ttl_ms
        self.owned: set[int] = set()
        self.gained: set[int] = set()
        """The partitions the last refresh took (they were not held just before it, even if
        this process held them earlier and lost them unnoticed)."""

    async def refresh(self) -> set[int]:
        """Heartbeat, renew what we hold, give back extras, take free partitions up to our
        share; return the partitions held now."""
        self.gained = set()
        live = await self.table.heartbeat(self.name, self.ttl_ms)
        share = math.ceil(self.partitions / max(1, len(live)))
        for p in sorted(self.owned):
            if not await self.table.renew(p, self.name, self.ttl_ms):
                self.owned.discard(p)
        for p in sorted(self.owned, reverse=True)[: max(0, len(self.owned) - share)]:
            await self.release(p)
        if len(self.owned) < share:
            rank = sorted(live).index(self.name) if self.name in live else 0
            order = [(rank * share + k) % self.partitions for k in range(self.partitions)]
            for p in order:
                if len(self.owned) >= share:
                    break
                if p not in self.owned and await self.table.take(p, self.name, self.ttl_ms):
                    self.owned.add(p)
                    self.gained.add(p)
        return set(self.owned)

    async def release(self, partition: int) -> None:
        """Give a partition back at once."""
        await self.table.release(partition, self.name)
        self.owned.discard(partition)

    async def release_all(self) -> None:
        """Give everything back and leave the heartbeats (on a clean stop)."""
        for p in sorted(self.owned):
            await self.release(p)
        await self.table.leave(self.name)
