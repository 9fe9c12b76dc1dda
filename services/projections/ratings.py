"""Ratings by player name in each game: every finished match, folded with a team-aware model.

Ratings depend on the order matches are rated in, and the partitions' notification logs have no
common order; a projection that updated ratings as each partition's log came in would give a
different table live than rebuilt. So the projection keeps what is order-free — one result per
finished match, written in the same atomic commit as the log position (like the other
projections) — and the table is a pure fold of those results in the order the matches ended
(their ``match_ended`` time, the match id breaking ties). Live or rebuilt from the log, the
results are the same set, and so is the table.

Express and Straight are different games — a bot can be strong at one and weak at the other —
so a name has one rating per family. The model is openskill's Plackett-Luce with its defaults:
each side is a team (partners, C3, are one team of two players), sides are ranked by the match
(the winner first, then by final score), and every player of a team gets the update of the
team's result. A name seated on more than one side of a match (a bot against itself) leaves
that match unrated: it says nothing about that name.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence

import msgspec
import structlog
from openskill.models import PlackettLuce, PlackettLuceRating

from events.model import MatchCreated, MatchEnded
from services.projections.projector import Bookends, follow
from services.redis.connection import Client
from services.store.base import EventStore, Recorded
from services.store.projection import Checkpoints, ProjectionConflict, WriteOp, catch_up, op

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


class Rating(msgspec.Struct, frozen=True, kw_only=True):
    """One name's line of a family's table: the model's estimate and what it is based on."""

    family: str
    name: str
    mu: float
    sigma: float
    ordinal: float  # mu - 3 sigma: the rating to rank by
    rated: int  # matches that counted
    won: int


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


def rate(results: Iterable[MatchResult], model: PlackettLuce | None = None) -> list[Rating]:
    """The tables after rating ``results`` in the order the matches ended: by family, best
    first."""
    model = model or PlackettLuce()
    Key = tuple[str, str]  # (family, name)
    ratings: dict[Key, PlackettLuceRating] = {}
    rated: dict[Key, int] = {}
    won: dict[Key, int] = {}
    for result in sorted(results, key=lambda r: (r.ended, r.match_id)):
        if result.winner is None:
            continue  # called off: no result to rate
        teams: list[list[Key]] = [[] for _ in result.scores]
        for name, side in zip(result.players, result.sides, strict=True):
            teams[side].append((result.family, name))
        sides_of: dict[Key, set[int]] = {}
        for side, team in enumerate(teams):
            for key in team:
                sides_of.setdefault(key, set()).add(side)
        if any(len(s) > 1 for s in sides_of.values()):
            continue  # a name on two sides: the match says nothing about it
        for key in sides_of:
            if key not in ratings:
                ratings[key] = model.rating(name=key[1])
                rated[key] = won[key] = 0
        # a partner with the same name appears twice in its team: both get the same update
        ranks = [float(r) for r in ranks_of(result)]
        new = model.rate([[ratings[k] for k in team] for team in teams], ranks=ranks)
        for side, team in enumerate(teams):
            for key, rating in zip(team, new[side], strict=True):
                ratings[key] = rating
        for key, (side,) in sides_of.items():
            rated[key] += 1
            won[key] += side == result.winner
    table = [
        Rating(
            family=key[0],
            name=key[1],
            mu=r.mu,
            sigma=r.sigma,
            ordinal=r.ordinal(),
            rated=rated[key],
            won=won[key],
        )
        for key, r in ratings.items()
    ]
    return sorted(table, key=lambda row: (row.family, -row.ordinal, row.name))


class RatingsProjector:
    """Keeps every finished match's result, per partition, in step with the notification log.

    ``run`` follows the logs, ``catch_up`` applies what is new once, ``rebuild`` resets and
    refolds from the start — the shape of :class:`services.projector.Projector`.
    """

    def __init__(self, store: EventStore, checkpoints: Checkpoints, *, name: str = NAME) -> None:
        self.store = store
        self.checkpoints = checkpoints
        self.name = name
        self.bookends = Bookends(store)

    def results_key(self, partition: int) -> str:
        """The hash of a partition's results: match id → MatchResult JSON."""
        return self.checkpoints.key(self.name, partition, "results")

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
        """Reset the projection in every partition and fold the whole log again."""
        for p in range(self.store.partitions):
            await self.checkpoints.reset(self.name, p)
        self.bookends.forget()
        return await self.catch_up()

    async def run(self, stop: asyncio.Event, interval: float = 0.2) -> None:
        """Follow the logs until ``stop`` is set."""
        await follow(self.catch_up, stop, interval)

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
        return ops


async def read_results(redis: Client, projector: RatingsProjector) -> list[MatchResult]:
    """Every finished match's result the projection holds, across partitions."""
    out: list[MatchResult] = []
    for p in range(projector.store.partitions):
        raw = await redis.hgetall(projector.results_key(p))
        out.extend(_RESULT.decode(v) for v in raw.values())
    return out


async def ratings_table(redis: Client, projector: RatingsProjector) -> list[Rating]:
    """The ratings of every name, from the results the projection holds."""
    return rate(await read_results(redis, projector))
