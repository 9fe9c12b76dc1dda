"""Ratings of accounts and house bot pools in each game: every finished match, folded with a
team-aware model.

Ratings depend on the order matches are rated in, and the partitions' notification logs have no
common order; a projection that updated ratings as each partition's log came in would give a
different table live than rebuilt. So the projection keeps what is order-free — one result per
finished match, written in the same atomic commit as the log position (like the other
projections) — and the table is a pure fold of those results in the order the matches ended
(their ``match_ended`` time, the match id breaking ties). Live or rebuilt from the log, the
results are the same set, and so is the table.

The results do not stay for ever: a :class:`Compacted` table holds the ratings as of a
checkpoint (a point of that order), and the results up to it leave Redis
(services/projections/compaction.py). The table is then the compacted one with the results
after its checkpoint rated on top, in the same order: what rating every result from the start
gives.

A rating belongs to an identity, not to a name (see :mod:`services.projections.identity`): an
account id, or ``house:<pool>`` for a pool of house bots; each row shows the account's latest
name or the pool's. A match with a guest at the table (a seat held by no account and no house
bot) is unrated, and so is a match called off (aborted or cancelled: no winner).

Express and Straight are different games — a bot can be strong at one and weak at the other —
so an identity has one rating per family. The model is openskill's Plackett-Luce with its
defaults: each side is a team (partners, C3, are one team of two players), sides are ranked by
the match (the winner first, then by final score), and every player of a team gets the update
of the team's result. An identity seated on more than one side of a match (a bot against
itself) leaves that match unrated: it says nothing about that identity.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec
import structlog
from openskill.models import PlackettLuce, PlackettLuceRating

from events.model import MatchCreated, MatchEnded
from services.projections.identity import rated, seat_key, shown_name
from services.projections.projector import Bookends, follow
from services.projections.rebuild import rebuild_from_matches
from services.redis.connection import Client
from services.redis.paging import Cursor, page
from services.store.archive import Archive
from services.store.base import EventStore, Recorded
from services.store.projection import Checkpoints, ProjectionConflict, WriteOp, catch_up, op
from services.store.source import LogReader

log = structlog.get_logger()

NAME = "ratings"
"""The projection's name (its keys are ``<prefix>:{pN}:proj:ratings:...``)."""


class MatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a finished match tells the ratings: who sat on which side and how it ended."""

    match_id: str
    ended: float  # the match_ended event's time, the order matches are rated in
    family: str
    players: tuple[str, ...]
    sides: tuple[int, ...]  # each seat's side
    winner: int | None  # the winning side; None: aborted or cancelled, unrated
    scores: tuple[int, ...]  # by side
    bots: tuple[str | None, ...] = ()  # each seat's house bot pool (MatchCreated.bots)
    accounts: tuple[str | None, ...] = ()  # each seat's account (MatchCreated.accounts)
    reason: str | None = None  # how it ended (MatchEnded.reason); None in results kept before

    def keys(self) -> list[str]:
        """Each seat's identity (:func:`services.projections.identity.seat_key`)."""
        return [
            seat_key(seat, self.players, self.bots, self.accounts)
            for seat in range(len(self.players))
        ]


class Rating(msgspec.Struct, frozen=True, kw_only=True):
    """One identity's line of a family's table: the model's estimate and what it is based on.

    ``key`` is the identity rated (an account id or ``house:<pool>``), ``name`` what it is shown
    as (the account's latest name, or the pool's)."""

    family: str
    name: str
    mu: float
    sigma: float
    ordinal: float  # mu - 3 sigma: the rating to rank by
    rated: int  # matches that counted
    won: int
    key: str = ""


_RESULT = msgspec.json.Decoder(MatchResult)
_ENCODE = msgspec.json.Encoder()


