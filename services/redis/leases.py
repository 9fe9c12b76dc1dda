"""Partition leases: which referee writes which partitions, so one writer serves each match.

Every referee keeps a heartbeat in ``<prefix>:referees`` and holds an expiring lease
``<prefix>:{pN}:owner`` on an even share of the partitions. A referee that dies stops renewing;
its leases expire after ``ttl_ms`` and the others take its partitions, claiming the commands it
left pending. The expected version of every append stays the safety net for the moment of
hand-over.
"""

from __future__ import annotations

import math
import time

from redis.asyncio import Redis

from services.redis.lua import LuaScript
from services.store.keys import Keys

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


class PartitionLeases:
    """The partitions this process holds, kept to its share of the live referees."""

    def __init__(self, redis: Redis, topo: Keys, name: str, ttl_ms: int) -> None:
        self.redis = redis
        self.topo = topo
        self.name = name
        self.ttl_ms = ttl_ms
        self.owned: set[int] = set()
        self.members = topo.referees

    def owner_key(self, partition: int) -> str:
        """The lease key of a partition (in the partition's slot)."""
        return self.topo.owner(partition)

    async def refresh(self) -> set[int]:
        """Heartbeat, renew what we hold, give back extras, take free partitions up to our
        share; return the partitions held now."""
        now = int(time.time() * 1000)
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(self.members, {self.name: now})
        pipe.zremrangebyscore(self.members, "-inf", now - self.ttl_ms)
        pipe.zrange(self.members, 0, -1)
        live = [m.decode() if isinstance(m, bytes) else m for m in (await pipe.execute())[2]]
        share = math.ceil(self.topo.partitions / max(1, len(live)))
        for p in sorted(self.owned):
            if not await RENEW(self.redis, [self.owner_key(p)], [self.name, self.ttl_ms]):
                self.owned.discard(p)
        for p in sorted(self.owned, reverse=True)[: max(0, len(self.owned) - share)]:
            await self.release(p)
        if len(self.owned) < share:
            rank = sorted(live).index(self.name) if self.name in live else 0
            order = [(rank * share + k) % self.topo.partitions for k in range(self.topo.partitions)]
            for p in order:
                if len(self.owned) >= share:
                    break
                if p not in self.owned and await self.redis.set(
                    self.owner_key(p), self.name, nx=True, px=self.ttl_ms
                ):
                    self.owned.add(p)
        return set(self.owned)

    async def release(self, partition: int) -> None:
        """Give a partition back at once."""
        await RELEASE(self.redis, [self.owner_key(partition)], [self.name])
        self.owned.discard(partition)

    async def release_all(self) -> None:
        """Give everything back and leave the heartbeat set (on a clean stop)."""
        for p in sorted(self.owned):
            await self.release(p)
        await self.redis.zrem(self.members, self.name)
