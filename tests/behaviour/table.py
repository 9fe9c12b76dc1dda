"""A referee and house bots in this process over one backend, stepped by hand, with a clock
the test moves: what the behaviour suites drive.

The clock is the referee's own, and on the in-memory backend the store's too. On Redis the
deadlines run on the server's clock, which no test can move: :meth:`Table.until` waits for it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

from engine.rules import Rules
from engine.state import MatchState
from engine.strategy import GreedyStrategy, Strategy
from events.codec import JSON
from events.envelope import CommandEnvelope, Envelope
from events.model import AnyCommand
from events.wire import Rejected, TurnMessage
from services.bots.worker import BotWorker
from services.config import Settings
from services.core.commands import ServiceClient
from services.core.repository import fold
from services.referee.service import Referee, Work
from services.store.memory import MemoryEventStore
from services.store.redis import RedisEventStore
from tests.support.backends import Backend

SENDER = "tester"


class Clock:
    """Wall-clock time that moves only when the test says so."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


class Table:
    """One backend with a referee, a pool of bots, a clock, and a sender's view of it all."""

    def __init__(
        self,
        backend: Backend,
        *,
        name: str = "r1",
        strategy: Strategy | None = None,
        pool: str = "greedy",
        watch_ms: int = 1_000,
        clock: Clock | None = None,
        stall_ms: int = 3_600_000,  # the clock is stepped by hand: a step is no stall
    ) -> None:
        self.backend = backend
        self.store = backend.store
        self.transport = backend.transport
        self.keys = self.store.keys
        self.settings = Settings(
            prefix=self.keys.prefix,
            partitions=self.keys.partitions,
            claim_idle_ms=50,
            lease_ms=60_000,
            max_deliveries=3,
            stall_ms=stall_ms,
        )
        self.clock = clock or Clock()
        if isinstance(self.store, MemoryEventStore):
            self.store.clock = self.clock
        self.referee = self.new_referee(name, watch_ms=watch_ms)
        self.pool = pool
        self.bots = BotWorker(
            self.settings, self.transport, strategy or GreedyStrategy(), pool, "bots-1"
        )
        self.sender = ServiceClient(self.transport, self.store, SENDER)
        self.replies = self.sender.replies

    def new_referee(self, name: str, *, watch_ms: int = 1_000) -> Referee:
        """Another referee over the same backend and clock."""
        return Referee(
            self.settings,
            self.store,
            self.transport,
            name,
            rng=random.Random(7),
            clock=self.clock,
            watch_ms=watch_ms,
        )

    async def start(self) -> Table:
        """Create the groups and take the partitions."""
        await self.referee.prepare()
        await self.bots.reader.start()
        return self

    async def send(self, match_id: str, command: AnyCommand, command_id: str = "c1") -> None:
        """Queue a command as an outside sender would."""
        await self.sender.send(match_id, command, command_id)

    async def send_raw(self, match_id: str, payload: bytes) -> None:
        """Queue raw bytes on the match's command stream."""
        await self.sender.send_raw(match_id, payload)

    async def create(
        self,
        match_id: str,
        rules: Rules | None = None,
        *,
        bots: Sequence[str | None] | None = None,
        deadline_ms: int = 0,
    ) -> MatchState:
        """Create a match (house bots of this table's pool by default) and let the referee
        deal it."""
        rules = rules or Rules.make("straight", players=2)
        seats = tuple(bots) if bots is not None else (self.pool,) * rules.players
        await self.sender.create_match(rules, seats, deadline_ms=deadline_ms, match_id=match_id)
        await self.referee.step()
        return await self.state(match_id)

    async def state(self, match_id: str) -> MatchState:
        """The match as stored."""
        state = fold(await self.store.read(match_id))
        if state is None:
            raise LookupError(f"{match_id} has no events")
        return state

    async def log(self, match_id: str) -> list[Envelope]:
        """The match's stored envelopes."""
        return [JSON.decode_envelope(r.data) for r in await self.store.read(match_id)]

    async def rejections(self) -> list[Rejected]:
        """Everything sent back to this sender."""
        entries = await self.store.read_stream(self.replies)
        return [JSON.decode_rejected(e.fields[b"__data__"]) for e in entries]

    async def turns(self, pool: str | None = None) -> list[TurnMessage]:
        """Every turn message written for a pool, in each partition's order."""
        out: list[TurnMessage] = []
        for stream in self.keys.all_turns(pool or self.pool):
            entries = await self.store.read_stream(stream)
            out += [JSON.decode_turn(e.fields[b"__data__"]) for e in entries]
        return out

    async def deadline(self, match_id: str) -> int:
        """The deadline of the match's current turn (ms, on the store's clock)."""
        key = self.keys.deadlines(self.keys.partition_of(match_id))
        return dict(await self.store.scheduled(key))[match_id]

    async def until(self, at_ms: int, timeout_s: float = 30.0) -> None:
        """Be at ``at_ms`` on the store's clock: the stepped clock moves there; on Redis the
        server's clock is waited for."""
        store = self.store
        if isinstance(store, MemoryEventStore):
            self.clock.now = max(self.clock.now, at_ms / 1000)
            return
        assert isinstance(store, RedisEventStore)
        give_up = time.monotonic() + timeout_s
        while True:
            seconds, micros = await store.client.time()
            now_ms = int(seconds) * 1000 + int(micros) // 1000
            if now_ms >= at_ms:
                return
            assert time.monotonic() < give_up, f"the server's clock never reached {at_ms}"
            await asyncio.sleep(min(0.5, (at_ms - now_ms) / 1000))

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass: the stepped clock moves; on Redis, they are waited out."""
        if isinstance(self.store, MemoryEventStore):
            self.clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    def referee_work(self, match_id: str, command: AnyCommand, command_id: str) -> Work:
        """A command made inside the referee (no stream entry), as a deadline's timeout is."""
        envelope = CommandEnvelope(match_id=match_id, command_id=command_id, command=command)
        return Work(envelope, None, self.clock())

    async def play(self, match_id: str, *, steps: int = 2_000) -> MatchState:
        """Let the bots and the referee play until the match ends (or ``steps`` run out)."""
        for _ in range(steps):
            state = await self.state(match_id)
            if state.phase == "over":
                return state
            await self.bots.step()
            await self.referee.step()
        return await self.state(match_id)
