"""The referee: the only writer of match logs.

It reads commands in batches from the command streams of the partitions it holds, through the
``referee`` consumer group, decides each with :func:`services.core.decision.decide_command` (a
pure function), and appends each accepted command's events with the expected version and the
command id — the next turn (the seat's view, C8), the turn's deadline and the command's
acknowledgement go in the same atomic append, so a crash can neither lose nor duplicate a
turn. Rejections go back to the sender and never touch the match log.

Matches come from a :class:`~services.core.repository.MatchRepository`, whose cache holds only
what is stored: a match whose append failed, or whose partition this referee has just taken
over, is read afresh; a rejection is sent only once the stored version is the one it was
decided against; and a live match that has not moved for ``watch_ms`` (a turn lost with a Redis
that restarted, say) gets its turn sent again. Any number of referees may run:
the expected version makes sure that only one of them writes each version of a match.

Turn deadlines are on the Redis server's clock, never this process's: the append sets each from
the server's TIME, the deadline check runs in a script that reads it, and a move's arrival is
its command-stream entry's time. A turn is timed out only once every command that reached its
partition before the deadline has been decided, so a move queued in time is never timed out.
A gap in the checks of a partition's deadlines longer than ``DOMINO_STALL_MS`` — Redis paused,
this referee stalled, a referee that died while its lease ran out — pushes the deadlines still
running back by that gap: the players are not charged the time the service was away. This
process's own clock still times its metrics, its log lines and the watch list's periodic checks.

Whether a move came in time is not this referee's to judge from what it remembers: the append
that would store a move of the seat to play carries a turn check, and its script — after making
up for a stall, as the deadline check does — compares the move's arrival with the deadline as
Redis holds it, the one the timeout fires from. A move that arrived at or after it is refused
``late`` (before the turn began, ``not_your_turn``) and nothing is written; the referee tells
the sender. A timeout's append is checked too, and dropped while the stored deadline has not
passed. So every referee judges alike, even one that never heard of a stall (its check's
answer lost while Redis ran it): docs/fairness.md, "Fair clocks".

It reaches storage only through the event store and the message transport, so it runs the same
on the in-memory backend and on Redis.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec
import structlog

from engine.state import MatchState
from events.codec import JSON, DecodeError
from events.envelope import CommandEnvelope
from events.model import (
    AnyEvent,
    MatchCreated,
    MatchEnded,
    Rejection,
    RoundEnded,
    TimeOutTurn,
)
from events.wire import Rejected
from services.config import Settings
from services.core.decision import (
    Decision,
    append_request,
    decide_command,
    refusal_rejection,
    turn_for,
)
from services.core.leases import PartitionLeases
from services.core.repository import MatchRepository
from services.core.worker import GroupWorker
from services.metrics import (
    APPEND,
    COMMAND_OUTCOMES,
    COMMAND_TO_TURN,
    COMMANDS,
    DEADLINE_STALLS,
    DECIDE,
    LEASES_HELD,
    MOVES_DECIDED,
    fresh,
    observe_many,
)
from services.store.archive import Archive
from services.store.base import Ack, AppendRequest, ConcurrencyError, EventStore, Refusal
from services.store.errors import UNREACHABLE, InvalidMatchId
from services.store.source import MatchSource
from services.transport.base import Entry, Message, Transport

log = structlog.get_logger()
GROUP = "referee"
MOVED_KEPT = 100_000
"""At most this many live matches' last moves are remembered."""
DEADLINES_PER_CHECK = 200
"""At most this many turns of a partition are timed out per check (every 50 ms)."""
UNREADABLE_KEPT = 1_000
"""How many matches with an unreadable log a referee remembers having said so of."""


@dataclass(slots=True)
class Work:
    """One command in a batch, with where it came from and when it arrived."""

    envelope: CommandEnvelope
    entry: Entry | None
    arrived: float  # on this referee's clock, for latencies
    retry: bool = True  # a timeout that lost a race is dropped, not retried
    attempts: int = 0
    acked: bool = False  # the append that applied it also acknowledged its entry


@dataclass(slots=True)
class Pending:
    """A decided command waiting for its append."""

    work: Work
    request: AppendRequest
    decision: Decision
    partition: int