def result_of(match_id: str, created: MatchCreated, ended: MatchEnded, ts: float) -> MatchResult:
    """The ratings' record of a match from its first and last events."""
    rules = created.rules
    return MatchResult(
        match_id=match_id,
        ended=ts,
        family=rules.family,
        players=created.players,
        sides=tuple(rules.side_of(k) for k in range(rules.players)),
        winner=ended.winner,
        scores=ended.scores,
        bots=created.bots,
        accounts=created.accounts,
        reason=ended.reason,
    )


def ranks_of(result: MatchResult) -> list[int]:
    """Each side's place (0 best): the winner first, the others by final score, ties shared."""
    others = sorted(
        (-score for side, score in enumerate(result.scores) if side != result.winner),
    )
    return [
        0 if side == result.winner else 1 + others.index(-score)
        for side, score in enumerate(result.scores)
    ]


Key = tuple[str, str]
"""A rating's owner: (family, identity)."""


class RatingPoint(msgspec.Struct, frozen=True, kw_only=True):
    """One identity's rating in a family just after a rated match."""

    match_id: str
    ended: float
    family: str
    mu: float
    sigma: float
    ordinal: float


Checkpoint = tuple[float, str]
"""A point of the order matches are rated in: (the match_ended time, the match id)."""


def order_of(result: MatchResult) -> Checkpoint:
    """Where a result stands in the order matches are rated in."""
    return (result.ended, result.match_id)


class Compacted(msgspec.Struct, frozen=True, kw_only=True):
    """The ratings as of a checkpoint: every result up to ``through`` folded into ``table``.

    ``indexed`` is how far the folded results are in the archive's players' pages too (at most
    ``through``): results up to it may leave Redis. ``version`` counts the writes of the table,
    so a compactor that read an older one writes nothing."""

    version: int = 0
    through: Checkpoint | None = None
    indexed: Checkpoint | None = None
    table: tuple[Rating, ...] = ()

    def folded(self, result: MatchResult) -> bool:
        """Whether ``result`` is in the table already."""
        return self.through is not None and order_of(result) <= self.through


_COMPACTED = msgspec.json.Decoder(Compacted)
_CHECKPOINT = msgspec.json.Decoder(Checkpoint | None)


@dataclass(frozen=True, slots=True)
class Standings:
    """The ratings fold's outcome: the tables, how each identity's rating went, and the matches
    each identity (guests too) played."""

    table: list[Rating]  # by family, best first
    history: dict[str, list[RatingPoint]]  # identity -> its rating after each rated match
    played: dict[str, list[MatchResult]]  # identity -> its matches, in the order they ended


def rate(results: Iterable[MatchResult], model: PlackettLuce | None = None) -> list[Rating]:
    """The tables after rating ``results`` in the order the matches ended: by family, best
    first."""
    return standings(results, model).table


