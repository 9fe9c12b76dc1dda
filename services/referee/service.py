"""The referee: the only writer of match logs.

It reads commands in batches from every partition's command stream through the ``referee``
consumer group, asks the engine, and appends each command's events with the expected version
and the command id — the next turn (the seat's view, C8) and the turn's deadline go in the
same atomic append, so a crash can neither lose nor duplicate a turn. Rejections go back to
the sender and never touch the match log. Any number of referees may run: the expected
version makes sure that only one of them writes each version of a match.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import msgspec
import structlog
from redis.asyncio import Redis

from engine.game import decide, evolve
from engine.state import MatchState
from engine.views import view_for
from events.codec import JSON, DecodeError
from events.envelope import CommandEnvelope, Envelope
from events.model import (
    AnyCommand,
    AnyEvent,
    DealRound,
    MatchCreated,
    MatchEnded,
    Rejection,
    RoundEnded,
    TimeOutTurn,
)
from events.wire import Rejected, TurnMessage
from services.config import Settings
from services.core.dealer import deal
from services.redis.groups import Entry, GroupReader, GroupWorker, ensure_groups
from services.redis.leases import PartitionLeases
from services.store.base import (
    Ack,
    AppendRequest,
    ConcurrencyError,
    NewEvent,
    OutboxEntry,
    Schedule,
)
from services.store.keys import EXTERNAL, Keys
from services.store.redis import RedisEventStore

log = structlog.get_logger()
GROUP = "referee"
REFEREE_ONLY = (DealRound, TimeOutTurn)
"""Commands the referee makes itself; arriving on a command stream they are rejected."""


@dataclass(slots=True)
class Work:
    """One command in a batch, with where it came from and when it arrived."""

    envelope: CommandEnvelope
    entry: Entry | None
    arrived: float
    retry: bool = True  # a timeout that lost a race is dropped, not retried
    attempts: int = 0
    acked: bool = False  # the append that applied it also acknowledged its entry


@dataclass(slots=True)
class Pending:
    """A decided command waiting for its append."""

    work: Work
    request: AppendRequest
    events: list[AnyEvent] = field(default_factory=list)


class MatchCache:
    """The live state of recently used matches, least recently used evicted first."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._states: OrderedDict[str, MatchState] = OrderedDict()

    def get(self, match_id: str) -> MatchState | None:
        state = self._states.get(match_id)
        if state is not None:
            self._states.move_to_end(match_id)
        return state

    def put(self, match_id: str, state: MatchState) -> None:
        self._states[match_id] = state
        self._states.move_to_end(match_id)
        while len(self._states) > self.size:
            self._states.popitem(last=False)

    def drop(self, match_id: str) -> None:
        self._states.pop(match_id, None)


