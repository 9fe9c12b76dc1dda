"""House bot workers: consume turns of one pool and answer each with its strategy's move.

A worker sees only the turn message — its seat's view (C8) — never a match log. Workers of a
pool share one consumer group over the pool's turns streams, and the partitions by lease (role
``bots-<pool>``, as referees share theirs): each worker reads only the turns streams of the
partitions it holds, an even share of the live workers'. A worker that dies stops renewing;
after ``lease_ms`` the others take its partitions, and its pending turns are claimed once idle
for ``claim_idle_ms``. A worker that joins takes its share as the others give theirs back. The
command id is derived from the turn (match version and seat), so a turn answered twice — by a
worker that let the partition go mid-batch, and by the one that took it — is applied once.
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
from services.core.leases import PartitionLeases
from services.core.worker import GroupWorker
from services.metrics import BOT_THINK, BOT_TURNS, LEASES_HELD, fresh
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.errors import InvalidMatchId
from services.store.keys import Keys
from services.transport.base import Entry, LeaseTable, Message, Transport

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


READ_BLOCK_MS = 1000
"""How long a read of turns waits for one. A turn that comes ends the wait at once, so this
sets only how often an idle worker asks again — on a Redis Cluster once per stream it reads:
at 20 ms, 256 partitions were 12,800 reads a second of an idle worker — and, on one node, how
soon a partition just taken is read (from the next read on)."""


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
    """One worker process's loop for a pool of house bots: over the partitions it holds in
    ``leases`` (the pool's table, role ``bots-<pool>``), or over every partition without."""

    def __init__(
        self,
        settings: Settings,
        transport: Transport,
        strategy: Strategy,
        pool: str,
        consumer: str,
        *,
        observe: Callable[[TurnMessage, float], None] | None = None,
        leases: LeaseTable | None = None,
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
            block_ms=READ_BLOCK_MS,
        )
        self.leases = (
            None
            if leases is None
            else PartitionLeases(leases, self.keys.partitions, consumer, settings.lease_ms)
        )
        self.owned = list(range(self.keys.partitions))
        """The partitions whose turns this worker reads (every one, until leases say else)."""
        self.leased_at: float | None = None
        """When a round of lease renewal last worked (``time.monotonic()``)."""
        self.consumer = consumer
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
        if not await self.until_done("starting the bot worker", self.prepare):
            return
        log.info(
            "bot worker started", pool=self.pool, strategy=self.strategy.name, partitions=self.owned
        )
        self.consuming = True
        try:
            periodic = (
                [self._trim_loop]
                if self.leases is None
                else [self._trim_loop, self.lease_loop(self.settings.lease_ms)]
            )
            await self.serve(*periodic)
        finally:
            self.consuming = False
            if self.leases is not None:
                try:
                    await self.leases.release_all()
                except Exception as e:  # the leases run out by themselves
                    log.warning("giving the partitions back failed", pool=self.pool, error=str(e))
            log.info("bot worker stopped", pool=self.pool, moves=self.moves)

    async def prepare(self) -> None:
        """Create the group on every partition's turns stream (at 0: no turn is missed when a
        partition moves here), then take this worker's share of the partitions."""
        await self.reader.start()
        if self.leases is not None:
            self.owned = []
            self.reader.streams = []
            await self.own()

    async def own(self) -> None:
        """Renew and rebalance the leases; read only the partitions held. The turns a worker
        that died left pending on a partition taken here are claimed by the reclaim loop (they
        have been idle at least as long as its lease took to run out)."""
        if self.leases is None:
            return
        owned = sorted(await self.leases.refresh())
        self.leased_at = time.monotonic()
        LEASES_HELD.labels(self.consumer).set(len(owned))
        if owned != self.owned:
            log.info("partitions held", pool=self.pool, consumer=self.consumer, partitions=owned)
            self.owned = owned
            self.reader.streams = [self.keys.turns(p, self.pool) for p in owned]

    async def readiness(self) -> str | None:
        """None while the worker reads its turns and (with leases) a round of lease renewal
        worked within a lease's length; else why not."""
        if not self.consuming:
            return "the worker does not read its turns"
        if self.leases is None:
            return None
        return fresh(self.leased_at, self.settings.lease_ms / 1000, "a round of lease renewal")

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
        """Trim the pool's turns streams of the partitions read here below what its group still
        needs (trimming twice, or to an older point, removes nothing more); return how many
        entries went."""
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
