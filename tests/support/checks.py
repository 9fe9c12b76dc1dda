"""What must hold of a stack's Redis once its matches are over, read from outside: nothing
pending in any consumer group, nothing dead-lettered, projections caught up with the logs, and
the projections' content (to compare with a rebuild)."""

from __future__ import annotations

from typing import Any

from services.config import Settings
from services.projections.app import every_projection
from services.store.keys import Keys
from tests.support.topology import client_for


async def pending(url: str, prefix: str) -> dict[str, int]:
    """Every consumer group with entries read but never acknowledged: ``stream group`` ->
    how many, over every stream under ``prefix``."""
    redis = client_for(url)
    try:
        out: dict[str, int] = {}
        async for key in redis.scan_iter(match=f"{prefix}:*", _type="stream", count=1000):
            for group in await redis.xinfo_groups(key):
                if group["pending"]:
                    out[f"{key.decode()} {group['name'].decode()}"] = int(group["pending"])
        return out
    finally:
        await redis.aclose()


async def dead_letters(url: str, prefix: str) -> list[dict[str, str]]:
    """The entries parked on ``<prefix>:dead``: where each came from and why."""
    redis = client_for(url)
    try:
        rows = await redis.xrange(f"{prefix}:dead")
        return [
            {
                "stream": fields.get(b"stream", b"").decode(errors="replace"),
                "group": fields.get(b"group", b"").decode(errors="replace"),
                "reason": fields.get(b"reason", b"").decode(errors="replace"),
            }
            for _, fields in rows
        ]
    finally:
        await redis.aclose()


async def projections_behind(url: str, prefix: str, partitions: int) -> list[str]:
    """The projections of the service's projector whose checkpoint is not at the last entry
    of their partition's notification log (none once the projector has caught up). A
    projection that never committed is behind as soon as its log has an entry."""
    redis = client_for(url)
    try:
        settings = Settings(redis_url=url, prefix=prefix, partitions=partitions)
        names = every_projection(redis, settings).names()
        keys = Keys(prefix, partitions)
        behind = []
        for p in range(partitions):
            last = await redis.xrevrange(keys.log(p), "+", "-", count=1)
            if not last:
                continue
            at = last[0][0].decode()
            for name in names:
                position = (await redis.get(keys.projection(name, p)) or b"").decode()
                if position != at:
                    behind.append(f"{name} of partition {p} at {position!r}, the log at {at}")
        return behind
    finally:
        await redis.aclose()


async def projection_snapshot(url: str, prefix: str) -> dict[bytes, Any]:
    """Every projection key under ``prefix`` with its content."""
    redis = client_for(url)
    try:
        out: dict[bytes, Any] = {}
        async for key in redis.scan_iter(match=f"{prefix}:*:proj:*"):
            kind = await redis.type(key)
            if kind == b"hash":
                out[key] = await redis.hgetall(key)
            elif kind == b"zset":
                out[key] = await redis.zrange(key, 0, -1, withscores=True)
            elif kind == b"set":
                out[key] = await redis.smembers(key)
            elif kind == b"list":
                out[key] = await redis.lrange(key, 0, -1)
            else:
                out[key] = await redis.get(key)
        return out
    finally:
        await redis.aclose()
