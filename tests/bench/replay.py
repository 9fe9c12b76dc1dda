"""Replay speed: events folded per second from an exported file and from Redis.

Part of the ``store`` group. Matches are played in process (random bots), written once as
JSON lines and imported into a private Redis; replay then decodes every envelope, checks its
version and folds it through the engine, as ``domino replay`` and ``domino verify`` do.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.rules import Rules
from engine.strategy import RandomStrategy
from events.codec import JSON
from events.envelope import Envelope
from services.cli import jsonl
from services.core.local_match import play_local_match
from services.redis.connection import node_client
from services.store import NewEvent, RedisEventStore
from tests.support.redis_env import redis_server

MATCHES = 40
ROUNDS = 3


def run() -> Iterator[dict[str, Any]]:
    """Yield the store.replay lines for a file and for Redis."""
    logs = [_match(k) for k in range(MATCHES)]
    events = sum(len(log) for log in logs)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"{k}.jsonl" for k in range(MATCHES)]
        for path, log in zip(paths, logs, strict=True):
            jsonl.write(path, log)
        best = min(_timed(lambda: [jsonl.read(p) for p in paths]) for _ in range(ROUNDS))
        yield {"bench": "store.replay", "source": "file", "events_per_s": round(events / best)}
    with redis_server(appendfsync="no", env_var=None) as url:
        seconds = asyncio.run(_from_redis(url, logs))
        yield {"bench": "store.replay", "source": "redis", "events_per_s": round(events / seconds)}


def _match(k: int) -> list[Envelope]:
    rules = Rules.make("express" if k % 2 else "straight", players=4 if k % 2 else 2)
    bots = [RandomStrategy(k * 10 + s) for s in range(rules.players)]
    return play_local_match(rules, bots, seed=k, match_id=f"replay-{k}")[1]


def _timed(work: Any) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


async def _from_redis(url: str, logs: list[list[Envelope]]) -> float:
    client = node_client(url)
    store = RedisEventStore(client, prefix="bench-replay")
    try:
        for log in logs:
            events = [NewEvent(e.event.__struct_config__.tag, JSON.encode(e)) for e in log]
            await store.append(log[0].match_id, events, 0, "import")
        best = float("inf")
        for _ in range(ROUNDS):
            start = time.perf_counter()
            for log in logs:
                records = await store.read(log[0].match_id)
                jsonl.parse([r.data for r in records], log[0].match_id)
            best = min(best, time.perf_counter() - start)
        return best
    finally:
        await client.aclose()
