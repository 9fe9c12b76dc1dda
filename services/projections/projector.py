"""Projections of the match logs: match summaries, live and finished lists, and results by
account, house bot pool or guest (:mod:`services.projections.identity`).

Each projection follows every partition's notification log and commits its writes together
with the log position it has reached (one atomic write), so a restart neither skips nor
double-applies an event. Any projection is rebuilt from the log by resetting it and catching
up from the start. Everything written here is public (C8): summaries come from
``public_view``, never from hands.

Several projector processes share the partitions by lease (:meth:`Projector.run` with
``leases``): each folds the partitions it holds, and what every projection keeps of a
partition depends on that partition's log alone, so the split changes nothing that is read
(docs/architecture.md, "Projections split by partition").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import NamedTuple, Protocol

import msgspec
import structlog

from engine.game import evolve
from engine.state import MatchState
from engine.views import public_view
from events.codec import JSON
from events.envelope import Envelope
from events.errors import SchemaTooNew
from events.model import MatchCreated, MatchEnded
from services.core.leases import PartitionLeases
from services.core.repository import MatchRepository
from services.metrics import PROJECTOR_EVENTS, fresh
from services.projections.identity import kind_of, seat_key
from services.projections.rebuild import rebuild_from_matches
from services.projections.records import MalformedLog, envelope_of
from services.store.archive import Archive
from services.store.base import EventStore, Recorded
from services.store.errors import UNREACHABLE
from services.store.projection import (
    Checkpoints,
    Handler,
    ProjectionConflict,
    WriteOp,
    catch_up_together,
    op,
)
from services.store.source import LogReader

log = structlog.get_logger()
QUEUE = "archive"
"""The archive queue's projection (services/projections/archiver.py), which an archived match
no longer feeds."""
FOLLOWING_S = 10.0
"""A projector is ready while a round of following the logs has ended within this long."""
BATCH = 2000
"""Log entries read at once."""
ROUND_LIMIT = 2 * BATCH
"""At most about this many entries of a partition are read in one round of a projector that
holds its partitions by lease: a round stays short beside the lease it renewed at its start,
and a partition far behind is caught up over several rounds, one straight after another."""


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """What the lobby shows of a match: public facts only."""

    match_id: str
    status: str  # live or finished
    family: str
    players: tuple[str, ...]
    round: int
    version: int
    scores: tuple[int, ...]
    turn: int | None
    ends: tuple[tuple[str, int], ...]
    winner: int | None = None
    updated: float = 0.0
    reason: str | None = None  # how a finished match ended (MatchEnded.reason)


async def follow(
    catch_up: Callable[[], Awaitable[int]],
    stop: asyncio.Event,
    interval: float,
    again: Callable[[], bool] = lambda: False,
) -> None:
    """Call ``catch_up`` every ``interval`` seconds until ``stop`` is set — at once after a
    round for which ``again()`` says there is more to read; a failed round is logged and tried
    again the next time."""
    while not stop.is_set():
        try:
            await catch_up()
        except Exception:
            log.exception("projection batch failed; retrying")
        else:
            if again():
                continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


class Ends(NamedTuple):
    """How a match began and how it ended, and when it ended (seconds since the epoch)."""

    created: MatchCreated
    ended: MatchEnded
    ts: float


class Bookends:
    """A match's first and last events from the log, without folding what lies between: for
    projections that only need who played and how it ended."""

    def __init__(self, store: LogReader) -> None:
        self.store = store  # read through the archive too: a match may have moved there
        self.created: dict[str, MatchCreated] = {}  # live matches' first events

    def forget(self) -> None:
        """Drop what is remembered; a match's first event is read again when needed."""
        self.created.clear()

    async def see(self, record: Recorded) -> Ends | None:
        """Remember a match's creation; at its end, return how it began and ended (reading the
        first event from the log if it came before a restart). Raises MalformedLog when the
        log does not begin with match_created or a record holds another event than its type."""
        if record.type == "match_created":
            self.created[record.match_id] = envelope_of(record, MatchCreated)[1]
        elif record.type == "match_ended":
            envelope, ended = envelope_of(record, MatchEnded)
            created = self.created.pop(record.match_id, None)
            if created is None:
                first = await self.store.read(record.match_id, 1, 1)
                if not first:
                    raise MalformedLog(f"match {record.match_id!r} ended but has no first event")
                created = envelope_of(first[0], MatchCreated)[1]
            return Ends(created, ended, envelope.ts)
        return None


