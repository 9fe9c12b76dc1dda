"""The fast path plays exactly the reference rules: both engines, the same rounds, move for move.

Every family, player count, pairing and set plays seeded random matches through the reference
(``decide``/``evolve``, random choices among ``legal_moves``) while a ``FastState`` follows
along; at every step the legal moves must be the same list, and what the reference records
(points per play, how the round ended, who won, counts, scores, the match's end) must be what
the fast path reports. Fast states are also rebuilt from mid-round reference states, and the
random playouts are checked against the reference driven by the same random numbers.
"""

from __future__ import annotations

import random

import pytest

from engine.fast import (
    DRAW,
    LEAD_END,
    PASS,
    FastIllegalMove,
    FastState,
    perft,
    random_order,
    tables,
)
from engine.fast_playout import Playout, choose, deal_hands, playout, random_round
from engine.game import decide, evolve, legal_moves
from engine.rules import HAND_SIZE, Family, Rules
from engine.state import MatchState
from engine.tiles import Tile, parse_tile
from events.model import (
    AnyCommand,
    AnyEvent,
    CreateMatch,
    DealRound,
    MatchEnded,
    Move,
    Rejection,
    RoundEnded,
    RoundStarted,
    TilePlayed,
)

pytestmark = pytest.mark.engine

ROUNDS = 40  # per configuration: 800 rounds in all

FAMILIES: tuple[Family, ...] = ("express", "straight")
CONFIGS = [
    (family, players, partners, top)
    for family in FAMILIES
    for players, partners in ((2, False), (3, False), (4, False), (4, True))
    for top in (6, 9, 12)
]


def rules_for(family: Family, players: int, partners: bool, top: int, seed: int) -> Rules:
    """The config's rules; every other seed plays to a low target so C9 comes up often."""
    target = None if seed % 2 else (40 if family == "straight" else 60)
    return Rules.make(family, players=players, partners=partners, top=top, target=target)


def step(state: MatchState | None, command: AnyCommand) -> tuple[MatchState, list[AnyEvent]]:
    """Decide and evolve one command through the reference engine."""
    events = decide(state, command)
    assert not isinstance(events, Rejection), events
    for event in events:
        state = evolve(state, event)
    assert state is not None
    return state, events


def new_match(rules: Rules) -> MatchState:
    """A reference match waiting for its first deal."""
    names = tuple(f"p{k}" for k in range(rules.players))
    return step(None, CreateMatch(rules=rules, players=names))[0]


def deal_order(rules: Rules, rng: random.Random) -> tuple[Tile, ...]:
    """A shuffled whole set, as the referee deals it."""
    order = list(tables(rules.top).tiles)
    rng.shuffle(order)
    return tuple(order)


def assert_same_state(fast: FastState, ref: MatchState) -> None:
    """Hands, stock, board, turn and scores agree (while the round is on)."""
    tab = fast.tab
    assert [set(fast.hand(k)) for k in range(fast.players)] == ref.hands
    assert [tab.tiles[i] for i in fast.stock[fast.stock_at :]] == ref.stock
    board = ref.board
    assert fast.ends() == board.numbers
    assert fast.tips == board.tips
    assert fast.arm == board.arm_len
    assert fast.board_tiles == board.tiles
    assert fast.spinner == (-1 if board.spinner is None else board.spinner[0])
    if board.spinner is not None:
        assert (fast.spinner_arm, fast.spinner_at) == (board.spinner_arm, board.spinner_at)
    assert fast.board_count() == (board.count() if board.tiles else 0)
    assert fast.turn == ref.turn
    assert fast.scores == ref.scores


def assert_same_moves(fast: FastState, ref: MatchState) -> list[Move]:
    """The fast legal moves are the reference's, in the same order; return them."""
    expected = legal_moves(ref)
    moves = fast.legal_moves()
    assert [fast.to_command(m) for m in moves] == expected
    assert [fast.from_command(c) for c in expected] == moves
    return expected


