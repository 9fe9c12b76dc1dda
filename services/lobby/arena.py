"""Who plays whom, in which seats, and the standings: the pure engine of arenas and tournaments.

No I/O and no clock (the caller passes the time); any randomness comes from a seed, so a
schedule is the same every time it is computed from the same entrants and results.

**Entrants** are opaque keys: an account id, ``house:<pool>``, or a strategy's name. An entrant
plays one *side* of a table: alone at its seat, or with partners (C3) at both seats of its side
(seats 0 and 2, or 1 and 3: one account playing both, or one pool of house bots).

**Formats**:

- ``round_robin``: every group of entrants that fills a table (every pair, with two sides)
  meets ``games_per_pairing`` times. Each pass over the groups turns every group's sides one
  place, so over ``sides`` games of a group each entrant has played each side once. Rounds
  seat every entrant at most once.
- ``swiss``: ``rounds`` rounds; each groups the entrants with the nearest points who have met
  least (never a repeat while one can be avoided, as far as a bounded search can tell: always
  for pairs, nearly always for groups of three or four); ``games_per_pairing`` games a group,
  the sides turned; the entrants left over sit out with a bye, worth the points of a win,
  given to whoever has had fewest byes, then the lowest placed.
- ``arena``: timed; whenever enough entrants are idle, those with the nearest points are seated
  together, never with whoever they have just played unless nobody else is in the arena,
  until the time is up.

**Standings**: a win is 1 point and a loss 0; with three or four sides the winner gets 1 and
the others share out the rest by their final scores (rank ``r`` of ``n`` gets
``(n - 1 - r) / (n - 1)``; equal scores share their ranks' points). A match that ended without
a winner (aborted or cancelled) counts for nothing. Each line has the games, wins, points,
byes, scores for and against, and the Wilson 95% interval of the win rate.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from itertools import combinations, permutations, product
from typing import Any, Literal

import msgspec

from engine.rules import Rules

Format = Literal["round_robin", "swiss", "arena"]
FORMATS: tuple[Format, ...] = ("round_robin", "swiss", "arena")

BYE_POINTS = 1.0
"""A bye is worth a win."""

Z95 = 1.959964
"""The normal quantile of a two-sided 95% interval."""

_SEARCH_TRIES = 20_000
"""How many groups one search for a Swiss round may try before it settles for more meetings
again: a few milliseconds, and plenty for pairs; groups of three or four without any repeat
can be much harder to find (the social golfer problem), and then the round falls back on
:func:`_greedy`."""

_GREEDY_WINDOW = 20
"""How many of the nearest placed entrants the fallback considers for each group."""


class ArenaError(ValueError):
    """Raised when an arena or a tournament cannot be scheduled as asked: too few entrants for
    a table, an entrant named twice, or settings out of range."""


class Table(msgspec.Struct, frozen=True, kw_only=True):
    """The seats of every match of an event: 2-4 players, partners only with 4 (C3)."""

    players: int = 2
    partners: bool = False

    def __post_init__(self) -> None:
        if self.players not in (2, 3, 4):
            raise ArenaError(f"a table has 2, 3 or 4 players (C3), not {self.players}")
        if self.partners and self.players != 4:
            raise ArenaError("partners need exactly 4 players (C3)")

    @classmethod
    def of(cls, rules: Rules) -> Table:
        """The table of a rule set."""
        return cls(players=rules.players, partners=rules.partners)

    @property
    def sides(self) -> int:
        """How many sides play: 2 with partners, else one per seat."""
        return 2 if self.partners else self.players

    def side_of(self, seat: int) -> int:
        """The side a seat plays for: seats 0 and 2, and 1 and 3, with partners (C3)."""
        return seat % 2 if self.partners else seat

    def seating(self, by_side: Sequence[str]) -> tuple[str, ...]:
        """The entrant of each seat, from the entrant of each side."""
        if len(by_side) != self.sides:
            raise ArenaError(f"{len(by_side)} entrants for a table of {self.sides} sides")
        return tuple(by_side[self.side_of(seat)] for seat in range(self.players))


class Pairing(msgspec.Struct, frozen=True, kw_only=True):
    """One match to play: its round, its board in the round, and the entrant of each seat."""

    round: int
    board: int
    seats: tuple[str, ...]

    @property
    def id(self) -> str:
        """Unique within an event: ``<round>.<board>``."""
        return f"{self.round}.{self.board}"

    @property
    def entrants(self) -> tuple[str, ...]:
        """Each entrant once, in seat order."""
        return tuple(dict.fromkeys(self.seats))


class Round(msgspec.Struct, frozen=True, kw_only=True):
    """The matches of a round and the entrants given a bye in it (Swiss only)."""

    number: int
    pairings: tuple[Pairing, ...] = ()
    byes: tuple[str, ...] = ()


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """How a match ended, by entrant: who sat where, each seat's side, the winning side (None:
    aborted or cancelled) and the final score of each side."""

    seats: tuple[str, ...]
    sides: tuple[int, ...]
    winner: int | None
    scores: tuple[int, ...]

    @classmethod
    def of(
        cls, pairing: Pairing, table: Table, winner: int | None, scores: Sequence[int]
    ) -> Result:
        """The result of a pairing played at ``table``."""
        if len(scores) != table.sides:
            raise ArenaError(f"{len(scores)} scores for a table of {table.sides} sides")
        if winner is not None and not 0 <= winner < table.sides:
            raise ArenaError(f"no side {winner} at a table of {table.sides} sides")
        sides = tuple(table.side_of(seat) for seat in range(table.players))
        return cls(seats=pairing.seats, sides=sides, winner=winner, scores=tuple(scores))

    def entries(self) -> list[tuple[str, int]]:
        """Each entrant with each side it played, once: with partners a side is one entry."""
        return list(dict.fromkeys(zip(self.seats, self.sides, strict=True)))

    def points(self) -> tuple[float, ...]:
        """The points of each side (all 0 when nobody won); see the module's docstring."""
        n = len(self.scores)
        if self.winner is None:
            return (0.0,) * n
        points = [0.0] * n
        points[self.winner] = 1.0
        others = sorted((s for s in range(n) if s != self.winner), key=lambda s: -self.scores[s])
        rank = 1
        while others:
            tied = [s for s in others if self.scores[s] == self.scores[others[0]]]
            share = sum((n - 1 - r) / (n - 1) for r in range(rank, rank + len(tied))) / len(tied)
            for side in tied:
                points[side] = share
            rank += len(tied)
            others = others[len(tied) :]
        return tuple(points)


