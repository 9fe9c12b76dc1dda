"""A referee and house bots in this process over one backend, stepped by hand, with a clock
the test moves: what the behaviour suites drive."""

from __future__ import annotations

import random
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
        )
        self.clock = clock or Clock()
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
