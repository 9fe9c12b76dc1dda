"""Information-set search: it deals only what the seat could not see, as the seat saw it, plays
only legal moves, keeps to its time budget and is repeatable from its seed."""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.fast import FastState
from engine.game import apply, legal_moves
from engine.rules import Rules
from engine.search import Observation, ObservationError, Sampler, SearchStrategy, observe
from engine.state import MatchState
from engine.tiles import full_set, tile, weight
from engine.views import View, view_for
from events.model import CreateMatch
from services.core.dealer import deal

pytestmark = pytest.mark.engine

RULE_SETS = [
    Rules.make(family, players=players, partners=partners, top=top)
    for family in ("express", "straight")
    for players, partners in ((2, False), (3, False), (4, False), (4, True))
    for top in (6, 9, 12)
]

games = st.tuples(st.sampled_from(RULE_SETS), st.integers(0, 2**32 - 1))
fast = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def positions(rules: Rules, seed: int, max_moves: int = 2000) -> Iterator[MatchState]:
    """Every position of a random match where a seat is to move (the state is live: use it
    before asking for the next)."""
    rng = random.Random(seed)
    players = tuple("abcd"[: rules.players])
    state, _ = apply(None, CreateMatch(rules=rules, players=players))
    for _ in range(max_moves):
        if state.phase == "over":
            return
        if state.phase == "dealing":
            state, _ = apply(state, deal(rules, rng))
            continue
        yield state
        state, _ = apply(state, rng.choice(legal_moves(state)))


def hidden_deal(state: MatchState, obs: Observation) -> tuple[list[int], int]:
    """The real hands and stock of a position, as the observation's masks."""
    tab = obs.tab
    return [tab.mask_of(h) for h in state.hands], tab.mask_of(state.stock)


def check_deal_against_view(view: View, hands: list[int], stock: list[int]) -> None:
    """A determinization agrees with the view, checked from the view's own fields."""
    tab = observe(view).tab
    seat = view.seat
    assert seat is not None and view.hand is not None
    dealt = [tab.tiles_of(h) for h in hands]
    assert sorted(dealt[seat]) == sorted(view.hand)
    assert [len(h) for h in dealt] == list(view.hand_sizes)
    assert len(stock) == view.stock_size
    everything = [t for h in dealt for t in h] + [tab.tiles[i] for i in stock] + list(view.played)
    assert sorted(tile(*t) for t in everything) == list(full_set(view.rules.top))
    for k, hand in enumerate(dealt):
        if k != seat:
            shown = {n for t in hand for n in t}
            assert not shown & set(view.voids[k]), (k, hand, view.voids[k])
    rules = view.rules
    if rules.family == "express" and view.round == 1 and view.played:
        lead = view.played[0]  # E2: the forced lead was the best tile any hand held
        for hand in dealt:
            for t in hand:
                if lead[0] == lead[1]:
                    assert not (t[0] == t[1] and t[0] > lead[0]), (lead, t)
                else:
                    assert t[0] != t[1] and weight(t) < weight(lead), (lead, t)


# ---------------------------------------------------------------------------------------------
# determinizations


@fast
@given(games, st.integers(0, 2**32 - 1))
def test_every_determinization_agrees_with_everything_the_seat_has_seen(
    game: tuple[Rules, int], sample_seed: int
) -> None:
    """Hands, sizes, stock, voids from passes and draws (E1, S3), E2's forced lead, the table."""
    rules, seed = game
    rng = random.Random(sample_seed)
    for n, state in enumerate(positions(rules, seed, max_moves=300)):
        if n % 3:
            continue
        view = view_for(state, state.turn)
        obs = observe(view)
        sampler = Sampler(obs)
        truth = FastState.from_match(state)
        for _ in range(3):
            det = sampler.determinize(rng)
            check_deal_against_view(view, det.hands, list(det.stock))
            assert (det.nums, det.tips, det.board_tiles) == (
                truth.nums,
                truth.tips,
                truth.board_tiles,
            )
            assert det.turn == state.turn and det.scores == state.scores


@fast
@given(games)
def test_the_real_deal_is_always_one_the_sampler_can_draw(game: tuple[Rules, int]) -> None:
    """What the search infers never rules out what is really there."""
    rules, seed = game
    for state in positions(rules, seed, max_moves=200):
        obs = observe(view_for(state, state.turn))
        hands, stock = hidden_deal(state, obs)
        assert obs.admits(hands, stock), state
        assert Sampler(obs).total > 0