class Follower(Protocol):
    """Another projection a Projector feeds: its name, what it remembers, and its handler."""

    name: str

    def forget(self) -> None:
        """Drop what is remembered from the logs (read again when needed)."""
        ...

    async def handle(
        self, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        """The writes for a batch of a partition's log entries."""
        ...


class Projector:
    """Applies log batches to the ``summary`` and ``results`` projections of every partition."""

    def __init__(
        self,
        store: EventStore,
        checkpoints: Checkpoints,
        *,
        summary: str = "summary",
        results: str = "results",
        also: Sequence[Follower] = (),
        source: LogReader | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.store = store
        self.source = store if source is None else source  # the logs, archived ones too
        self.archive = archive  # what a rebuild folds besides the matches in Redis
        self.checkpoints = checkpoints
        self.summary = summary
        self.results = results
        self.also = list(also)  # more projections fed from the same reads (ratings)
        self.caught_up_at: float | None = None
        """When a round of catching up last ended (``time.monotonic()``)."""
        self.cut_short = False
        """Whether the last round left entries unread in a partition (its limit reached)."""
        self._parked_at: dict[int, str] = {}
        """Partition -> why it is parked, as last said in the log."""
        self._forget()

    def _forget(self) -> None:
        """Drop what was folded in memory; it is read again from the logs when needed."""
        self.matches = MatchRepository(self.source, cache_size=5_000)
        self.bookends = Bookends(self.source)
        for follower in self.also:
            follower.forget()

    def names(self) -> list[str]:
        """Every projection this projector writes."""
        return [self.summary, self.results, *(f.name for f in self.also)]

    async def catch_up(
        self, partitions: Iterable[int] | None = None, *, limit: int | None = None
    ) -> int:
        """Apply everything new in the log of each of ``partitions`` (default: every
        partition), read once for all the projections — with ``limit``, about that many
        entries of each at most; return how many log entries were read."""
        read = 0
        self.cut_short = False
        for p in range(self.store.partitions) if partitions is None else partitions:
            try:
                got = await catch_up_together(
                    self.store, self.checkpoints, p, self.members(p), batch=BATCH, limit=limit
                )
                read += got
                self.cut_short = self.cut_short or (limit is not None and got >= limit)
            except ProjectionConflict as e:
                log.warning("projection moved by another writer; resuming", detail=str(e))
                self._forget()
            except SchemaTooNew as e:
                self._parked(p, e)
        PROJECTOR_EVENTS.inc(read)
        self.caught_up_at = time.monotonic()
        return read

    def _parked(self, partition: int, error: SchemaTooNew) -> None:
        """A partition whose log holds an event a newer release wrote: its projections stay
        where they are (nothing past its checkpoint is applied or acknowledged) until a
        projector of that release takes over. Said in the log once per partition."""
        if self._parked_at.get(partition) != str(error):
            log.error(
                "partition parked: its log holds an event of a newer schema",
                partition=partition,
                error=str(error),
            )
            self._parked_at[partition] = str(error)

    def _guarded(self, name: str, partition: int, handle: Handler) -> Handler:
        """``handle``, made to pass over the log entries it cannot apply (planted, corrupt,
        or of a corrupt match log), each with a log line saying why, instead of failing the
        batch again and again: the partition's projections go on. Redis being away is no
        reason to pass over anything: that fails the batch, to be tried again; nor is an
        event a newer release wrote, which parks the partition (``_parked``)."""

        async def guarded(entries: Sequence[tuple[str, Recorded]]) -> Sequence[WriteOp]:
            try:
                return await handle(entries)
            except UNREACHABLE:
                raise
            except Exception:  # which entry is at fault? the batch again, one at a time
                self._forget()
            ops: list[WriteOp] = []
            for entry in entries:
                try:
                    ops.extend(await handle([entry]))
                except UNREACHABLE:
                    raise
                except SchemaTooNew:
                    raise
                except Exception as e:
                    position, record = entry
                    log.error(
                        "log entry passed over: it cannot be applied",
                        projection=name,
                        partition=partition,
                        position=position,
                        match_id=record.match_id[:200],
                        version=record.version,
                        error=repr(e)[:500],
                    )
                    self._forget()
            return ops

        return guarded

    async def readiness(self) -> str | None:
        """None while the projector follows the logs (a round of catching up ended within
        FOLLOWING_S); else why not."""
        return fresh(self.caught_up_at, FOLLOWING_S, "a round of following the logs")

    def members(self, partition: int) -> list[tuple[str, Handler]]:
        """Every projection of a partition with its handler, in the order each batch is
        applied (the archive queue, when there is one, last: services/projections/archiver.py)."""
        members: list[tuple[str, Handler]] = [
            (name, self._guarded(name, partition, functools.partial(self._handle, name, partition)))
            for name in (self.summary, self.results)
        ]
        members += [
            (f.name, self._guarded(f.name, partition, functools.partial(f.handle, partition)))
            for f in self.also
        ]
        return members

    async def rebuild(self) -> int:
        """Reset every projection in every partition and fold every match's log again, live
        and archived (services/projections/rebuild.py); return how many events were folded."""
        self._forget()
        folded = await rebuild_from_matches(
            self.store,
            self.checkpoints,
            self.members,
            archive=self.archive,
            not_archived=frozenset((self.summary, QUEUE)),
        )
        self._forget()
        return folded

    async def catch_up_held(self, leases: PartitionLeases) -> int:
        """One round of a projector that shares the partitions with others: renew its leases
        and take its share (services/core/leases.py), then apply what is new in each partition
        it holds, :data:`ROUND_LIMIT` entries of each at most; return how many were read.

        Another projector writing the same partition (this one was too slow to renew, say) is
        refused by the checkpoints' expected position, and nothing it read is applied twice."""
        before = set(leases.owned)
        held = await leases.refresh()
        if leases.gained:
            log.info("partitions taken", partitions=sorted(leases.gained), held=sorted(held))
        if lost := before - held:
            log.info("partitions given up", partitions=sorted(lost), held=sorted(held))
            self._forget()  # their matches are another projector's to remember now
        return await self.catch_up(sorted(held), limit=ROUND_LIMIT)

    async def run(
        self, stop: asyncio.Event, interval: float = 0.2, leases: PartitionLeases | None = None
    ) -> None:
        """Follow the logs until ``stop`` is set, a batch every ``interval`` seconds (fewer,
        larger batches write each live match's summary once per batch): every partition's, or
        with ``leases`` those held (:meth:`catch_up_held`), given back when it stops."""
        if leases is None:
            await follow(self.catch_up, stop, interval)
            return
        try:
            held_round = functools.partial(self.catch_up_held, leases)
            await follow(held_round, stop, interval, again=lambda: self.cut_short)
        finally:
            with contextlib.suppress(Exception):  # unreturned leases run out by themselves
                await leases.release_all()

    async def _fold(self, record: Recorded) -> tuple[MatchState, Envelope]:
        """The match state right after ``record``, and the record decoded."""
        state = await self.matches.at(record.match_id, record.version - 1)
        env = JSON.decode_envelope(record.data)
        state = evolve(state, env.event)
        self.matches.stored(record.match_id, state)
        return state, env

    async def _handle(
        self, name: str, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        if name == self.results:
            return await self._results(name, partition, entries)
        latest: dict[str, tuple[MatchState, float]] = {}
        for _, record in entries:
            state, env = await self._fold(record)
            latest[record.match_id] = (state, env.ts)
        ops: list[WriteOp] = []
        for match_id, (state, ts) in latest.items():
            ops.extend(self._summary_ops(name, partition, match_id, state, ts))
        return ops

    async def _results(
        self, name: str, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        """Only a match's first and last events matter here: no need to fold the rest."""
        ops: list[WriteOp] = []
        for _, record in entries:
            ends = await self.bookends.see(record)
            if ends is not None:
                ops.extend(result_ops(self.checkpoints, name, partition, ends))
        return ops

    def _summary_ops(
        self, name: str, partition: int, match_id: str, state: MatchState, ts: float
    ) -> list[WriteOp]:
        view = public_view(state)
        over = state.phase == "over"
        summary = Summary(
            match_id=match_id,
            status="finished" if over else "live",
            family=state.rules.family,
            players=state.players,
            round=state.round,
            version=state.version,
            scores=view.scores,
            turn=view.turn,
            ends=tuple((e.end, e.number) for e in view.ends),
            winner=state.result.winner if state.result else None,
            updated=ts,
            reason=state.result.reason if state.result else None,
        )
        key = self.checkpoints.key
        ops = [op("HSET", key(name, partition, "matches"), match_id, JSON.encode(summary))]
        if over:
            ops.append(op("ZREM", key(name, partition, "live"), match_id))
            ops.append(op("ZADD", key(name, partition, "finished"), ts, match_id))
        else:
            ops.append(op("ZADD", key(name, partition, "live"), ts, match_id))
        return ops


class Named(msgspec.Struct, frozen=True, kw_only=True):
    """An account's name as of a match's end (the latest, across partitions, is shown)."""

    name: str
    ts: float


_NAME = msgspec.json.Encoder()

RESULT_STATS = ("played", "won", "points_for", "points_against", "aborted", "cancelled")
"""What the results table counts for each key: matches played to an end, won, points for
and against (a side's final score, and the other sides' together), and matches called off."""


def result_ops(checkpoints: Checkpoints, name: str, partition: int, ends: Ends) -> list[WriteOp]:
    """The results table's writes for one finished match: each seat's line, under its key
    (:func:`services.projections.identity.seat_key`), and each account's name as of this
    match, so the table shows the name an account last played as."""
    created, end = ends.created, ends.ended
    table = checkpoints.key(name, partition, "table")
    names = checkpoints.key(name, partition, "names")
    ops: list[WriteOp] = []
    total = sum(end.scores)
    for seat, player in enumerate(created.players):
        key = seat_key(seat, created.players, created.bots, created.accounts)
        if kind_of(key) == "account":
            ops.append(op("HSET", names, key, _NAME.encode(Named(name=player, ts=ends.ts))))
        if end.winner is None:  # called off: counted as such, not as played
            ops.append(op("HINCRBY", table, f"{key}|{end.reason}", 1))
            continue
        side = created.rules.side_of(seat)
        ops.append(op("HINCRBY", table, f"{key}|played", 1))
        ops.append(op("HINCRBY", table, f"{key}|won", int(side == end.winner)))
        ops.append(op("HINCRBY", table, f"{key}|points_for", end.scores[side]))
        ops.append(op("HINCRBY", table, f"{key}|points_against", total - end.scores[side]))
    return ops