class Referee(GroupWorker):
    """Decides commands for every partition; ``run`` until ``stop``."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        store: RedisEventStore,
        name: str,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.redis = redis
        self.store = store
        self.topo = Keys(settings.prefix, settings.partitions)
        self.name = name
        self.rng = rng or random.SystemRandom()
        self.cache = MatchCache()
        self.leases = PartitionLeases(redis, self.topo, name, settings.lease_ms)
        self.owned: list[int] = []
        self.reader = GroupReader(
            redis,
            [],  # the commands of the partitions this referee holds, set by _own()
            GROUP,
            name,
            count=settings.batch,
            dead_letters=self.topo.dead_letters,
            max_deliveries=settings.max_deliveries,
        )
        self.claim_idle_ms = settings.claim_idle_ms
        self.what = "commands"
        self.handled = 0
        self._partitions: dict[str, int] = {}
        self._turn_streams: dict[tuple[int, str], str] = {}

    def partition(self, match_id: str) -> int:
        """The match's partition (raises ValueError for an invalid id); remembered."""
        p = self._partitions.get(match_id)
        if p is None:
            p = self._partitions[match_id] = self.topo.partition_of(match_id)
            if len(self._partitions) > 100_000:
                self._partitions.clear()
        return p

    def _turns(self, partition: int, pool: str) -> str:
        key = (partition, pool)
        stream = self._turn_streams.get(key)
        if stream is None:
            stream = self._turn_streams[key] = self.topo.turns(partition, pool)
        return stream

    # -- loops ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until ``stop()``: commands, reclaimed work and deadlines of the partitions
        this referee holds."""
        everything = [self.topo.commands(p) for p in range(self.settings.partitions)]
        await ensure_groups(self.redis, everything, GROUP)
        await self._own()
        log.info("referee started", consumer=self.name, partitions=self.owned)
        try:
            await self.serve(self._deadline_loop, self._lease_loop)
        finally:
            await self.leases.release_all()
            log.info("referee stopped", consumer=self.name, commands=self.handled)

    async def _own(self) -> None:
        """Renew and rebalance the partition leases; read only the partitions held."""
        owned = sorted(await self.leases.refresh())
        if owned != self.owned:
            log.info("partitions held", consumer=self.name, partitions=owned)
            self.owned = owned
            self.reader.streams = [self.topo.commands(p) for p in owned]

    async def _lease_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(self.settings.lease_ms / 4000)
            try:
                await self._own()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("lease renewal failed")

    async def _deadline_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(0.05)
            try:
                await self.fire_deadlines()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deadline check failed")

    async def fire_deadlines(self) -> int:
        """Time out every turn whose deadline has passed (TimeOutTurn); return how many."""
        now_ms = int(time.time() * 1000)
        work: list[Work] = []
        for p in self.owned:
            key = self.topo.deadlines(p)
            due = await self.redis.zrangebyscore(key, 0, now_ms, start=0, num=200)
            for raw in due:
                match_id = raw.decode()
                state = await self.load(match_id)
                if state is None or state.phase != "playing":
                    await self.redis.zrem(key, match_id)
                    continue
                command = TimeOutTurn(seat=state.turn, version=state.version)
                env = CommandEnvelope(
                    match_id=match_id,
                    command_id=f"timeout:{state.version}",
                    command=command,
                )
                work.append(Work(env, None, time.time(), retry=False))
        if work:
            await self.decide_and_append(work)
        return len(work)

    # -- one batch -----------------------------------------------------------------------------

    async def handle(self, entries: list[Entry]) -> None:
        """Decide, append and answer a batch of command entries, then acknowledge them."""
        now = time.time()
        work: list[Work] = []
        for entry in entries:
            env = await self._decode(entry)
            if env is not None:
                work.append(Work(env, entry, now))
        await self.decide_and_append(work)
        # Applied commands were acknowledged by their own append; the rest (rejected,
        # unreadable) are done now too.
        done = {id(w.entry) for w in work if w.acked}
        await self.reader.ack([e for e in entries if id(e) not in done])

    async def _decode(self, entry: Entry) -> CommandEnvelope | None:
        """The entry's command, or None after rejecting or dead-lettering it."""
        data = entry.data
        if data is None:
            await self.reader.dead_letter(entry, "no __data__ field")
            return None
        if len(data) > self.settings.max_command_bytes:
            await self._reject_raw(entry, data, f"command of {len(data)} bytes is too large")
            return None
        try:
            return JSON.decode_command_envelope(data)
        except DecodeError as e:
            await self._reject_raw(entry, data, str(e))
            return None

    async def _reject_raw(self, entry: Entry, data: bytes, why: str) -> None:
        """Reject an unreadable command to its sender if the sender can be read, else park it."""
        head: dict[str, object] = {}
        if len(data) <= 16 * self.settings.max_command_bytes:
            try:
                decoded = msgspec.json.decode(data)
                head = decoded if isinstance(decoded, dict) else {}
            except msgspec.DecodeError:
                pass
        reply_to, match_id, command_id = (
            head.get("reply_to"),
            head.get("match_id"),
            head.get("command_id"),
        )
        if not isinstance(reply_to, str):
            await self.reader.dead_letter(entry, why)
            return
        rejection = Rejection(reason="bad_command", rule="-", message=why)
        await self._send_rejection(reply_to, str(match_id or ""), str(command_id or ""), rejection)
        log.info("command rejected", match_id=match_id, reason="bad_command", detail=why)

    async def decide_and_append(self, work: list[Work]) -> None:
        """Decide, append and answer a batch of commands; conflicts are retried in order."""
        while work:
            pending: list[Pending] = []
            for w in work:
                try:
                    p = await self._decide(w)
                except Exception as e:  # one bad match must not hold up the batch
                    await self._park(w, e)
                    continue
                if p is not None:
                    pending.append(p)
            if not pending:
                return
            results = await self.store.append_many([p.request for p in pending])
            work = []
            failed: set[str] = set()
            for p, result in zip(pending, results, strict=True):
                match_id = p.request.match_id
                if isinstance(result, ConcurrencyError) or match_id in failed:
                    failed.add(match_id)
                    self.cache.drop(match_id)
                    w = p.work
                    w.attempts += 1
                    if w.retry and w.attempts < 4:
                        work.append(w)
                    elif w.retry:
                        await self._reject(
                            w,
                            Rejection(
                                reason="conflict", rule="-", message="the match kept moving; retry"
                            ),
                        )
                    continue
                p.work.acked = True
                if result.duplicate:
                    self.cache.drop(match_id)  # nothing was written: the cache ran ahead
                    continue
                self.handled += 1
                self._log_events(match_id, p.events)

    async def _park(self, w: Work, error: Exception) -> None:
        """A command that broke the referee (a corrupt log, a bug): dead-letter it, say why,
        and drop the match from the cache so it is read afresh next time."""
        env = w.envelope
        log.exception("command failed", match_id=env.match_id, command_id=env.command_id)
        self.cache.drop(env.match_id)
        if w.entry is not None:
            await self.reader.dead_letter(w.entry, f"{type(error).__name__}: {error}")
            w.acked = True

    async def _decide(self, w: Work) -> Pending | None:
        env = w.envelope
        match_id = env.match_id
        try:
            p = self.partition(match_id)
        except ValueError as e:
            await self._reject(w, Rejection(reason="bad_command", rule="-", message=str(e)))
            return None
        command: AnyCommand = env.command
        if w.entry is not None and isinstance(command, REFEREE_ONLY):
            what = command.__struct_config__.tag
            message = f"{what} comes from the referee alone: it deals and keeps the clock"
            await self._reject(w, Rejection(reason="bad_command", rule="-", message=message))
            return None
        state = await self.load(match_id)
        result = decide(state, command)
        if isinstance(result, Rejection):
            if isinstance(command, TimeOutTurn):
                return None  # the turn moved on before its deadline fired
            await self._reject(w, result)
            return None
        expected = 0 if state is None else state.version
        events = list(result)
        for event in result:
            state = evolve(state, event)
        assert state is not None
        while state.phase == "dealing":  # the referee deals: randomness enters the log here
            dealt = decide(state, deal(state.rules, self.rng))
            assert not isinstance(dealt, Rejection), dealt
            events.extend(dealt)
            for event in dealt:
                state = evolve(state, event)
        self.cache.put(match_id, state)
        now = time.time()
        new = [
            NewEvent(
                e.__struct_config__.tag,  # type: ignore[arg-type]
                JSON.encode(
                    Envelope(
                        match_id=match_id,
                        version=expected + i,
                        command_id=env.command_id,
                        ts=now,
                        event=e,
                    )
                ),
            )
            for i, e in enumerate(events, 1)
        ]
        outbox: list[OutboxEntry] = []
        deadline: float | None = None
        seat = state.turn
        pool = (state.bots[seat] if state.bots else None) or EXTERNAL
        if state.phase == "playing" and state.deadline_ms:
            deadline = now + state.deadline_ms / 1000
        if state.phase == "playing" and pool != EXTERNAL:
            # External seats follow the match through the gateway, which builds their turns
            # from the log: only house bots get turn messages.
            turn = TurnMessage(
                match_id=match_id,
                seat=seat,
                version=state.version,
                pool=pool,
                deadline=deadline,
                caused_at=w.arrived,
                view=view_for(state, seat),
            )
            outbox.append(OutboxEntry(self._turns(p, pool), JSON.encode(turn)))
        entry = w.entry
        request = AppendRequest(
            match_id=match_id,
            events=new,
            expected_version=expected,
            command_id=env.command_id,
            outbox=outbox,
            schedule=self._schedule(p, match_id, state, deadline),
            ack=None if entry is None else Ack(entry.stream, GROUP, entry.id.decode()),
        )
        return Pending(w, request, events)

    def _schedule(
        self, p: int, match_id: str, state: MatchState, deadline: float | None
    ) -> tuple[Schedule, ...]:
        """The turn's deadline, set or cleared in the same append (survives restarts)."""
        if deadline is not None:
            return (Schedule(self.topo.deadlines(p), match_id, int(deadline * 1000)),)
        if state.deadline_ms:
            return (Schedule(self.topo.deadlines(p), match_id, None),)
        return ()

    async def load(self, match_id: str) -> MatchState | None:
        """The match's state from the cache, or folded from its log (None if it has none)."""
        state = self.cache.get(match_id)
        if state is not None:
            return state
        records = await self.store.read(match_id)
        for record in records:
            state = evolve(state, JSON.decode_envelope(record.data).event)
        if state is not None:
            self.cache.put(match_id, state)
        return state

    async def _reject(self, w: Work, rejection: Rejection) -> None:
        env = w.envelope
        log.info(
            "command rejected",
            match_id=env.match_id,
            seat=getattr(env.command, "seat", None),
            command=env.command.__struct_config__.tag,
            reason=rejection.reason,
            rule=rejection.rule,
        )
        if env.reply_to:
            await self._send_rejection(env.reply_to, env.match_id, env.command_id, rejection)

    async def _send_rejection(
        self, reply_to: str, match_id: str, command_id: str, rejection: Rejection
    ) -> None:
        if not self.topo.is_reply_stream(reply_to):  # a sender names its own reply stream only
            log.warning("rejection not sent: not a reply stream", reply_to=reply_to[:200])
            return
        message = Rejected(match_id=match_id, command_id=command_id, rejection=rejection)
        await self.redis.xadd(reply_to, {b"__data__": JSON.encode(message)}, maxlen=10_000)

    def _log_events(self, match_id: str, events: list[AnyEvent]) -> None:
        for event in events:
            if isinstance(event, RoundEnded):
                log.info(
                    "round ended",
                    match_id=match_id,
                    seat=event.winner,
                    round=event.round,
                    outcome=event.outcome,
                    points=event.points,
                    scores=event.scores,
                )
            elif isinstance(event, MatchEnded):
                log.info(
                    "match ended",
                    match_id=match_id,
                    winner=event.winner,
                    scores=event.scores,
                    reason=event.reason,
                )
            elif isinstance(event, MatchCreated):
                log.info(
                    "match created",
                    match_id=match_id,
                    players=event.players,
                    family=event.rules.family,
                )