def brute_force_deals(obs: Observation) -> set[tuple[int, ...]]:
    """Every deal of the hidden tiles to the other hands and the stock that the observation
    admits, found by trying them all: (hand masks by seat..., stock mask)."""
    others = [k for k in range(len(obs.sizes)) if k != obs.seat]
    hidden = obs.tab.tiles_of(obs.hidden)
    index = obs.tab.index
    out: set[tuple[int, ...]] = set()

    def place(k: int, left: list[tuple[int, int]], hands: list[int]) -> None:
        if k == len(others):
            stock = obs.tab.mask_of(left)
            if obs.admits(hands, stock):
                out.add((*hands, stock))
            return
        seat = others[k]
        for chosen in itertools.combinations(left, obs.sizes[seat]):
            mask = 0
            for t in chosen:
                mask |= 1 << index[t]
            rest = [t for t in left if t not in chosen]
            trial = hands[:]
            trial[seat] = mask
            place(k + 1, rest, trial)

    hands = [0] * len(obs.sizes)
    hands[obs.seat] = obs.hand
    place(0, hidden, hands)
    return out


def small_constrained_observations() -> Iterator[Observation]:
    """Late positions with voids and few enough hidden tiles to deal every way."""
    for rules in (Rules.make("express"), Rules.make("express", players=3)):
        found = 0
        for seed in range(200):
            for state in positions(rules, seed):
                obs = observe(view_for(state, state.turn))
                if any(obs.forbidden) and obs.hidden.bit_count() <= 9:
                    found += 1
                    yield obs
                    break
            if found == 2:
                break


def test_the_sampler_counts_the_deals_exactly_and_draws_each_equally_often() -> None:
    """Uniform over the deals that agree with the view: the count matches brute force, and
    the frequencies pass a chi-square test."""
    rng = random.Random(7)
    checked = 0
    for obs in small_constrained_observations():
        sampler = Sampler(obs)
        every = brute_force_deals(obs)
        assert sampler.total == len(every) > 1
        draws = 300 * len(every)
        seen: Counter[tuple[int, ...]] = Counter()
        for _ in range(draws):
            hands, stock = sampler.deal(rng)
            mask = 0
            for i in stock:
                mask |= 1 << i
            seen[(*hands, mask)] += 1
        assert set(seen) == every
        expected = draws / len(every)
        chi2 = sum((c - expected) ** 2 / expected for c in seen.values())
        df = len(every) - 1
        assert chi2 < df + 5 * (2 * df) ** 0.5, (chi2, df)
        checked += 1
    assert checked == 4


def test_a_view_whose_counts_do_not_add_up_is_refused() -> None:
    state = next(positions(Rules.make("straight", players=2), 1))
    view = view_for(state, state.turn)
    broken = msgspec.structs.replace(view, stock_size=view.stock_size + 1)
    with pytest.raises(ObservationError):
        observe(broken)
    with pytest.raises(ObservationError):
        observe(view_for(state, None))


def test_the_board_rebuilt_from_a_view_plays_exactly_like_the_table() -> None:
    """With the real hands put back, the view's board gives the reference's moves and points
    to the end of the round (S2's spinner, S4's counts), in every position."""
    rng = random.Random(3)
    total = 0
    for rules in RULE_SETS:
        for seed in range(2):
            for state in positions(rules, seed):
                total += 1
                obs = observe(view_for(state, state.turn))
                ours = obs.board.copy()
                ours.hands, _ = hidden_deal(state, obs)
                truth = FastState.from_match(state)
                ours.stock = truth.stock
                while not truth.over:
                    moves = truth.legal_moves()
                    assert ours.legal_moves() == moves
                    move = rng.choice(moves)
                    truth.apply(move)
                    ours.apply(move)
                    assert ours.last_points == truth.last_points
                assert (ours.outcome, ours.winner, ours.scores) == (
                    truth.outcome,
                    truth.winner,
                    truth.scores,
                )
    assert total > 1500


# ---------------------------------------------------------------------------------------------
# the strategy


def test_search_never_plays_an_illegal_move() -> None:
    """Thousands of positions of every family, player count and set."""
    seen = 0
    for n, rules in enumerate(RULE_SETS):
        bot = SearchStrategy(n, budget_ms=None, max_samples=1)
        for state in positions(rules, 100 + n):
            view = view_for(state, state.turn)
            assert bot.choose(view) in view.legal
            seen += 1
    assert seen > 3000