def assert_same_outcome(fast: FastState, events: list[AnyEvent]) -> None:
    """What the reference recorded for the last move is what the fast path reports."""
    played = [e for e in events if isinstance(e, TilePlayed)]
    if played:
        assert fast.last_points == played[0].points  # S4
    ended = [e for e in events if isinstance(e, RoundEnded)]
    assert fast.over == bool(ended)
    if ended:
        end = ended[0]
        assert (fast.outcome, fast.winner, fast.side, fast.points) == (
            end.outcome,
            end.winner,
            end.side,
            end.points,
        )
        assert tuple(fast.counts()) == end.counts
        assert tuple(fast.scores) == end.scores
        finished = [e for e in events if isinstance(e, MatchEnded)]
        assert fast.match_over == bool(finished)
        if finished:
            assert finished[0].winner == fast.side
        assert fast.legal_moves() == []


def reference_playout(ref: MatchState, rng: random.Random) -> Playout:
    """Play the reference round on with the playout's choice rule and ``rng``'s draws."""
    fast = FastState.from_match(ref)  # only to code the moves as the playout sees them
    state = ref.copy()
    moves = 0
    while True:
        codes = [fast.from_command(c) for c in legal_moves(state)]
        command = fast.to_command(choose(codes, rng))
        state, events = step(state, command)
        moves += 1
        for event in events:
            if isinstance(event, RoundEnded):
                assert event.winner is not None and event.side is not None
                return Playout(
                    event.outcome,
                    event.winner,
                    event.side,
                    event.points,
                    moves,
                    event.scores,
                    any(isinstance(e, MatchEnded) for e in events),
                )
        if state.phase == "playing":
            fast = FastState.from_match(state)


@pytest.mark.parametrize(("family", "players", "partners", "top"), CONFIGS)
def test_fast_path_follows_the_reference_move_for_move(
    family: Family, players: int, partners: bool, top: int
) -> None:
    """Legal moves, S4 points, round ends (C9, C10, E4-E5, S5-S6) and scores agree."""
    rounds = 0
    seed = 0
    while rounds < ROUNDS:
        rules = rules_for(family, players, partners, top, seed)
        rng = random.Random(seed * 1000 + top)
        seed += 1
        state = new_match(rules)
        while state.phase != "over" and rounds < ROUNDS:
            command = DealRound(order=deal_order(rules, rng), first_leader=rng.randrange(players))
            state, events = step(state, command)
            started = events[0]
            assert isinstance(started, RoundStarted) and started.stock is not None
            hands = [h for h in started.hands if h is not None]
            fast = FastState.from_deal(
                rules, hands, started.stock, started.leader, started.forced_lead, state.scores
            )
            rounds += 1
            checkpoint = rng.randrange(40)
            while not fast.over:
                assert_same_state(fast, state)
                moves = assert_same_moves(fast, state)
                if fast.moves == checkpoint:  # start afresh from the reference state
                    fast = FastState.from_match(state)
                    assert_same_state(fast, state)
                move = rng.choice(moves)
                state, events = step(state, move)
                fast.apply(fast.from_command(move))
                assert_same_outcome(fast, events)


@pytest.mark.parametrize(("family", "players", "partners", "top"), CONFIGS)
def test_playouts_end_rounds_as_the_reference_does(
    family: Family, players: int, partners: bool, top: int
) -> None:
    """A playout from a deal or from mid-round equals the reference fed the same choices."""
    for seed in range(4):
        rules = rules_for(family, players, partners, top, seed)
        rng = random.Random(seed)
        state = new_match(rules)
        for _ in range(3):
            if state.phase == "over":
                state = new_match(rules)
            command = DealRound(order=deal_order(rules, rng), first_leader=rng.randrange(players))
            state, _ = step(state, command)
            stop = rng.randrange(30)
            for _ in range(stop):  # part of the way in, at random
                if state.phase != "playing":
                    break
                state, _ = step(state, rng.choice(legal_moves(state)))
            if state.phase != "playing":
                continue
            fast = FastState.from_match(state)
            before = fast.copy()
            playout_seed = rng.randrange(2**32)
            assert playout(fast, random.Random(playout_seed)) == reference_playout(
                state, random.Random(playout_seed)
            )
            assert repr(fast) == repr(before)  # the playout left its start alone
            while state.phase == "playing":
                state, _ = step(state, rng.choice(legal_moves(state)))


