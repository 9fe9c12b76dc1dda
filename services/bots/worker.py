"""House bot workers: consume turns of one pool and answer each with its strategy's move.

A worker sees only the turn message — its seat's view (C8) — never a match log. Workers of a
pool share one consumer group across every partition's turns stream, so turns are spread over
them; a killed worker's pending turns are claimed by another after ``claim_idle_ms``. The
command id is derived from the turn (match version and seat), so a turn answered twice is
applied once.
"""

from __future__ import annotations

import time

import structlog
from redis.asyncio import Redis

from engine.strategy import Strategy
from events.codec import JSON, DecodeError
from events.envelope import CommandEnvelope
from services.config import Settings
from services.redis.groups import DATA, Entry, GroupReader, GroupWorker
from services.store.keys import Keys

log = structlog.get_logger()


def group_name(pool: str) -> str:
    """The consumer group of a pool's workers."""
    return f"bots-{pool}"


class BotWorker(GroupWorker):
    """One worker process's loop for a pool of house bots."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        strategy: Strategy,
        pool: str,
        consumer: str,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.redis = redis
        self.strategy = strategy
        self.pool = pool
        self.topo = Keys(settings.prefix, settings.partitions)
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
        self.claim_idle_ms = settings.claim_idle_ms
        self.what = "turns"

    async def run(self) -> None:
        """Answer turns until ``stop()``."""
        await self.reader.start()
        log.info("bot worker started", pool=self.pool, strategy=self.strategy.name)
        try:
            await self.serve()
        finally:
            log.info("bot worker stopped", pool=self.pool, moves=self.moves)

    async def handle(self, entries: list[Entry]) -> None:
        """Answer a batch of turns and acknowledge them, in one pipelined round trip: a crash
        in between only means a turn answered again, and the same command id is applied once."""
        if not entries:
            return
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        done: dict[str, list[bytes]] = {}
        for entry in entries:
            try:
                turn = JSON.decode_turn(entry.data or b"")
            except DecodeError as e:
                await self.reader.dead_letter(entry, f"not a turn: {e}")
                continue
            self.latencies.append(now - turn.caused_at)
            try:
                command = self.strategy.choose(turn.view)
            except Exception:  # a strategy's bug must not stall the other matches' turns
                log.exception(
                    "strategy failed; playing the first legal move",
                    match_id=turn.match_id,
                    seat=turn.seat,
                    version=turn.version,
                )
                command = turn.view.legal[0]
            envelope = CommandEnvelope(
                match_id=turn.match_id,
                command_id=f"turn:{turn.version}:{turn.seat}",
                command=command,
                reply_to=self.reply_to,
                ts=now,
            )
            # the turns stream and the command stream share the partition's prefix and tag
            commands = entry.stream.rpartition(":turns:")[0] + ":cmd"
            pipe.xadd(commands, {DATA: JSON.encode(envelope)})
            done.setdefault(entry.stream, []).append(entry.id)
            log.debug("move", match_id=turn.match_id, seat=turn.seat, version=turn.version)
            self.moves += 1
        for stream, ids in done.items():
            pipe.xack(stream, self.reader.group, *ids)
        await pipe.execute()