def standings(
    results: Iterable[MatchResult],
    model: PlackettLuce | None = None,
    start: Compacted | None = None,
) -> Standings:
    """Rate ``results`` in the order the matches ended, on top of the compacted table
    ``start`` (those it folded already are passed over): the tables (as :func:`rate`), and
    each identity's rating after every rated match it played and every match it played, after
    the checkpoint."""
    model = model or PlackettLuce()
    start = start or Compacted()
    ratings: dict[Key, PlackettLuceRating] = {}
    counted: dict[Key, int] = {}
    won: dict[Key, int] = {}
    names: dict[str, str] = {}  # identity → the name it is shown as, the latest seen
    history: dict[str, list[RatingPoint]] = {}
    played: dict[str, list[MatchResult]] = {}
    for row in start.table:
        member = (row.family, row.key)
        ratings[member] = model.rating(mu=row.mu, sigma=row.sigma, name=row.key)
        counted[member], won[member], names[row.key] = row.rated, row.won, row.name
    fresh = (r for r in results if not start.folded(r))
    for result in sorted(fresh, key=order_of):
        keys = result.keys()
        for key, played_as in zip(keys, result.players, strict=True):
            names[key] = shown_name(key, played_as)
        for key in dict.fromkeys(keys):
            played.setdefault(key, []).append(result)
        if result.winner is None or not all(rated(k) for k in keys):
            continue  # called off, or a guest at the table: unrated
        teams: list[list[Key]] = [[] for _ in result.scores]
        for key, side in zip(keys, result.sides, strict=True):
            teams[side].append((result.family, key))
        sides_of: dict[Key, set[int]] = {}
        for side, team in enumerate(teams):
            for member in team:
                sides_of.setdefault(member, set()).add(side)
        if any(len(s) > 1 for s in sides_of.values()):
            continue  # an identity on two sides: the match says nothing about it
        for member in sides_of:
            if member not in ratings:
                ratings[member] = model.rating(name=member[1])
                counted[member] = won[member] = 0
        # a pool partnered with itself appears twice in its team: both get the same update
        ranks = [float(r) for r in ranks_of(result)]
        new = model.rate([[ratings[k] for k in team] for team in teams], ranks=ranks)
        for side, team in enumerate(teams):
            for member, rating in zip(team, new[side], strict=True):
                ratings[member] = rating
        for member, (side,) in sides_of.items():
            counted[member] += 1
            won[member] += side == result.winner
            r = ratings[member]
            history.setdefault(member[1], []).append(
                RatingPoint(
                    match_id=result.match_id,
                    ended=result.ended,
                    family=result.family,
                    mu=r.mu,
                    sigma=r.sigma,
                    ordinal=r.ordinal(),
                )
            )
    table = [
        Rating(
            family=family,
            key=key,
            name=names[key],
            mu=r.mu,
            sigma=r.sigma,
            ordinal=r.ordinal(),
            rated=counted[family, key],
            won=won[family, key],
        )
        for (family, key), r in ratings.items()
    ]
    table.sort(key=lambda row: (row.family, -row.ordinal, row.name, row.key))
    return Standings(table=table, history=history, played=played)


class RatingsProjector:
    """Keeps every finished match's result, per partition, in step with the notification log.

    ``run`` follows the logs, ``catch_up`` applies what is new once, ``rebuild`` resets and
    refolds from the start — the shape of :class:`services.projector.Projector`.
    """

    def __init__(
        self,
        store: EventStore,
        checkpoints: Checkpoints,
        *,
        name: str = NAME,
        source: LogReader | None = None,
        archive: Archive | None = None,
    ) -> None:
        self.store = store
        self.checkpoints = checkpoints
        self.name = name
        self.archive = archive  # what a rebuild folds besides the matches in Redis
        self.bookends = Bookends(store if source is None else source)

    def results_key(self, partition: int) -> str:
        """The hash of a partition's results: match id → MatchResult JSON."""
        return self.checkpoints.key(self.name, partition, "results")

    def compacted_key(self) -> str:
        """The hash of the compacted table (``version``, ``table``, its ``indexed`` checkpoint
        alone, and the rating points ``pending`` for the players' pages): one key, in partition 0's
        slot, written only by the compactor (it is no data of a partition's projection, and a
        rebuild leaves it: the results it folded are passed over when read again)."""
        return self.checkpoints.key(self.name, 0, "compacted")

    def played_key(self, partition: int, identity: str) -> str:
        """The sorted set of the matches ``identity`` played that ended in a partition: match
        id, scored by when it ended (a player's page of recent matches reads only its own)."""
        return self.checkpoints.key(self.name, partition, "played", identity)

    async def catch_up(self) -> int:
        """Apply everything new in every partition's log; return how many entries."""
        applied = 0
        for p in range(self.store.partitions):
            try:
                applied += await catch_up(
                    self.store,
                    self.checkpoints,
                    self.name,
                    p,
                    functools.partial(self.handle, p),
                )
            except ProjectionConflict as e:
                log.warning("ratings moved by another writer; resuming", detail=str(e))
        return applied

    async def rebuild(self) -> int:
        """Reset the projection in every partition and fold every match's log again, live and
        archived (services/projections/rebuild.py)."""
        self.bookends.forget()
        folded = await rebuild_from_matches(
            self.store,
            self.checkpoints,
            lambda p: [(self.name, functools.partial(self.handle, p))],
            archive=self.archive,
        )
        self.bookends.forget()
        return folded

    async def run(self, stop: asyncio.Event, interval: float = 0.2) -> None:
        """Follow the logs until ``stop`` is set."""
        await follow(self.catch_up, stop, interval)

    def forget(self) -> None:
        """Drop the matches' first events remembered (read again when needed)."""
        self.bookends.forget()

    async def handle(
        self, partition: int, entries: Sequence[tuple[str, Recorded]]
    ) -> list[WriteOp]:
        """The writes for a batch of a partition's log entries: the results of matches that
        ended in it."""
        ops: list[WriteOp] = []
        for _, record in entries:
            ends = await self.bookends.see(record)
            if ends is not None:
                result = result_of(record.match_id, ends.created, ends.ended, ends.ts)
                ops.append(
                    op("HSET", self.results_key(partition), record.match_id, _ENCODE.encode(result))
                )
                for identity in dict.fromkeys(result.keys()):
                    ops.append(
                        op(
                            "ZADD",
                            self.played_key(partition, identity),
                            result.ended,
                            record.match_id,
                        )
                    )
        return ops


