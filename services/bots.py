"""House bot workers: consume turns of one pool and answer each with its strategy's move.

A worker sees only the turn message — its seat's view (C8) — never a match log. Workers of a
pool share one consumer group across every partition's turns stream, so turns are spread over
them; a killed worker's pending turns are claimed by another after ``claim_idle_ms``. The
command id is derived from the turn (match version and seat), so a turn answered twice is
applied once.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from redis.asyncio import Redis

from engine.strategy import Strategy
from events.codec import JSON, DecodeError
from events.envelope import CommandEnvelope
from services.config import Settings
from services.streams import DATA, Entry, GroupReader
from services.topology import Topology

log = structlog.get_logger()


def group_name(pool: str) -> str:
    """The consumer group of a pool's workers."""
    return f"bots-{pool}"


class BotWorker:
    """One worker process's loop for a pool of house bots."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        strategy: Strategy,
        pool: str,
        consumer: str,
    ) -> None:
        self.settings = settings
        self.redis = redis
        self.strategy = strategy
        self.pool = pool
        self.topo = Topology(settings.prefix, settings.partitions)
        self.reader = GroupReader(
            redis,
            self.topo.all_turns(pool),
            group_name(pool),
            consumer,
            count=settings.batch,
            dead_letters=self.topo.dead_letters,
            max_deliveries=settings.max_deliveries,
        )
        self.reply_to = self.topo.replies(group_name(pool))
        self.latencies: list[float] = []  # seconds from a command's arrival to its next turn
        self.moves = 0
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Answer turns until ``stop()``."""
        await self.reader.start()
        await self.handle(await self.reader.read(pending=True))
        tasks = [
            asyncio.create_task(self._turn_loop(), name="turns"),
            asyncio.create_task(self._reclaim_loop(), name="reclaim"),
        ]
        log.info("bot worker started", pool=self.pool, strategy=self.strategy.name)
        try:
            await self._stopping.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            log.info("bot worker stopped", pool=self.pool, moves=self.moves)

    def stop(self) -> None:
        """Ask ``run`` to return after the batch in hand."""
        self._stopping.set()

    async def _turn_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                entries = await self.reader.read()
                if entries:
                    await self.handle(entries)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("turn batch failed; its turns stay pending", pool=self.pool)
                await asyncio.sleep(0.5)

    async def _reclaim_loop(self) -> None:
        idle = self.settings.claim_idle_ms
        while not self._stopping.is_set():
            await asyncio.sleep(idle / 2000)
            try:
                entries = await self.reader.claim(idle)
                if entries:
                    log.info("claimed pending turns", pool=self.pool, count=len(entries))
                    await self.handle(entries)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reclaiming turns failed", pool=self.pool)

    async def handle(self, entries: list[Entry]) -> None:
        """Answer a batch of turns with one pipelined write, then acknowledge them."""
        if not entries:
            return
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        for entry in entries:
            try:
                turn = JSON.decode_turn(entry.data or b"")
            except DecodeError as e:
                await self.reader.dead_letter(entry, f"not a turn: {e}")
                continue
            self.latencies.append(now - turn.caused_at)
            command = self.strategy.choose(turn.view)
            envelope = CommandEnvelope(
                match_id=turn.match_id,
                command_id=f"turn:{turn.version}:{turn.seat}",
                command=command,
                reply_to=self.reply_to,
                ts=now,
            )
            stream = self.topo.commands(self.topo.partition_of(turn.match_id))
            pipe.xadd(stream, {DATA: JSON.encode(envelope)})
            log.debug("move", match_id=turn.match_id, seat=turn.seat, version=turn.version)
            self.moves += 1
        await pipe.execute()
        await self.reader.ack(entries)