class StepClock:
    """A clock that moves on ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def branching_views(rules: Rules, count: int) -> list[View]:
    """Views of positions with at least two legal moves."""
    out = []
    for state in positions(rules, 11):
        view = view_for(state, state.turn)
        if len(view.legal) > 1:
            out.append(view)
            if len(out) == count:
                break
    return out


def test_search_stops_when_its_time_budget_is_spent() -> None:
    """The clock is read before the first deal and after each: with a clock that moves 1 ms a
    reading, a 20 ms budget buys 20 deals."""
    view = branching_views(Rules.make("express"), 1)[0]
    bot = SearchStrategy(1, budget_ms=20, clock=StepClock(0.001))
    bot.choose(view)
    assert bot.last is not None and bot.last.samples == 20
    capped = SearchStrategy(1, budget_ms=20, max_samples=5, clock=StepClock(0.001))
    capped.choose(view)
    assert capped.last is not None and capped.last.samples == 5
    with pytest.raises(ValueError):
        SearchStrategy(1, budget_ms=None)


class RecordingClock:
    """The real clock (``time.perf_counter``), keeping every reading."""

    def __init__(self) -> None:
        self.readings: list[float] = []

    def __call__(self) -> float:
        now = time.perf_counter()
        self.readings.append(now)
        return now


def test_search_keeps_to_its_budget_on_the_real_clock() -> None:
    """On the real clock, each move deals until the first reading at or past its budget and
    then stops: it never stops short, and runs over by at most the one deal's playouts that
    crossed the line. Checked on the clock's own readings, so a loaded machine, which makes
    deals slower, changes how many deals fit but not the rule."""
    budget = 10.0
    for rules in (Rules.make("express"), Rules.make("straight", players=2)):
        clock = RecordingClock()
        bot = SearchStrategy(2, budget_ms=budget, clock=clock)
        for view in branching_views(rules, 20):
            clock.readings.clear()
            bot.choose(view)
            assert bot.last is not None and bot.last.samples >= 1
            # the start, one reading after each deal, and the one that times the move
            start, *after_deals, timed = clock.readings
            assert len(after_deals) == bot.last.samples
            deadline = start + budget / 1000
            assert after_deals[-1] >= deadline
            assert all(at < deadline for at in after_deals[:-1])
            assert bot.last.seconds == timed - start >= budget / 1000


def test_search_is_a_function_of_its_seed_and_the_view() -> None:
    """With a number of deals instead of a clock, the same seed gives the same move and the
    same values, whatever the bot was asked before."""
    views = branching_views(Rules.make("straight", players=2), 12)
    first = SearchStrategy(5, budget_ms=None, max_samples=20)
    second = SearchStrategy(5, budget_ms=None, max_samples=20)
    ours = [(first.choose(v), first.last) for v in views]
    theirs = [(second.choose(v), second.last) for v in reversed(views)][::-1]
    assert [m for m, _ in ours] == [m for m, _ in theirs]
    assert [t.values for _, t in ours if t] == [t.values for _, t in theirs if t]
    other = SearchStrategy(6, budget_ms=None, max_samples=20)
    values = []
    for view in views:
        other.choose(view)
        assert other.last is not None
        values.append(other.last.values)
    assert values != [t.values for _, t in ours if t]


class HiddenInformation(AssertionError):
    """Raised when a strategy reaches for something its seat may not see."""


class SeatOnly:
    """A seat's view built from the whole match state: the view's fields are served, anything
    of the state beyond them — other hands, the stock, the history — raises."""

    def __init__(self, state: MatchState, seat: int) -> None:
        self._view = view_for(state, seat)
        self._state = state
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> object:
        if name in View.__struct_fields__:
            self.read.add(name)
            return getattr(self._view, name)
        if hasattr(self._state, name):
            raise HiddenInformation(f"the strategy read the state's {name!r}")
        raise AttributeError(name)


def redeal_hidden(state: MatchState, rng: random.Random) -> MatchState:
    """The same position with the tiles the seat to move cannot see dealt again among the other
    hands and the stock (same sizes): a different truth behind the same view."""
    other = state.copy()
    seat = state.turn
    others = [k for k in range(state.rules.players) if k != seat]
    pool = [t for k in others for t in state.hands[k]] + list(state.stock)
    while True:
        rng.shuffle(pool)
        at = 0
        for k in others:
            size = len(state.hands[k])
            other.hands[k] = set(pool[at : at + size])
            at += size
        other.stock = pool[at:]
        voided = any(
            n in t for k in others for t in other.hands[k] for n in state.voids[k]
        )  # keep the view's voids true
        if not voided:
            return other


def test_search_reads_nothing_its_seat_may_not_see() -> None:
    """On a view that raises if the match's hidden state is touched, search plays; and a
    different hidden truth behind the same view gives the very same search."""
    rng = random.Random(9)
    for rules in (Rules.make("express"), Rules.make("straight", players=2)):
        for k, state in enumerate(positions(rules, 21)):
            if k % 4:
                continue
            guarded = SeatOnly(state, state.turn)
            bot = SearchStrategy(4, budget_ms=None, max_samples=8)
            move = bot.choose(guarded)  # type: ignore[arg-type]
            assert move in guarded._view.legal
            assert guarded.read <= set(View.__struct_fields__) - {"last_round", "result"}
            twin = redeal_hidden(state, rng)
            assert view_for(twin, state.turn) == guarded._view
            again = SearchStrategy(4, budget_ms=None, max_samples=8)
            assert again.choose(view_for(twin, state.turn)) == move
            assert again.last is not None and bot.last is not None
            assert again.last.values == bot.last.values
