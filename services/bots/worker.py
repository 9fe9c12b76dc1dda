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
from collections.abc import Callable

import structlog

from engine.strategy import Strategy
from events.codec import JSON, DecodeError
from events.wire import TurnMessage
from services.config import Settings
from services.core.commands import command_message
from services.core.worker import GroupWorker
from services.metrics import BOT_THINK, BOT_TURNS
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.errors import InvalidMatchId
from services.store.keys import Keys
from services.transport.base import Entry, Message, Transport

log = structlog.get_logger()


def group_name(pool: str) -> str:
    """The consumer group of a pool's workers."""
    return f"bots-{pool}"


ALIVE_S = 30
"""A pool is served while one of its workers has said so within this many seconds."""
HEARTBEAT_S = 5.0
"""How often a worker says it serves its pool."""
_BEAT = LuaScript(
    """
-- KEYS: the pool's workers. ARGV: the worker, how long a beat lasts (s)
local now = tonumber(redis.call('TIME')[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 10 * tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
return now
"""
)
_SERVED = LuaScript(
    """
-- KEYS: the pool's workers. ARGV: how long a beat lasts (s)
local now = tonumber(redis.call('TIME')[1])
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')
"""
)


def workers_key(keys: Keys, pool: str) -> str:
    """The sorted set of a pool's workers, by when each last said it serves the pool."""
    return f"{keys.prefix}:pool:{pool}"


async def heartbeat(redis: Client, keys: Keys, pool: str, consumer: str) -> None:
    """Say, every few seconds until cancelled, that ``consumer`` serves ``pool`` (on the
    Redis server's clock, so workers' clocks need not agree)."""
    while True:
        try:
            await _BEAT(redis, [workers_key(keys, pool)], [consumer, ALIVE_S])
        except Exception:
            log.warning("pool heartbeat failed; trying again", pool=pool)
        await asyncio.sleep(HEARTBEAT_S)


async def pool_served(redis: Client, keys: Keys, pool: str) -> bool:
    """Whether some worker of ``pool`` has said within ``ALIVE_S`` that it serves it: a match
    whose seat names a pool nobody serves would wait for ever."""
    return int(await _SERVED(redis, [workers_key(keys, pool)], [ALIVE_S])) > 0


class BotWorker(GroupWorker):
    """One worker process's loop for a pool of house bots."""

    def __init__(
        self,
        settings: Settings,
        transport: Transport,
        strategy: Strategy,
        pool: str,
        consumer: str,
        *,
        observe: Callable[[TurnMessage, float], None] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.transport = transport
        self.strategy = strategy
        self.pool = pool
        self.keys = transport.keys
        self.reader = transport.consumer(
            group_name(pool),
            consumer,
            self.keys.all_turns(pool),
            count=settings.batch,
            max_deliveries=settings.max_deliveries,
        )
        self.reply_to = self.keys.replies(group_name(pool))
        self.observe = observe
        """Called with each turn and when it was answered (a benchmark measures latency)."""
        self.moves = 0
        self.claim_idle_ms = settings.claim_idle_ms
        self.what = "turns"
        self.overlap = settings.overlap
        self.consuming = False
        """Whether the worker reads its turns (its group exists, it has not stopped)."""
        self._turns = BOT_TURNS.labels(pool)  # looked up once: a batch only adds to them
        self._think = BOT_THINK.labels(pool)

    async def run(self) -> None:
        """Answer turns until ``stop()``."""
        if not await self.until_done("starting the bot worker", self.reader.start):
            return
        log.info("bot worker started", pool=self.pool, strategy=self.strategy.name)
        self.consuming = True
        try:
            await self.serve(self._trim_loop)
        finally:
            self.consuming = False
            log.info("bot worker stopped", pool=self.pool, moves=self.moves)

    async def _trim_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(self.settings.trim_every_s)
            try:
                await self.trim()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("trimming the turns streams failed", pool=self.pool)

    async def trim(self) -> int:
        """Trim the pool's turns streams, every partition's, below what its group still needs
        (every worker of the pool may: trimming twice, or to an older point, removes nothing
        more); return how many entries went."""
        return await self.transport.trim(self.reader.streams)

    async def handle(self, entries: list[Entry]) -> None:
        """Answer a batch of turns and acknowledge them, in one pipelined round trip: a crash
        in between only means a turn answered again, and the same command id is applied once."""
        if not entries:
            return
        if self.settings.bot_pace_ms:
            await asyncio.sleep(self.settings.bot_pace_ms / 1000)
        now = time.time()
        answers: list[Message] = []
        done: list[Entry] = []
        thinking = 0.0
        for entry in entries:
            try:
                turn = JSON.decode_turn(entry.data or b"")
            except DecodeError as e:
                await self.reader.dead_letter(entry, f"not a turn: {e}")
                continue
            if not turn.view.legal:  # nothing to answer with: no referee sends such a turn
                await self.reader.dead_letter(entry, "a turn without a legal move")
                continue
            if self.observe is not None:
                self.observe(turn, now)
            began = time.perf_counter()
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
            thinking += time.perf_counter() - began
            command_id = f"turn:{turn.version}:{turn.seat}"
            try:
                answer = command_message(
                    self.keys, turn.match_id, command_id, command, self.reply_to, now
                )
            except InvalidMatchId as e:  # a turn no referee wrote: park it, answer the rest
                await self.reader.dead_letter(entry, f"not a turn: {e}")
                continue
            answers.append(answer)
            done.append(entry)
            log.debug("move", match_id=turn.match_id, seat=turn.seat, version=turn.version)
            self.moves += 1
        await self.reader.answer(answers, done)
        if done:
            self._turns.inc(len(done))
            self._think.observe(thinking)