@pytest.mark.parametrize(("family", "players", "partners", "top"), CONFIGS)
def test_random_rounds_are_reference_rounds(
    family: Family, players: int, partners: bool, top: int
) -> None:
    """random_round deals from the generator and plays out as the reference would."""
    rules = Rules.make(family, players=players, partners=partners, top=top)
    tab = tables(top)
    for seed in range(8):
        got = random_round(rules, random.Random(seed))
        rng = random.Random(seed)
        if family == "express":
            masks = deal_hands(top, players, rng)
            hands = [tab.tiles_of(m) for m in masks]
            dealt = {t for h in hands for t in h}
            order = [t for h in hands for t in h] + [t for t in tab.tiles if t not in dealt]
            first = 0
        else:
            order = [tab.tiles[i] for i in random_order(tab, rng)]
            first = int(rng.random() * players)  # S1
        state, _ = step(new_match(rules), DealRound(order=tuple(order), first_leader=first))
        # the playout's choices follow the deal's draws from the same generator
        assert got == reference_playout(state, rng)
        # a later round: the leader given, leading any tile (E3, S1)
        leader = seed % players
        got = random_round(rules, random.Random(seed), leader)
        rng = random.Random(seed)
        if family == "express":
            masks = deal_hands(top, players, rng)
            fast = FastState.from_masks(rules, masks, tab.full ^ sum(masks), leader)
        else:
            fast = FastState.random_deal(rules, rng, leader)
        assert got == playout(fast, rng)


def fast_round(rules: Rules, order: tuple[Tile, ...], leader: int) -> FastState:
    """A first Straight round dealt from ``order`` as the referee deals it (C5, S1)."""
    n = rules.players
    hands = [order[k * HAND_SIZE : (k + 1) * HAND_SIZE] for k in range(n)]
    return FastState.from_deal(rules, hands, order[n * HAND_SIZE :], leader)


@pytest.mark.parametrize("players", [2, 3, 4])
@pytest.mark.parametrize("top", [6, 9, 12])
def test_rare_straight_endings_agree_with_the_reference(players: int, top: int) -> None:
    """Blocked rounds (after a play, and after the draw that empties the boneyard, C10, S6)
    and the target reached mid-round (C9) are rare in random play: find some on the fast
    path, then play those rounds move for move through the reference."""
    wanted = {"blocked by a play": 2, "blocked by a draw": 2, "target": 1}
    if players * HAND_SIZE == len(tables(top).tiles):
        del wanted["blocked by a draw"]  # no boneyard: nobody ever draws
    for seed in range(1000):
        if not any(wanted.values()):
            break
        rules = Rules.make("straight", players=players, top=top, target=250 if seed % 8 else 60)
        rng = random.Random(seed)
        order = deal_order(rules, rng)
        leader = rng.randrange(players)
        fast = fast_round(rules, order, leader)
        choices = random.Random(seed)
        last = PASS
        while not fast.over:
            last = choose(fast.legal_moves(), choices)
            fast.apply_unchecked(last)
        kind = fast.outcome or ""
        if kind == "blocked":
            kind += " by a draw" if last == DRAW else " by a play"
        if not wanted.get(kind):
            continue
        wanted[kind] -= 1
        state, _ = step(new_match(rules), DealRound(order=order, first_leader=leader))
        fast = fast_round(rules, order, leader)
        choices = random.Random(seed)
        while not fast.over:
            assert_same_state(fast, state)
            moves = assert_same_moves(fast, state)
            move = fast.to_command(choose([fast.from_command(m) for m in moves], choices))
            state, events = step(state, move)
            fast.apply(fast.from_command(move))
            assert_same_outcome(fast, events)
        assert (fast.outcome or "") in kind
    assert not any(wanted.values()), wanted


@pytest.mark.parametrize("top", [6, 9, 12])
@pytest.mark.parametrize("players", [2, 3, 4])
def test_fresh_deals_are_partitions_spread_evenly(players: int, top: int) -> None:
    """C5: deal_hands gives each seat 7 distinct tiles, and each tile lands in each hand about
    7 times in ``size`` deals; random_order is a permutation of the set."""
    tab = tables(top)
    rng = random.Random(top * 10 + players)
    deals = 1200
    seen = [[0] * players for _ in range(tab.size)]
    for _ in range(deals):
        hands = deal_hands(top, players, rng)
        assert [h.bit_count() for h in hands] == [HAND_SIZE] * players
        union = 0
        for seat, h in enumerate(hands):
            assert not union & h and h <= tab.full
            union |= h
            for i in range(tab.size):
                seen[i][seat] += h >> i & 1
    expected = deals * HAND_SIZE / tab.size
    spread = 5 * (expected * (1 - HAND_SIZE / tab.size)) ** 0.5  # five standard deviations
    assert all(abs(c - expected) < spread for row in seen for c in row)
    assert sorted(random_order(tab, rng)) == list(range(tab.size))


