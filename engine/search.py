"""Information-set search: determinized Monte Carlo on the fast path, from one seat's view.

The strategy knows only what its seat may know (C8): the :class:`events.view.View` it is given.
From it, :func:`observe` works out the hard facts about the tiles it cannot see:

* the hidden tiles are the whole set less its own hand and the tiles on the line;
* each other seat holds exactly ``hand_sizes[k]`` of them and the stock ``stock_size``;
* a seat holds no tile showing a number in its ``voids`` (a pass, or a play after drawing,
  showed it had none of the open numbers, E1/S3);
* in the first round of an Express match the lead was forced (E2): no hand held a higher
  double than a double lead, and none held a double or a heavier tile than a single lead, so
  those tiles are sleeping in the stock.

A :class:`Sampler` deals the hidden tiles uniformly at random among all the deals that agree
with those facts (exactly: it counts the deals once per move, then draws from the count), and
each such deal — a determinization — is a complete :class:`engine.fast.FastState`. For every
determinization the search plays each legal move and then the rest of the round at random
(:func:`engine.fast_playout.playout`), and scores the move by what its side gained minus
what the other sides gained on average: round points in Express, play and round points in
Straight. It keeps dealing until its time budget is spent and plays the move with the best
mean. All moves share each determinization, so they are compared on the same deals.

Nothing here reads the environment or keeps a log; the clock is a constructor parameter so a
test can drive it. With a fixed number of samples (``max_samples``) the move is a function of
the seed and the view alone; with a time budget, of the seed, the view and the clock's readings.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import factorial

from engine.board import END_INDEX
from engine.fast import (
    DRAW,
    LEAD_END,
    LEFT,
    PASS,
    RIGHT,
    SPINNER_LEAD,
    UP,
    FastState,
    Tables,
    tables,
)
from engine.fast_playout import playout
from engine.tiles import tile, weight
from events.model import DrawTile, Move, PassTurn, PlayTile
from events.view import View
from events.vocabulary import Rules, Tile

DEFAULT_BUDGET_MS = 20.0
"""The default time to think per move, in milliseconds."""

STOCK = -1
"""The destination of a hidden tile that sleeps in the stock (or boneyard) rather than a hand."""


class ObservationError(ValueError):
    """Raised when a view cannot be searched: no seat or hand, or hidden counts that do not
    add up to the tiles unaccounted for."""


# ---------------------------------------------------------------------------------------------
# what the seat knows


@dataclass(frozen=True, slots=True)
class Observation:
    """The hard facts a seat's view gives about the hidden tiles, as fast-path masks.

    ``sizes[k]`` is how many hidden tiles seat ``k`` holds (0 for the seat itself);
    ``forbidden[k]`` the tiles seat ``k`` cannot hold (its voids); ``sleeping`` the tiles that
    must be in the stock (E2's forced first lead). ``board`` is the round on the table with
    empty hands and stock: a determinization fills them in.
    """

    rules: Rules
    seat: int
    tab: Tables
    hand: int
    hidden: int
    sizes: tuple[int, ...]
    stock_size: int
    forbidden: tuple[int, ...]
    sleeping: int
    board: FastState

    def admits(self, hands: Sequence[int], stock: int) -> bool:
        """Whether a deal of the hidden tiles (other hands by seat, the stock) agrees with
        every fact: the seat's own hand, sizes, voids and sleeping tiles."""
        if hands[self.seat] != self.hand:
            return False
        seen = stock
        if stock.bit_count() != self.stock_size or stock & self.sleeping != self.sleeping:
            return False
        for k, h in enumerate(hands):
            if k == self.seat:
                continue
            if h.bit_count() != self.sizes[k] or h & self.forbidden[k] or h & seen:
                return False
            seen |= h
        return seen == self.hidden


def observe(view: View) -> Observation:
    """What ``view`` (a seat's view on its turn) says about the hidden tiles and the board.

    Raises ObservationError if the view has no seat and hand or its counts do not add up.
    """
    seat = view.seat
    hand_tiles = view.hand
    if seat is None or hand_tiles is None:
        raise ObservationError("a spectator's view has no hand to search from")
    rules = view.rules
    tab = tables(rules.top)
    played = view.played
    hand = tab.mask_of(hand_tiles)
    on_line = tab.mask_of(played)
    hidden = tab.full & ~hand & ~on_line
    sizes = tuple(0 if k == seat else n for k, n in enumerate(view.hand_sizes))
    if sum(sizes) + view.stock_size != hidden.bit_count():
        raise ObservationError(
            f"{hidden.bit_count()} tiles unseen but {sum(sizes)} in other hands and "
            f"{view.stock_size} in the stock"
        )
    mask = tab.mask
    forbidden = []
    for k, numbers in enumerate(view.voids):
        f = 0
        if k != seat:
            for n in numbers:
                f |= mask[n]
        forbidden.append(f & hidden)
    sleeping = _forced_lead_sleepers(rules, tab, view.round, played) & hidden
    board = _board(view, seat, rules, tab)
    return Observation(
        rules=rules,
        seat=seat,
        tab=tab,
        hand=hand,
        hidden=hidden,
        sizes=sizes,
        stock_size=view.stock_size,
        forbidden=tuple(forbidden),
        sleeping=sleeping,
        board=board,
    )


def _forced_lead_sleepers(rules: Rules, tab: Tables, round_no: int, played: Sequence[Tile]) -> int:
    """Tiles E2 proves were dealt to nobody: in an Express match's first round the leader led
    the highest double dealt, or with no double dealt the heaviest tile."""
    if rules.family != "express" or round_no != 1 or not played:
        return 0
    lead = tile(*played[0])
    out = 0
    for i, t in enumerate(tab.tiles):
        if lead[0] == lead[1]:
            if t[0] == t[1] and t[0] > lead[0]:
                out |= 1 << i
        elif t[0] == t[1] or weight(t) > weight(lead):
            out |= 1 << i
    return out


def _board(view: View, seat: int, rules: Rules, tab: Tables) -> FastState:
    """The round on the table as a fast state with empty hands: ends, tips, spinner (S2)."""
    s = FastState.from_masks(rules, [0] * rules.players, (), view.leader, -1, view.scores)
    s.turn = seat if view.turn is None else view.turn
    played = view.played
    s.board_tiles = len(played)
    if not played:
        if rules.family == "express" and view.round == 1 and len(view.legal) == 1:
            move = view.legal[0]  # E2: the first round's lead is forced
            if isinstance(move, PlayTile):
                s.forced = tab.index[tile(*move.tile)]
        return s
    closed = tab.closed
    nums = [closed] * 4
    tips = [False] * 4
    for end in view.ends:
        i = END_INDEX[end.end]
        nums[i] = end.number
        tips[i] = end.double
    s.nums = nums
    s.tips = tips
    s.arm = [1, 1, 0, 0]  # only differences of long arms and the crosswise arms' use matter
    if view.spinner is None:
        return s
    spin = view.spinner[0]
    s.spinner = spin
    if nums[UP] == closed:
        # not covered yet: the long ends still showing the spinner itself are its bare sides
        bare = [e for e in (LEFT, RIGHT) if nums[e] == spin and tips[e]]
        if tile(*played[0]) == (spin, spin):
            s.spinner_arm = SPINNER_LEAD
            for e in bare:
                s.arm[e] = 0
        elif bare:
            s.spinner_arm = bare[0]
            s.spinner_at = s.arm[bare[0]]
        return s
    # open crosswise sides: each counts (S4) only once a tile lies there
    for end in view.ends:
        if end.end in ("up", "down"):
            s.arm[END_INDEX[end.end]] = end.tiles
    return s


# ---------------------------------------------------------------------------------------------
# dealing the hidden tiles


@dataclass(slots=True)
class Sampler:
    """Deals the hidden tiles of an :class:`Observation` uniformly among the deals it admits.

    Tiles are grouped by where they may go (which hands, the stock); the number of deals is
    counted once by placing the groups one at a time against the room left in each place, and
    every sample walks the same count: how many of a group go where is drawn in proportion to
    the deals it leaves, then which of the group's tiles go is a shuffle.
    """

    obs: Observation
    places: tuple[int, ...] = ()  # seats with hidden tiles, then STOCK
    groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()  # (tiles, allowed places)
    total: int = 0  # how many deals agree with the observation
    _splits: dict[tuple[int, tuple[int, ...]], tuple[list[tuple[int, ...]], list[int]]] = field(
        default_factory=dict
    )
    _ways: dict[tuple[int, tuple[int, ...]], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        obs = self.obs
        seats = [k for k, n in enumerate(obs.sizes) if n > 0]
        self.places = (*seats, STOCK)
        by_allowed: dict[tuple[int, ...], list[int]] = {}
        hidden = obs.hidden
        while hidden:
            low = hidden & -hidden
            hidden ^= low
            allowed = tuple(
                j
                for j, place in enumerate(self.places)
                if (place == STOCK or not (low & (obs.forbidden[place] | obs.sleeping)))
            )
            by_allowed.setdefault(allowed, []).append(low.bit_length() - 1)
        # the freest group last: it only has to fill what is left, in one way
        self.groups = tuple(
            (tuple(tiles_), allowed)
            for allowed, tiles_ in sorted(by_allowed.items(), key=lambda kv: (len(kv[0]), kv[0]))
        )
        self.total = self._count(0, self._room())

    def _room(self) -> tuple[int, ...]:
        obs = self.obs
        return tuple(obs.stock_size if p == STOCK else obs.sizes[p] for p in self.places)

    def _count(self, g: int, room: tuple[int, ...]) -> int:
        """Deals of groups ``g`` onwards into ``room`` (hidden tiles are distinct)."""
        if g == len(self.groups):
            return 1 if not any(room) else 0
        key = (g, room)
        if key not in self._ways:
            weights = self._split_table(g, room)[1]
            self._ways[key] = weights[-1] if weights else 0
        return self._ways[key]

    def _split_table(
        self, g: int, room: tuple[int, ...]
    ) -> tuple[list[tuple[int, ...]], list[int]]:
        """The ways group ``g`` can split over the places it may go, with the cumulative count
        of deals each leaves."""
        key = (g, room)
        cached = self._splits.get(key)
        if cached is not None:
            return cached
        tiles_, allowed = self.groups[g]
        n = len(tiles_)
        splits: list[tuple[int, ...]] = []
        weights: list[int] = []
        acc = 0
        for split in _compositions(n, [room[j] if j in allowed else 0 for j in range(len(room))]):
            rest = tuple(r - x for r, x in zip(room, split, strict=True))
            ways = self._count(g + 1, rest)
            if ways:
                multinomial = factorial(n)
                for x in split:
                    multinomial //= factorial(x)
                acc += multinomial * ways
                splits.append(split)
                weights.append(acc)
        self._splits[key] = (splits, weights)
        return splits, weights

    def deal(self, rng: random.Random) -> tuple[list[int], list[int]]:
        """One deal: every seat's hand mask (its own included) and the stock, in a random
        drawing order. Raises ObservationError if no deal agrees with the observation."""
        if not self.total:
            raise ObservationError("no deal of the hidden tiles agrees with the view")
        obs = self.obs
        hands = [0] * len(obs.sizes)
        hands[obs.seat] = obs.hand
        stock: list[int] = []
        room = self._room()
        places = self.places
        for g, (tiles_, _) in enumerate(self.groups):
            splits, weights = self._split_table(g, room)
            pick = rng.randrange(weights[-1])
            lo, hi = 0, len(weights) - 1
            while lo < hi:  # the first cumulative count above the pick
                mid = (lo + hi) // 2
                if weights[mid] > pick:
                    hi = mid
                else:
                    lo = mid + 1
            split = splits[lo]
            order = list(tiles_)
            rng.shuffle(order)
            at = 0
            for j, x in enumerate(split):
                if not x:
                    continue
                part = order[at : at + x]
                at += x
                if places[j] == STOCK:
                    stock.extend(part)
                else:
                    m = 0
                    for i in part:
                        m |= 1 << i
                    hands[places[j]] |= m
            room = tuple(r - x for r, x in zip(room, split, strict=True))
        rng.shuffle(stock)
        return hands, stock

    def determinize(self, rng: random.Random) -> FastState:
        """The board with one deal of the hidden tiles: a complete round to search."""
        hands, stock = self.deal(rng)
        s = self.obs.board.copy()
        s.hands = hands
        s.stock = tuple(stock)
        return s


def _compositions(n: int, caps: Sequence[int]) -> list[tuple[int, ...]]:
    """Every way to write ``n`` as a sum of parts, part ``j`` at most ``caps[j]``."""
    out: list[tuple[int, ...]] = []
    parts = [0] * len(caps)

    def fill(j: int, left: int) -> None:
        if j == len(caps) - 1:
            if left <= caps[j]:
                parts[j] = left
                out.append(tuple(parts))
            return
        for x in range(min(left, caps[j]) + 1):
            parts[j] = x
            fill(j + 1, left - x)

    if caps:
        fill(0, n)
    return out


# ---------------------------------------------------------------------------------------------
# the strategy


def move_code(tab: Tables, move: Move) -> int:
    """The fast-path code of a move (see :mod:`engine.fast`)."""
    if isinstance(move, DrawTile):
        return DRAW
    if isinstance(move, PassTurn):
        return PASS
    i = tab.index[tile(*move.tile)]
    return i << 3 | (LEAD_END if move.end is None else END_INDEX[move.end])


@dataclass(frozen=True, slots=True)
class Thought:
    """What the last search found: deals tried, time taken, and each legal move's mean value
    (in the order of ``view.legal``)."""

    samples: int
    seconds: float
    values: tuple[float, ...]


class SearchStrategy:
    """Determinized Monte Carlo search within a time budget per move (see the module doc).

    ``budget_ms`` bounds the time to think (None: no time limit); ``max_samples`` bounds the
    deals tried (None: as many as the budget allows; at least one is always tried); ``clock``
    returns seconds.
    """

    name = "search"

    def __init__(
        self,
        seed: int | None = None,
        *,
        budget_ms: float | None = DEFAULT_BUDGET_MS,
        max_samples: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if budget_ms is None and max_samples is None:
            raise ValueError("give a time budget, a number of samples, or both")
        if budget_ms is not None and budget_ms <= 0:
            raise ValueError(f"the time budget must be positive, not {budget_ms} ms")
        if max_samples is not None and max_samples < 1:
            raise ValueError(f"at least one sample is needed, not {max_samples}")
        self.seed = seed
        self.budget_ms = budget_ms
        self.max_samples = max_samples
        self.clock = clock
        self._seeds = random.Random(seed)
        self.last: Thought | None = None

    def _rng(self, view: View) -> random.Random:
        """A generator for one move: from the seed and the position, so a move does not depend
        on how many numbers earlier moves drew."""
        if self.seed is None:
            return random.Random(self._seeds.getrandbits(64))
        return random.Random(f"{self.seed}:{view.round}:{len(view.played)}:{view.seat}:{view.hand}")

    def choose(self, view: View) -> Move:
        """The legal move with the best mean result over the deals searched."""
        clock = self.clock
        start = clock()
        legal = view.legal
        if not legal:
            raise ValueError("no legal move to choose from: it is not this seat's turn")
        if len(legal) == 1:
            self.last = Thought(0, clock() - start, (0.0,))
            return legal[0]
        obs = observe(view)
        sampler = Sampler(obs)
        rng = self._rng(view)
        codes = [move_code(obs.tab, m) for m in legal]
        totals = [0.0] * len(codes)
        base = view.scores
        side = obs.rules.side_of(obs.seat)
        sides = len(base)
        others = max(1, sides - 1)
        deadline = None if self.budget_ms is None else start + self.budget_ms / 1000
        cap = self.max_samples
        samples = 0
        while True:
            det = sampler.determinize(rng)
            for j, code in enumerate(codes):
                child = det.copy()
                child.apply_unchecked(code)
                scores = playout(child, rng).scores
                gain = scores[side] - base[side]
                rest = sum(scores) - sum(base) - gain
                totals[j] += gain - rest / others
            samples += 1
            if cap is not None and samples >= cap:
                break
            if deadline is not None and clock() >= deadline:
                break
        values = tuple(t / samples for t in totals)
        self.last = Thought(samples, clock() - start, values)
        best = max(
            range(len(legal)),
            key=lambda j: (values[j], view.legal_points[j], _heft(legal[j]), -j),
        )
        return legal[best]


def _heft(move: Move) -> tuple[int, int]:
    return weight(move.tile) if isinstance(move, PlayTile) else (-1, -1)


__all__ = [
    "DEFAULT_BUDGET_MS",
    "Observation",
    "ObservationError",
    "Sampler",
    "SearchStrategy",
    "Thought",
    "move_code",
    "observe",
]