async def read_results(redis: Client, projector: RatingsProjector) -> list[MatchResult]:
    """Every finished match's result the projection holds, across partitions (those folded
    into the compacted table included, until they leave)."""
    out: list[MatchResult] = []
    for p in range(projector.store.partitions):
        raw = await redis.hgetall(projector.results_key(p))
        out.extend(_RESULT.decode(v) for v in raw.values())
    return out


async def read_compacted(redis: Client, projector: RatingsProjector) -> Compacted:
    """The compacted table (an empty one before the first compaction)."""
    raw = await redis.hget(projector.compacted_key(), "table")
    return Compacted() if raw is None else _COMPACTED.decode(raw)


async def read_indexed(redis: Client, projector: RatingsProjector) -> Checkpoint | None:
    """How far the compacted results are in the archive's players' pages (None: nothing is):
    one small field, read without the table."""
    raw = await redis.hget(projector.compacted_key(), "indexed")
    return None if raw is None else _CHECKPOINT.decode(raw)


async def read_standings(redis: Client, projector: RatingsProjector) -> Standings:
    """The ratings now: the compacted table, and the results after its checkpoint rated on top
    (the fold runs off the event loop)."""
    start = await read_compacted(redis, projector)
    results = await read_results(redis, projector)
    return await asyncio.to_thread(standings, results, None, start)


async def read_played(
    redis: Client,
    projector: RatingsProjector,
    identity: str,
    limit: int,
    before: Cursor | None = None,
) -> tuple[list[MatchResult], Cursor | None]:
    """A page of the matches ``identity`` played: the ``limit`` latest to end before
    ``before``, newest first, and the cursor of the page of older ones (None: none older).
    Reads at most ``limit`` ids of each partition's index, and the results of the page only."""
    partitions = projector.store.partitions
    indexes = [projector.played_key(p, identity) for p in range(partitions)]
    window, after = await page(redis, indexes, limit, before, newest_first=True)
    ids: dict[int, list[str]] = {}
    for match_id, _, p in window:
        ids.setdefault(p, []).append(match_id)
    found: list[MatchResult] = []
    for p, wanted in ids.items():
        rows = await redis.hmget(projector.results_key(p), wanted)
        found.extend(_RESULT.decode(row) for row in rows if row is not None)
    found.sort(key=lambda r: (r.ended, r.match_id), reverse=True)
    return found, after


async def ratings_table(redis: Client, projector: RatingsProjector) -> list[Rating]:
    """The ratings of every account and house pool: the compacted table and the results after
    it."""
    return (await read_standings(redis, projector)).table