class Referee(GroupWorker):
    """Decides commands for the partitions it holds; ``run`` until ``stop``."""

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        transport: Transport,
        name: str,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.time,
        watch_ms: int | None = None,
        archive: Archive | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.transport = transport
        self.keys = store.keys
        self.name = name
        self.rng = rng or random.SystemRandom()
        self.clock = clock
        self.watch_ms = settings.watch_ms if watch_ms is None else watch_ms
        # a match archived (out of Redis) is read from the archive: a command to it is
        # refused as to any finished match, and its id can never be created again
        self.matches = MatchRepository(MatchSource(store, archive))
        self._moved: dict[str, float] = {}  # match id -> when this referee last moved it
        self._unreadable: dict[str, None] = {}  # matches whose log it could not read, in order
        self._holding: dict[str, asyncio.Future[None]] = {}
        """Match id -> the batch deciding and appending it, done when that batch is."""
        self.leases = PartitionLeases(
            transport.leases(), self.keys.partitions, name, settings.lease_ms
        )
        self.owned: list[int] = []
        self.reader = transport.consumer(
            GROUP,
            name,
            [],  # the commands of the partitions this referee holds, set by own()
            count=settings.batch,
            max_deliveries=settings.max_deliveries,
        )
        self.claim_idle_ms = settings.claim_idle_ms
        self.what = "commands"
        self.overlap = settings.overlap
        self.handled = 0
        self.leased_at: float | None = None
        """When a round of lease renewal last worked (``time.monotonic()``)."""
        # the metrics' children, looked up once: a batch only adds to them
        self._held = LEASES_HELD.labels(name)
        self._decided = [MOVES_DECIDED.labels(str(p)) for p in range(self.keys.partitions)]
        self._outcomes = {outcome: COMMANDS.labels(outcome) for outcome in COMMAND_OUTCOMES}

    # -- loops ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until ``stop()``: commands, reclaimed work, deadlines and the watch list of
        the partitions this referee holds."""
        if not await self.until_done("starting the referee", self.prepare):
            return
        log.info("referee started", consumer=self.name, partitions=self.owned)
        try:
            await self.serve(
                self._clock_loop, self.lease_loop(self.settings.lease_ms), self._trim_loop
            )
        finally:
            try:
                await self.leases.release_all()
            except Exception as e:  # the leases run out by themselves
                log.warning("giving the partitions back failed", error=str(e))
            log.info("referee stopped", consumer=self.name, commands=self.handled)

    async def prepare(self) -> None:
        """Create the group on every partition's commands (so none is missed when a partition
        moves here) and take this referee's share of the partitions."""
        everything = [self.keys.commands(p) for p in range(self.keys.partitions)]
        groups = self.transport.consumer(GROUP, self.name, everything, count=1, max_deliveries=1)
        await groups.start()
        await self.own()

    async def own(self) -> None:
        """Renew and rebalance the partition leases; read only the partitions held. A
        partition just taken over may have moved on under another referee: its cached
        matches are read afresh."""
        owned = sorted(await self.leases.refresh())
        self.leased_at = time.monotonic()
        self._held.set(len(owned))
        gained = self.leases.gained
        if gained:
            self.matches.forget_partitions(gained)
            await self._start_clocks(sorted(gained))
        if owned != self.owned:
            log.info("partitions held", consumer=self.name, partitions=owned)
            self.owned = owned
            self.reader.streams = [self.keys.commands(p) for p in owned]

    async def readiness(self) -> str | None:
        """None while this referee holds partitions or competes for them (a round of lease
        renewal worked within a lease's length); else why not."""
        return fresh(self.leased_at, self.settings.lease_ms / 1000, "a round of lease renewal")

    async def _trim_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(self.settings.trim_every_s)
            try:
                await self.trim()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("trimming the command streams failed")

    async def trim(self) -> int:
        """Trim the command streams of the partitions held below what the referees' group
        still needs; return how many entries went."""
        return await self.transport.trim([self.keys.commands(p) for p in self.owned])

    async def _clock_loop(self) -> None:
        while not self.stopping:
            await asyncio.sleep(0.05)
            try:
                await self.fire_deadlines()
                await self.check_watched()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deadline check failed")

    async def _start_clocks(self, partitions: list[int]) -> None:
        """Check the deadlines of partitions just taken before reading their commands: a
        partition nobody checked yet starts its clock there, so a stall from the first turn
        on is made up for too; one a referee left is made up for at once."""
        try:
            await self.fire_deadlines(partitions)
        except asyncio.CancelledError:
            raise
        except Exception:  # the clock loop checks them again within a tick
            log.exception("deadline check failed", partitions=partitions)

    async def fire_deadlines(self, partitions: list[int] | None = None) -> int:
        """Time out every turn whose deadline has passed on the Redis server's clock, once the
        commands that reached its partition before the deadline are decided (TimeOutTurn);
        return how many. A stall since the last check is made up for first. Checks the
        partitions held, or only ``partitions``."""
        now = self.clock()
        work: list[Work] = []
        owned = list(self.owned) if partitions is None else partitions
        found = await self.transport.deadlines_due(
            owned, GROUP, DEADLINES_PER_CHECK, self.settings.stall_ms
        )
        for p, due in zip(owned, found, strict=True):
            if due.shifted_ms:
                self._stalled(p, due.shifted_ms)
            key = self.keys.deadlines(p)
            for match_id in due.matches:
                state = await self._readable(match_id)
                if state is False:
                    continue
                if state is None or state.phase != "playing":
                    await self.transport.reschedule(key, match_id, None)
                    await self.transport.reschedule(self.keys.turn_began(p), match_id, None)
                    continue
                command = TimeOutTurn(seat=state.turn, version=state.version)
                env = CommandEnvelope(
                    match_id=match_id, command_id=f"timeout:{state.version}", command=command
                )
                work.append(Work(env, None, now, retry=False))
        if work:
            await self.decide_and_append(work)
        return len(work)

    def _stalled(self, partition: int, shifted_ms: int) -> None:
        DEADLINE_STALLS.labels(str(partition)).inc()
        log.warning(
            "deadlines pushed back: nobody checked them for a while",
            partition=partition,
            shifted_ms=shifted_ms,
            consumer=self.name,
        )

    async def check_watched(self) -> int:
        """Check the watched matches that are due: send again the turn of each one that has
        not moved for ``watch_ms`` (its turn, or its answer, was lost); return how many were
        sent. A match this referee has not seen move since it started (or took the
        partition over) is given one more period."""
        now = self.clock()
        now_ms = int(now * 1000)
        sent = 0
        owned = list(self.owned)
        keys = [self.keys.watch(p) for p in owned]
        found = await self.transport.due(keys, now_ms, 200)
        for p, key, due in zip(owned, keys, found, strict=True):
            for match_id in due:
                state = await self._readable(match_id)
                if state is False:
                    continue
                if state is not None and await self.store.version(match_id) != state.version:
                    state = await self.matches.reload(match_id)  # moved under another referee
                    self._moved.pop(match_id, None)
                if state is None or state.phase == "over":
                    await self.transport.reschedule(key, match_id, None)
                    self._moved.pop(match_id, None)
                    continue
                moved = self._moved.get(match_id)
                if moved is not None and now - moved < self.watch_ms / 1000:
                    await self.transport.reschedule(
                        key, match_id, int(moved * 1000) + self.watch_ms
                    )
                    continue
                self._moved[match_id] = now
                await self.transport.reschedule(key, match_id, now_ms + self.watch_ms)
                turn = turn_for(match_id, state, None, now) if moved is not None else None
                if turn is None:  # an outside seat's turn, or a first look: wait a period
                    continue
                message = Message(self.keys.turns(p, turn.pool), JSON.encode(turn))
                await self.transport.publish([message])
                log.warning(
                    "turn sent again", match_id=match_id, seat=turn.seat, version=turn.version
                )
                sent += 1
        return sent

    # -- one batch -----------------------------------------------------------------------------

    async def handle(self, entries: list[Entry]) -> None:
        """Decide, append and answer a batch of command entries, then acknowledge them."""
        now = self.clock()
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
            self._outcomes["dead"].inc()
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
            self._outcomes["dead"].inc()
            return
        self._outcomes["rejected"].inc()
        rejection = Rejection(reason="bad_command", rule="-", message=why)
        await self._send_rejection(reply_to, str(match_id or ""), str(command_id or ""), rejection)
        log.info("command rejected", match_id=match_id, reason="bad_command", detail=why)

    async def decide_and_append(self, work: list[Work]) -> None:
        """Decide, append and answer a batch of commands; conflicts are retried in order.

        Batches are handled side by side (the next one decided while this one's append is
        on its way), but never a match in two at once: the commands of a match another batch
        holds wait until that batch is done with it, and are decided against what it stored.
        """
        while work:
            held = self._holding
            ready = [w for w in work if w.envelope.match_id not in held]
            work = [w for w in work if w.envelope.match_id in held]
            if ready:
                await self._decide_and_append(ready)
            if work:
                waits = {held[m] for w in work if (m := w.envelope.match_id) in held}
                if waits:
                    await asyncio.wait(waits)

    async def _decide_and_append(self, work: list[Work]) -> None:
        """Decide, append and answer commands of matches no other batch holds; conflicts are
        retried in order.

        Within a batch a match's later commands are decided against the state its earlier
        ones make; that state reaches the repository only once its append has succeeded.
        """
        held = self._holding
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ids = {w.envelope.match_id for w in work}
        for match_id in ids:
            held[match_id] = done
        try:
            await self._decide_until_done(work)
        finally:
            for match_id in ids:
                if held.get(match_id) is done:
                    del held[match_id]
            done.set_result(None)

    async def _decide_until_done(self, work: list[Work]) -> None:
        while work:
            pending: list[Pending] = []
            later: list[Work] = []
            ahead: dict[str, Decision] = {}
            deciding = time.perf_counter()
            for w in work:
                try:
                    decided = await self._decide(w, ahead)
                except UNREACHABLE:  # Redis is away: the batch stays pending and comes again
                    raise
                except Exception as e:  # one bad match must not hold up the batch
                    await self._park(w, e)
                    continue
                if decided is None:
                    continue
                if isinstance(decided, Work):  # refused against a state not stored yet
                    later.append(decided)
                    continue
                ahead[decided.request.match_id] = decided.decision
                pending.append(decided)
            if not pending:
                work = later
                continue
            appending = time.perf_counter()
            try:
                results = await self.store.append_many([p.request for p in pending])
            except BaseException:
                for p in pending:  # what was stored is unknown: read it afresh next time
                    self.matches.forget(p.request.match_id)
                raise
            appended = time.perf_counter()
            applied: list[Pending] = []
            work = []
            failed: set[str] = set()
            moved = self._moved
            for p, result in zip(pending, results, strict=True):
                match_id = p.request.match_id
                if isinstance(result, ConcurrencyError) or match_id in failed:
                    failed.add(match_id)
                    self.matches.forget(match_id)
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
                if result.refused is not None:  # the turn's clock, as Redis holds it, said no
                    failed.add(match_id)  # the batch's later appends of it built on this one
                    self.matches.forget(match_id)  # decided in place: read what is stored
                    await self._refused(p.work, result.refused)
                    continue
                p.work.acked = True
                if result.duplicate:
                    self.matches.forget(match_id)  # nothing was written: read what is stored
                    self._outcomes["duplicate"].inc()
                    continue
                applied.append(p)
                decision = p.decision
                self.matches.stored(match_id, decision.state)
                if decision.state.phase == "over":  # when each live match last moved
                    moved.pop(match_id, None)
                else:
                    if len(moved) >= MOVED_KEPT and match_id not in moved:
                        moved.clear()  # forgotten matches only get one more period
                    moved[match_id] = decision.now
                self.handled += 1
                self._log_events(match_id, p.decision.events)
            self._measure(applied, appending - deciding, appended - appending)
            work.extend(later)

    def _measure(self, applied: list[Pending], decide_s: float, append_s: float) -> None:
        """One round of a batch in the metrics, observed once for the round: how long its
        decide and its append took, what it applied, the events by partition, and each
        command's time from its sender to its append."""
        DECIDE.observe(decide_s)
        APPEND.observe(append_s)
        if not applied:
            return
        self._outcomes["applied"].inc(len(applied))
        events = [0] * len(self._decided)
        waited: list[float] = []
        now = self.clock()
        for p in applied:
            events[p.partition] += len(p.decision.events)
            ts = p.work.envelope.ts
            if p.work.entry is not None and ts > 0:  # a sender's command, not our own timeout
                waited.append(now - ts)
        for counter, n in zip(self._decided, events, strict=True):
            if n:
                counter.inc(n)
        observe_many(COMMAND_TO_TURN, waited)

    async def _readable(self, match_id: str) -> MatchState | Literal[False] | None:
        """The match, for a deadline or the watch list; False, and its deadline and watch left
        as they are, when its log holds what this referee cannot read (an event a newer release
        wrote, a corrupt entry): one match's log must not stop the clock of the others, and a
        process that can read it acts on it. Said in the log once per match."""
        try:
            return await self.matches.load(match_id)
        except DecodeError as e:
            if match_id not in self._unreadable:
                log.error("match log unreadable; its clock left", match_id=match_id, error=str(e))
            self._unreadable[match_id] = None
            while len(self._unreadable) > UNREADABLE_KEPT:
                del self._unreadable[next(iter(self._unreadable))]
            return False

    async def _park(self, w: Work, error: Exception) -> None:
        """A command that broke the referee (a corrupt log, a bug): dead-letter it, say why,
        and read the match afresh next time."""
        env = w.envelope
        log.exception("command failed", match_id=env.match_id, command_id=env.command_id)
        self.matches.forget(env.match_id)
        if w.entry is not None:
            await self.reader.dead_letter(w.entry, f"{type(error).__name__}: {error}")
            self._outcomes["dead"].inc()
            w.acked = True

    async def _decide(self, w: Work, ahead: dict[str, Decision]) -> Pending | Work | None:
        """The append for ``w``; None when it was answered (rejected or dropped); ``w``
        itself when it must wait for the batch's earlier appends of its match."""
        env = w.envelope
        match_id = env.match_id
        try:
            partition = self.keys.partition_of(match_id)
        except InvalidMatchId as e:
            await self._reject(w, Rejection(reason="bad_command", rule="-", message=str(e)))
            return None
        batched = ahead.get(match_id)
        if batched is not None:
            outcome = self._decide_against(batched.state, w)
            if isinstance(outcome, Rejection):
                return w  # decided against an append still on its way: decide again after it
            decision = outcome
        else:
            # Taken out of the repository while it is decided and appended: what is cached
            # is only ever what is stored.
            state = await self.matches.take(match_id)
            outcome = self._decide_against(state, w)
            if isinstance(outcome, Rejection):
                rechecked = await self._recheck(w, state, outcome)
                if rechecked is None:
                    return None
                outcome = rechecked
            decision = outcome
        entry = w.entry
        request = append_request(
            decision,
            self.keys,
            partition,
            ack=None if entry is None else Ack(entry.stream, GROUP, entry.id),
            watch_ms=self.watch_ms,
            arrived_ms=None if entry is None else entry.arrived_ms,
            stall_ms=self.settings.stall_ms,
        )
        return Pending(w, request, decision, partition)

    async def _recheck(
        self, w: Work, state: MatchState | None, rejection: Rejection
    ) -> Decision | None:
        """A command refused against the state this referee held: check that state with the
        store before answering. Returns the decision to append when the store was ahead and
        the command is good after all; None once the command is answered (rejected, or found
        to be a duplicate, or a stale timeout dropped). The state goes back to the repository
        unless a decision evolved it."""
        env = w.envelope
        match_id = env.match_id
        if w.entry is None:  # the referee's own timeout: the turn moved on before it fired
            self._give_back(match_id, state)
            return None
        version, earlier = await asyncio.gather(
            self.store.version(match_id), self.store.applied(match_id, env.command_id)
        )
        if earlier is not None:  # the same command again: it was applied, nothing to say
            self._give_back(match_id, state)
            self._outcomes["duplicate"].inc()
            log.debug("duplicate command", match_id=match_id, command_id=env.command_id)
            return None
        if version != (0 if state is None else state.version):  # the cache was behind
            state = await self.matches.take(match_id, fresh=True)
            again = self._decide_against(state, w)
            if not isinstance(again, Rejection):
                return again
            rejection = again
        self._give_back(match_id, state)
        await self._reject(w, rejection)
        return None

    def _give_back(self, match_id: str, state: MatchState | None) -> None:
        """Return an unchanged state to the repository (the store holds it)."""
        if state is not None:
            self.matches.stored(match_id, state)

    def _decide_against(self, state: MatchState | None, w: Work) -> Decision | Rejection:
        return decide_command(
            state,
            w.envelope,
            now=self.clock(),
            rng=self.rng,
            arrived=w.arrived,
            from_stream=w.entry is not None,
            owned=True,  # taken out of the repository, or this batch's own
        )

    async def _refused(self, w: Work, refusal: Refusal) -> None:
        """A command whose append the turn's clock refused, as Redis holds it: a move that
        reached its stream at or after its turn's deadline (or before the turn began) is
        rejected to its sender; the referee's own timeout of a turn whose deadline a stall
        pushed back is dropped, to fire again when the deadline as stored has passed."""
        entry = w.entry
        if entry is None:
            log.info(
                "timeout not due: its deadline was pushed back",
                match_id=w.envelope.match_id,
                deadline_ms=refusal.at_ms,
            )
            return
        await self._reject(w, refusal_rejection(refusal, entry.arrived_ms))

    async def _reject(self, w: Work, rejection: Rejection) -> None:
        env = w.envelope
        self._outcomes["rejected"].inc()
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
        if not self.keys.is_reply_stream(reply_to):  # a sender names its own reply stream only
            log.warning("rejection not sent: not a reply stream", reply_to=reply_to[:200])
            return
        message = Rejected(match_id=match_id, command_id=command_id, rejection=rejection)
        await self.transport.reply(reply_to, JSON.encode(message))

    def _log_events(self, match_id: str, events: Sequence[AnyEvent]) -> None:
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