def wilson(wins: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``wins / n`` (95% for the default ``z``)."""
    if n == 0:
        return (0.0, 1.0)
    p = wins / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


class Standing(msgspec.Struct, frozen=True, kw_only=True):
    """One entrant's line of the standings."""

    entrant: str
    points: float = 0.0
    games: int = 0
    wins: int = 0
    byes: int = 0
    score_for: int = 0
    score_against: int = 0

    @property
    def score_difference(self) -> int:
        """Points scored in play less points conceded."""
        return self.score_for - self.score_against

    @property
    def rate(self) -> float:
        """The share of games won."""
        return self.wins / self.games if self.games else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """The Wilson 95% interval of the win rate."""
        return wilson(self.wins, self.games)

    def public(self) -> dict[str, Any]:
        """The line as JSON, with the win rate and its interval."""
        lo, hi = self.interval
        return {
            **msgspec.to_builtins(self),
            "score_difference": self.score_difference,
            "rate": self.rate,
            "interval": [lo, hi],
        }


def standings(
    results: Iterable[Result], byes: Iterable[str] = (), entrants: Iterable[str] = ()
) -> list[Standing]:
    """The standings over ``results`` and ``byes`` (one key per bye awarded), with a line for
    each of ``entrants`` even before it has played; ranked by points, then score difference,
    then wins, then key."""
    rows: dict[str, list[float]] = {e: [0.0, 0, 0, 0, 0, 0] for e in entrants}
    for result in results:
        if result.winner is None:
            continue
        points = result.points()
        total = sum(result.scores)
        for entrant, side in result.entries():
            row = rows.setdefault(entrant, [0.0, 0, 0, 0, 0, 0])
            row[0] += points[side]
            row[1] += 1
            row[2] += side == result.winner
            row[4] += result.scores[side]
            row[5] += total - result.scores[side]
    for entrant in byes:
        row = rows.setdefault(entrant, [0.0, 0, 0, 0, 0, 0])
        row[0] += BYE_POINTS
        row[3] += 1
    table = [
        Standing(
            entrant=e,
            points=r[0],
            games=int(r[1]),
            wins=int(r[2]),
            byes=int(r[3]),
            score_for=int(r[4]),
            score_against=int(r[5]),
        )
        for e, r in rows.items()
    ]
    return sorted(table, key=lambda s: (-s.points, -s.score_difference, -s.wins, s.entrant))


# -- seats ----------------------------------------------------------------------------------


def turned(lineup: Sequence[str], places: int) -> tuple[str, ...]:
    """The line-up turned ``places`` seats: seat ``i`` gets ``lineup[(i - places) mod n]``."""
    n = len(lineup)
    return tuple(lineup[(i - places) % n] for i in range(n))


def seatings(lineup: Sequence[str], games: int) -> list[tuple[str, ...]]:
    """A fixed line-up by seat for ``games`` games, turned one seat further each game: over
    ``n`` games everyone sits in every seat (and with partners, C3, the pairs swap sides)."""
    return [turned(lineup, k) for k in range(games)]


def _side_counts(results: Iterable[Result]) -> Counter[tuple[str, int]]:
    counts: Counter[tuple[str, int]] = Counter()
    for result in results:
        counts.update(result.entries())
    return counts


def _balanced(group: Sequence[str], counts: Counter[tuple[str, int]]) -> tuple[str, ...]:
    """The order of ``group`` by side that evens out the sides each entrant has played."""
    return min(
        permutations(group),
        key=lambda order: sum(counts[e, side] for side, e in enumerate(order)),
    )


def _seat_games(
    number: int,
    first_board: int,
    order: Sequence[str],
    table: Table,
    games: int,
    counts: Counter[tuple[str, int]],
) -> list[Pairing]:
    """``games`` pairings of one group, seated by side as ``order`` and then turned a side
    further each game; ``counts`` (sides played so far) is brought up to date."""
    out = []
    for g in range(games):
        by_side = turned(order, g)
        counts.update((e, side) for side, e in enumerate(by_side))
        out.append(Pairing(round=number, board=first_board + g, seats=table.seating(by_side)))
    return out


# -- orders ---------------------------------------------------------------------------------


def _check(entrants: Sequence[str], table: Table) -> None:
    if len(set(entrants)) != len(entrants):
        twice = sorted(e for e, n in Counter(entrants).items() if n > 1)
        raise ArenaError(f"entrants named more than once: {', '.join(twice)}")
    if len(entrants) < table.sides:
        raise ArenaError(f"{len(entrants)} entrants cannot fill a table of {table.sides} sides")


def _seeded(entrants: Sequence[str], seed: int | None) -> list[str]:
    """The entrants in seeding order: as given without a seed, else in an order drawn from the
    seed and each key (so an entrant leaving does not reorder the others)."""
    if seed is None:
        return list(entrants)
    return sorted(entrants, key=lambda e: (random.Random(f"{seed}\x00{e}").random(), e))


def _meetings(results: Iterable[Result]) -> Counter[frozenset[str]]:
    """How often each two entrants have been at the same table."""
    met: Counter[frozenset[str]] = Counter()
    for result in results:
        met.update(frozenset(p) for p in combinations(dict.fromkeys(result.seats), 2))
    return met


# -- round robin ----------------------------------------------------------------------------


def round_robin(
    entrants: Sequence[str], table: Table, games_per_pairing: int = 1, seed: int | None = None
) -> list[Round]:
    """Every round of a round robin: each group of ``table.sides`` entrants meets
    ``games_per_pairing`` times, once per pass over the groups, its sides turned one place
    each pass (so over ``sides`` passes everyone plays every side of every group once; within
    a pass the first seating of each group evens out the sides as far as it can). Raises
    ArenaError for too few or repeated entrants."""
    _check(entrants, table)
    if games_per_pairing < 1:
        raise ArenaError(f"games_per_pairing must be at least 1, not {games_per_pairing}")
    return list(_round_robin(tuple(entrants), table, games_per_pairing, seed))


@functools.lru_cache(maxsize=64)
def _round_robin(
    entrants: tuple[str, ...], table: Table, games: int, seed: int | None
) -> tuple[Round, ...]:
    order = _seeded(entrants, seed)
    k = table.sides
    rounds = _circle(order) if k == 2 else _packed(order, k)
    counts: Counter[tuple[str, int]] = Counter()
    first: dict[tuple[str, ...], tuple[str, ...]] = {}
    out = []
    for p in range(games):
        for r, groups in enumerate(rounds):
            number = p * len(rounds) + r + 1
            pairings: list[Pairing] = []
            for group in groups:
                if k == 2:  # the circle has seated the pairs already
                    first[group] = group
                elif group not in first:  # the seating that evens out the sides played so far
                    first[group] = _balanced(group, counts)
                pairings += _seat_games(
                    number, len(pairings), turned(first[group], p), table, 1, counts
                )
            out.append(Round(number=number, pairings=tuple(pairings)))
    return tuple(out)


def _circle(order: Sequence[str]) -> list[list[tuple[str, ...]]]:
    """The circle method: every pair once in n - 1 rounds (an odd field adds a rest, held
    still), each pair's sides alternating so that everyone plays each side as often as can
    be (within one game of even)."""
    ring: list[str | None] = [None, *order] if len(order) % 2 else list(order)
    n = len(ring)
    rounds: list[list[tuple[str, ...]]] = []
    for r in range(n - 1):
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        pairs = [(b, a) if (r if i == 0 else i) % 2 else (a, b) for i, (a, b) in enumerate(pairs)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def _packed(order: Sequence[str], k: int) -> list[list[tuple[str, ...]]]:
    """Every group of ``k`` packed into rounds: each round takes the groups whose entrants
    have most games still to play first, everyone at most once a round."""
    left = list(combinations(order, k))
    owed = Counter(e for group in left for e in group)
    rounds = []
    while left:
        left.sort(key=lambda g: -sum(owed[e] for e in g))
        busy: set[str] = set()
        this, rest = [], []
        for group in left:
            if busy.isdisjoint(group):
                this.append(group)
                busy.update(group)
            else:
                rest.append(group)
        owed.subtract(e for group in this for e in group)
        rounds.append(this)
        left = rest
    return rounds


# -- Swiss ----------------------------------------------------------------------------------


def swiss_round(
    number: int,
    entrants: Sequence[str],
    table: Table,
    results: Sequence[Result] = (),
    byes: Sequence[str] = (),
    *,
    games: int = 1,
    seed: int | None = None,
) -> Round:
    """Round ``number`` of a Swiss event among ``entrants`` (in seeding order) after
    ``results`` and ``byes``: groups of the nearest points, as few repeated meetings as can be,
    ``games`` games each with the sides turned; the spare entrants get byes. Raises ArenaError
    for too few or repeated entrants."""
    _check(entrants, table)
    k = table.sides
    points = {s.entrant: s.points for s in standings(results, byes, entrants)}
    seeding = {e: i for i, e in enumerate(_seeded(entrants, seed))}
    ranked = sorted(entrants, key=lambda e: (-points[e], seeding[e]))
    place = {e: i for i, e in enumerate(ranked)}
    had = Counter(byes)
    resting = sorted(ranked, key=lambda e: (had[e], points[e], -place[e]))[: len(ranked) % k]
    playing = [e for e in ranked if e not in resting]
    counts = _side_counts(results)
    pairings: list[Pairing] = []
    for group in _fewest_repeats(playing, k, _meetings(results)):
        order = _balanced(group, counts)
        pairings += _seat_games(number, len(pairings), order, table, games, counts)
    return Round(number=number, pairings=tuple(pairings), byes=tuple(resting))


def _fewest_repeats(
    ranked: list[str], k: int, met: Counter[frozenset[str]]
) -> list[tuple[str, ...]]:
    """``ranked`` cut into groups of ``k``: the fewest meetings again first (no two entrants
    who have met ``limit + 1`` times while a grouping within ``limit`` can be found), then the
    nearest places."""
    most = max((met[frozenset(p)] for p in combinations(ranked, 2)), default=0)
    for limit in range(most):
        blocked: dict[str, set[str]] = {e: set() for e in ranked}
        for a, b in combinations(ranked, 2):
            if met[frozenset((a, b))] > limit:
                blocked[a].add(b)
                blocked[b].add(a)
        found = _search(ranked, k, blocked, [_SEARCH_TRIES])
        if found is not None:
            return found
    return _greedy(ranked, k, met)


def _search(
    ranked: list[str], k: int, blocked: dict[str, set[str]], budget: list[int]
) -> list[tuple[str, ...]] | None:
    """Depth first: the best placed entrant with the nearest placed others none of whom it is
    ``blocked`` from; None when no such grouping exists (or the budget of tries is spent)."""
    if not ranked:
        return []
    head, rest = ranked[0], ranked[1:]
    mates = [e for e in rest if e not in blocked[head]]
    for others in combinations(mates, k - 1):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if any(b in blocked[a] for a, b in combinations(others, 2)):
            continue
        left = [e for e in rest if e not in others]
        here = set(left)
        if any(len(left) - 1 - len(blocked[e] & here) < k - 1 for e in left if blocked[e]):
            continue  # someone would be left with too few to meet
        found = _search(left, k, blocked, budget)
        if found is not None:
            return [(head, *others), *found]
    return None


def _greedy(ranked: list[str], k: int, met: Counter[frozenset[str]]) -> list[tuple[str, ...]]:
    """Best placed first, each with the nearest placed others it has met least; then two
    groups swap members wherever that makes fewer meetings again."""

    def again(group: Sequence[str]) -> int:
        return sum(met[frozenset(p)] for p in combinations(group, 2))

    groups: list[list[str]] = []
    left = list(ranked)
    while left:
        head, rest = left[0], left[1:]
        others = min(combinations(rest[:_GREEDY_WINDOW], k - 1), key=lambda o: again((head, *o)))
        groups.append([head, *others])
        left = [e for e in rest if e not in others]
    better = True
    while better:
        better = False
        for g, h in combinations(groups, 2):
            for i, j in product(range(k), range(k)):
                before = again(g) + again(h)
                g[i], h[j] = h[j], g[i]
                if again(g) + again(h) < before:
                    better = True
                else:
                    g[i], h[j] = h[j], g[i]
    place = {e: n for n, e in enumerate(ranked)}
    return [
        tuple(sorted(g, key=place.__getitem__))
        for g in sorted(groups, key=lambda g: min(place[e] for e in g))
    ]


# -- arena ----------------------------------------------------------------------------------


def arena_round(
    number: int,
    idle: Sequence[str],
    table: Table,
    results: Sequence[Result] = (),
    *,
    entrants: Collection[str] = (),
    seed: int | None = None,
) -> Round:
    """The matches to start now in a timed arena: ``idle`` entrants (in seeding order) seated
    with the nearest in points, never with an entrant of their last game unless ``entrants``
    (everyone in the arena) holds nobody else; ``results`` in the order they finished. Whoever
    cannot be seated waits."""
    if len(set(idle)) != len(idle):
        raise ArenaError("an idle entrant is named more than once")
    k = table.sides
    points = {s.entrant: s.points for s in standings(results, entrants=idle)}
    seeding = {e: i for i, e in enumerate(_seeded(idle, seed))}
    waiting = sorted(idle, key=lambda e: (-points[e], seeding[e]))
    last: dict[str, set[str]] = {}
    for result in results:
        players = set(result.seats)
        for e in players:
            last[e] = players - {e}
    rematch = len(set(entrants) | set(idle)) <= k

    def fresh(group: tuple[str, ...]) -> bool:
        return rematch or not any(b in last.get(a, ()) for a, b in permutations(group, 2))

    groups = []
    while len(waiting) >= k:
        head, rest = waiting[0], waiting[1:]
        found = next((o for o in combinations(rest, k - 1) if fresh((head, *o))), None)
        if found is None:
            waiting = rest
            continue
        groups.append((head, *found))
        waiting = [e for e in rest if e not in found]
    counts = _side_counts(results)
    pairings = [
        Pairing(round=number, board=b, seats=table.seating(_balanced(g, counts)))
        for b, g in enumerate(groups)
    ]
    return Round(number=number, pairings=tuple(pairings))


# -- an event in progress -------------------------------------------------------------------


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    """How an event is scheduled: its format and table; Swiss ``rounds``; ``games_per_pairing``
    (round robin and Swiss); an arena's ``duration_s``; the ``seed`` of the seeding order
    (None: the order entrants joined)."""

    format: Format
    table: Table = Table()
    rounds: int = 0
    games_per_pairing: int = 1
    duration_s: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ArenaError(f"unknown format {self.format!r}: choose {', '.join(FORMATS)}")
        if self.format == "swiss" and not 1 <= self.rounds <= 1000:
            raise ArenaError(f"a Swiss event has 1 to 1000 rounds, not {self.rounds}")
        if self.format == "arena" and not 0 < self.duration_s <= 30 * 86400:
            raise ArenaError(f"an arena lasts 0 to 30 days, not {self.duration_s} s")
        if not 1 <= self.games_per_pairing <= 1000:
            raise ArenaError(f"games_per_pairing must be 1 to 1000, not {self.games_per_pairing}")


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    """An event so far: ``roster``, everyone in it when it started (a round robin's schedule
    is theirs); ``present``, who is in it now (Swiss and arena entrants may join later); the
    rounds scheduled; the results by pairing id, in the order the matches finished; when it
    started (s)."""

    roster: tuple[str, ...]
    present: tuple[str, ...]
    rounds: tuple[Round, ...] = ()
    results: dict[str, Result] = {}
    started: float = 0.0

    def unfinished(self) -> list[Pairing]:
        """The pairings scheduled without a result yet."""
        return [p for r in self.rounds for p in r.pairings if p.id not in self.results]

    def byes(self) -> list[str]:
        """One key per bye given."""
        return [e for r in self.rounds for e in r.byes]

    def standings(self) -> list[Standing]:
        """The standings so far: a line for everyone who has been in the event, byes counted."""
        everyone = dict.fromkeys(self.roster + self.present)
        return standings(self.results.values(), self.byes(), everyone)


def ends_at(spec: Spec, progress: Progress) -> float | None:
    """When a timed arena stops pairing (None for the other formats)."""
    return progress.started + spec.duration_s if spec.format == "arena" else None


def over(spec: Spec, progress: Progress, now: float) -> bool:
    """Whether the event is over: every match it will have has been played."""
    if progress.unfinished():
        return False
    done = len(progress.rounds)
    if spec.format == "arena":
        return now >= progress.started + spec.duration_s
    if spec.format == "swiss":
        return done >= spec.rounds or len(progress.present) < spec.table.sides
    if len(progress.roster) < spec.table.sides:
        return True
    return done >= len(_round_robin(progress.roster, spec.table, spec.games_per_pairing, spec.seed))


def next_round(
    spec: Spec, progress: Progress, now: float, idle: Collection[str] | None = None
) -> Round | None:
    """The round to schedule now, or None when nothing is due: the event is over, a round is
    still in play (round robin and Swiss), or too few entrants are idle (an arena; ``idle``
    narrows who is, else every present entrant not at a table is). A round robin's round may
    be empty when its entrants have left: record it and ask again."""
    if over(spec, progress, now):
        return None
    number = len(progress.rounds) + 1
    results = list(progress.results.values())
    if spec.format == "arena":
        if now >= progress.started + spec.duration_s:
            return None
        busy = {e for p in progress.unfinished() for e in p.seats}
        free = [e for e in progress.present if e not in busy and (idle is None or e in idle)]
        found = arena_round(
            number, free, spec.table, results, entrants=progress.present, seed=spec.seed
        )
        return found if found.pairings else None
    if progress.unfinished():
        return None
    if spec.format == "swiss":
        return swiss_round(
            number,
            progress.present,
            spec.table,
            results,
            progress.byes(),
            games=spec.games_per_pairing,
            seed=spec.seed,
        )
    planned = _round_robin(progress.roster, spec.table, spec.games_per_pairing, spec.seed)
    here = set(progress.present)
    kept = tuple(p for p in planned[number - 1].pairings if here.issuperset(p.seats))
    return Round(number=number, pairings=kept)