def reference_perft(state: MatchState, depth: int) -> int:
    """:func:`engine.fast.perft` through the reference engine."""
    if depth == 0 or state.phase != "playing":
        return 1
    moves = legal_moves(state)
    if depth == 1:
        return len(moves)
    return sum(reference_perft(step(state.copy(), m)[0], depth - 1) for m in moves)


PERFT_DEAL = "14 00 02 44 34 46 16 01 56 23 04 03 55 25 35 36 15 66 11 26 12 22 06 13 33 45 05 24"
"""The fixed double-six deal of the ``engine.perft`` benchmark (tests/bench/engine.py)."""


@pytest.mark.parametrize(
    ("family", "players", "depth", "golden"),
    [("express", 4, 8, None), ("express", 4, 12, 65566), ("straight", 2, 6, None)],
)
def test_perft_counts_from_a_fixed_deal(
    family: Family, players: int, depth: int, golden: int | None
) -> None:
    """Move generation counts the same sequences as the reference (and the bench's golden
    numbers hold)."""
    rules = Rules.make(family, players=players)
    order = tuple(parse_tile(t) for t in PERFT_DEAL.split())
    state, _ = step(new_match(rules), DealRound(order=order, first_leader=0))
    count = perft(FastState.from_match(state), depth)
    if golden is None:
        assert count == reference_perft(state, depth)
    else:
        assert count == golden


@pytest.mark.parametrize(("family", "players", "partners", "top"), CONFIGS[::3])
def test_perft_counts_from_the_middle_of_rounds(
    family: Family, players: int, partners: bool, top: int
) -> None:
    """From mid-round states (spinners open or not, boneyards part drawn), the fast moves
    branch exactly as the reference's, three moves deep."""
    rules = Rules.make(family, players=players, partners=partners, top=top)
    rng = random.Random(top + players)
    state = new_match(rules)
    command = DealRound(order=deal_order(rules, rng), first_leader=rng.randrange(players))
    state, _ = step(state, command)
    checked = 0
    while state.phase == "playing":
        if rng.random() < 0.3:
            assert perft(FastState.from_match(state), 3) == reference_perft(state, 3)
            checked += 1
        state, _ = step(state, rng.choice(legal_moves(state)))
    assert checked


def test_illegal_moves_are_refused_with_the_move_and_the_state() -> None:
    """apply checks: no draw in Express (E1), no pass holding a play, no foreign tile."""
    rules = Rules.make("express")
    rng = random.Random(3)
    order = deal_order(rules, rng)
    hands = [order[k * HAND_SIZE : (k + 1) * HAND_SIZE] for k in range(4)]
    leader = next(k for k, h in enumerate(hands) if (6, 6) in h)
    fast = FastState.from_deal(rules, hands, (), leader, (6, 6))
    other = (leader + 1) % 4
    foreign = fast.tab.index[hands[other][0]] << 3 | LEAD_END
    for move in (DRAW, PASS, foreign, fast.tab.index[(6, 6)] << 3):
        with pytest.raises(FastIllegalMove, match=f"seat {leader}"):
            fast.apply(move)
    fast.apply(fast.tab.index[(6, 6)] << 3 | LEAD_END)
    assert fast.turn == other and fast.board_count() == 12


def test_a_deal_that_does_not_fit_is_refused() -> None:
    """from_deal checks the deal: whole tiles, each once, the forced lead in the leader's hand."""
    rules = Rules.make("express", players=2)
    hand = [(0, 0), (0, 1)]
    with pytest.raises(ValueError, match="twice"):
        FastState.from_deal(rules, [hand, hand], (), 0)
    with pytest.raises(ValueError, match="forced lead"):
        FastState.from_deal(rules, [hand, [(1, 1)]], (), 0, (1, 1))
    with pytest.raises(ValueError, match="phase"):
        FastState.from_match(new_match(rules))
