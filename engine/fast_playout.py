"""Random playouts on the fast path: play a round to its end with uniformly random moves.

This is the hot loop of search and of the ``engine`` benchmark, so it is written for speed:
every table and method is bound to a local before the loop, hands are bit masks in a list,
a move costs a few ``&`` and one dict or tuple lookup, and no function is called per move
except ``int.bit_count`` and the generator's ``random``.

How a random move is chosen (fixed, so a playout can be replayed through
:class:`engine.fast.FastState` move by move): with one legal move it is taken without drawing
a random number; otherwise ``k = int(rng.random() * count)`` picks the k-th legal move in
*end-major* order — the left end's moves by tile, then the right's, up's and down's (for a
lead, the hand's tiles in order). :func:`choose` applies that rule to a list of moves.
(``random()`` has 53 bits, so the choice is uniform to within 2**-50 or so.)

A blocked round (C10) is found from the passes that follow it: once every seat has passed in
a row nobody can play, and the round ended at the play (or draw) before those passes, which
are not counted. That costs one assignment per play instead of a look at every hand.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, lru_cache
from random import Random
from typing import NamedTuple

from engine.fast import (
    FastState,
    Tables,
    blocked_score,
    first_express_lead,
    tables,
)
from engine.rules import HAND_SIZE, round5
from events.vocabulary import Rules


class Playout(NamedTuple):
    """How a played-out round ended."""

    outcome: str  # "domino", "blocked" or "target" (C9)
    winner: int  # the seat that dominoed, reached the target, or won the block (E3)
    side: int  # the side that scored
    points: int  # what the round's end scored (0 for "target")
    moves: int  # moves made by the playout: plays, draws and passes
    scores: tuple[int, ...]  # every side's match score after the round
    match_over: bool  # a side reached the target (C9)


def playout(state: FastState, rng: Random) -> Playout:
    """Play ``state``'s round to its end with random legal moves; ``state`` is left as is."""
    if state.outcome is not None:
        return Playout(
            state.outcome,
            state.winner,
            state.side,
            state.points,
            0,
            tuple(state.scores),
            state.match_over,
        )
    if state.straight:
        return _straight(state, rng)
    return _express(state, rng)


def random_round(rules: Rules, rng: Random, leader: int | None = None) -> Playout:
    """Deal a fresh round and play it out at random: the benchmark's and search's unit.

    ``leader`` None makes it a match's first round (E2's forced lead in Express, a random
    leader in Straight, S1); scores start at 0.
    """
    return _round_player(rules, leader)(rng)


@lru_cache(maxsize=64)
def _round_player(rules: Rules, leader: int | None) -> Callable[[Random], Playout]:
    return round_player(rules, leader)


def choose(moves: list[int], rng: Random) -> int:
    """The move a playout picks from ``moves`` (any order) with the next draws of ``rng``."""
    if len(moves) == 1:
        return moves[0]
    ordered = sorted(moves, key=lambda m: (m & 7, m >> 3))  # end-major, then by tile
    return ordered[int(rng.random() * len(ordered))]


# ---------------------------------------------------------------------------------------------
# dealing Express hands fast
#
# In Express only the hands matter (the stock sleeps, E1), so a deal is a random partition of
# the set into the seats' hands and the rest, which bisection by rejection draws exactly:
# to split a set of m tiles into k and m - k, draw m random bits masked to the set until k of
# them are set. With k near m / 2 that takes a handful of ``getrandbits`` calls (about 7 for
# 14 of 28, 5 for 7 of 14), each giving a subset uniform among those of its size, so the
# partition is uniform. A plan of such splits is computed once per set size and player count.

Split = tuple[int, int, int, int]
"""One step of a deal plan: (source slot, tiles to take, slot taking them, slot of the rest)."""


@cache
def _deal_plan(size: int, players: int) -> tuple[tuple[Split, ...], tuple[int, ...], int]:
    """How to deal ``players`` hands from ``size`` tiles by halving: the splits, each seat's
    slot, and the number of slots. The stock is cut in pieces of a hand's size so that every
    split is close to even; splits inside the stock are skipped."""
    groups = [(seat, HAND_SIZE) for seat in range(players)]
    rest = size - players * HAND_SIZE
    while rest > 0:
        groups.append((-1, min(HAND_SIZE, rest)))
        rest -= HAND_SIZE
    steps: list[Split] = []
    seat_slot = [0] * players
    slots = 1

    def split(slot: int, part: list[tuple[int, int]]) -> None:
        nonlocal slots
        if all(seat < 0 for seat, _ in part):
            return
        if len(part) == 1:
            seat_slot[part[0][0]] = slot
            return
        total = sum(c for _, c in part)
        cut = min(range(1, len(part)), key=lambda j: abs(2 * sum(c for _, c in part[:j]) - total))
        left, right = slots, slots + 1
        slots += 2
        steps.append((slot, sum(c for _, c in part[:cut]), left, right))
        split(left, part[:cut])
        split(right, part[cut:])

    split(0, groups)
    return tuple(steps), tuple(seat_slot), slots


def _deal_28(getrandbits: Callable[[int], int]) -> list[int]:
    """Four groups of 7 from the 28 tiles of double-six: the plan of :func:`_deal_plan` for
    that set (14 | 14, then 7 | 7 twice), unrolled."""
    while True:
        a = getrandbits(28)
        if a.bit_count() == 14:
            break
    b = a ^ 0xFFFFFFF
    while True:
        x = getrandbits(28) & a
        if x.bit_count() == 7:
            break
    while True:
        y = getrandbits(28) & b
        if y.bit_count() == 7:
            break
    return [x, a ^ x, y, b ^ y]


def deal_hands(top: int, players: int, rng: Random) -> list[int]:
    """Fresh hands as masks, uniformly dealt, for Express (where the stock's order never
    matters: it is the tiles no hand holds)."""
    size = tables(top).size
    if size == 4 * HAND_SIZE:
        return _deal_28(rng.getrandbits)[:players]
    steps, seat_slot, slots = _deal_plan(size, players)
    getrandbits = rng.getrandbits
    part = [0] * slots
    part[0] = (1 << size) - 1
    for source, k, taken, rest in steps:
        whole = part[source]
        while True:
            x = getrandbits(size) & whole
            if x.bit_count() == k:
                break
        part[taken] = x
        part[rest] = whole ^ x
    return [part[slot] for slot in seat_slot]


def round_player(rules: Rules, leader: int | None = None) -> Callable[[Random], Playout]:
    """A function that deals a fresh round from a generator and plays it out at random, with
    everything it looks up bound once: the fastest way to play many rounds of one rule set.
    ``leader`` as in :func:`random_round`. Express hands come from :func:`deal_hands`;
    Straight deals a whole permutation (:meth:`FastState.random_deal`), the stock's order
    being part of the game."""
    if rules.family == "straight":
        return lambda rng: _straight(FastState.random_deal(rules, rng, leader), rng)
    tab = tables(rules.top)
    n = rules.players
    top = rules.top
    all_dealt = n * HAND_SIZE == tab.size
    d6 = tab.size == 4 * HAND_SIZE
    if leader is None and all_dealt:  # E2: every tile is dealt, so the top double leads
        forced = tab.index[(tab.top, tab.top)]
    elif leader is None:
        forced = -1  # found per deal
    else:
        forced = -2  # the leader leads any tile
    chosen_leader = 0 if leader is None else leader
    mask, lo, hi, nxt = tab.mask, tab.lo, tab.hi, tab.next_mask
    after = tuple((k + 1) % n for k in range(n))
    sides = tuple(rules.side_of(k) for k in range(n))
    count = tab.count
    partners = rules.partners
    target = rules.target
    zero = (0,) * rules.sides
    two_sides = rules.sides == 2
    dealt = n * HAND_SIZE
    new = tuple.__new__

    def play(rng: Random) -> Playout:
        """Deal (E1: the stock sleeps) and play one round."""
        if d6:
            hands = _deal_28(rng.getrandbits)
            if n < 4:
                del hands[n:]
        else:
            hands = deal_hands(top, n, rng)
        rnd = rng.random
        if forced >= 0:
            i = forced
            turn = 0
            while not hands[turn] >> i & 1:
                turn += 1
            first = turn
        elif forced == -1:
            first, i = first_express_lead(tab, hands)
            turn = first
        else:
            turn = first = chosen_leader
            h = hands[turn]
            k = int(rnd() * h.bit_count())
            while k:
                h &= h - 1
                k -= 1
            i = (h & -h).bit_length() - 1
        hands[turn] ^= 1 << i
        seat, passes, blocked = _express_loop(
            hands, after[turn], mask[lo[i]], mask[hi[i]], after, nxt, rnd
        )
        held = 0
        for h in hands:
            held |= h
        if blocked:  # E5
            winner, side, points = blocked_score(
                [count(h) for h in hands], sides, first, False, partners
            )
            outcome = "blocked"
        else:  # E4: with or without pairs, every hand left is counted
            winner, side, points, outcome = seat, sides[seat], count(held), "domino"
        scores: tuple[int, ...]
        if two_sides:
            scores = (points, 0) if side == 0 else (0, points)
        else:
            scores = (*zero[:side], points, *zero[side + 1 :])
        moves = dealt - held.bit_count() + passes
        # tuple.__new__ skips the NamedTuple's Python-level __new__
        return new(Playout, (outcome, winner, side, points, moves, scores, points >= target))

    return play


# ---------------------------------------------------------------------------------------------
# Express: two ends, no drawing, no scoring during play


def _express(s: FastState, rng: Random) -> Playout:
    """Play an Express round on from ``s`` (lead included) without changing ``s``."""
    tab: Tables = s.tab
    mask = tab.mask
    rnd = rng.random
    n = s.players
    after = tuple((k + 1) % n for k in range(n))
    hands = s.hands[:]
    turn = s.turn
    held = 0
    for h in hands:
        held |= h
    if s.board_tiles == 0:  # the lead: the forced tile (E2) or any tile of the hand
        h = hands[turn]
        if s.forced >= 0:
            i = s.forced
        else:
            x = h
            if h & (h - 1):
                k = int(rnd() * h.bit_count())
                while k:
                    x &= x - 1
                    k -= 1
            i = (x & -x).bit_length() - 1
        ml = mask[tab.lo[i]]
        mr = mask[tab.hi[i]]
        h ^= 1 << i
        hands[turn] = h
        if not h:
            return _express_end(s, hands, False, turn, 1)
        turn = after[turn]
    else:
        ml = mask[s.nums[0]]
        mr = mask[s.nums[1]]
    seat, passes, blocked = _express_loop(hands, turn, ml, mr, after, tab.next_mask, rnd)
    for h in hands:
        held ^= h  # now the tiles played
    return _express_end(s, hands, blocked, seat, held.bit_count() + passes)


def _express_loop(
    hands: list[int],
    turn: int,
    ml: int,
    mr: int,
    after: tuple[int, ...],
    nxt: dict[int, int],
    rnd: Callable[[], float],
) -> tuple[int, int, bool]:
    """Play on from a non-empty board whose ends show the tiles of masks ``ml`` and ``mr``;
    update ``hands`` and return (last mover, passes made, blocked?). The plays are the
    tiles that left the hands."""
    n = len(after)
    passes = 0
    run = 0  # passes since the last play
    while True:
        h = hands[turn]
        pl = h & ml
        pr = h & mr
        # k is a float in [0, moves): its integer part picks the move, end-major (module doc)
        if pl:
            run = 0
            cl = pl.bit_count()
            if pr:
                k = rnd() * (cl + pr.bit_count())
                if k < cl:
                    while k >= 1:
                        pl &= pl - 1
                        k -= 1
                    b = pl & -pl
                    ml = nxt[ml ^ b]
                else:
                    k -= cl
                    while k >= 1:
                        pr &= pr - 1
                        k -= 1
                    b = pr & -pr
                    mr = nxt[mr ^ b]
            elif cl == 1:
                b = pl
                ml = nxt[ml ^ b]
            else:
                k = rnd() * cl
                while k >= 1:
                    pl &= pl - 1
                    k -= 1
                b = pl & -pl
                ml = nxt[ml ^ b]
        elif pr:
            run = 0
            cr = pr.bit_count()
            if cr == 1:
                b = pr
            else:
                k = rnd() * cr
                while k >= 1:
                    pr &= pr - 1
                    k -= 1
                b = pr & -pr
            mr = nxt[mr ^ b]
        else:
            passes += 1
            run += 1
            if run == n:  # C10: nobody could play after the last play
                return turn, passes - n, True
            turn = after[turn]
            continue
        h ^= b
        hands[turn] = h
        if not h:
            return turn, passes, False
        turn = after[turn]


def _express_end(s: FastState, hands: list[int], blocked: bool, seat: int, moves: int) -> Playout:
    """Score an Express round that ended by domino (E4) or block (E5)."""
    count = s.tab.count
    scores = s.scores[:]
    if blocked:  # E5
        winner, side, points = blocked_score(
            [count(h) for h in hands], s.sides, s.leader, False, s.partners
        )
        outcome = "blocked"
    else:  # E4: with or without pairs, every hand left is counted
        held = 0
        for h in hands:
            held |= h
        winner, side, points, outcome = seat, s.sides[seat], count(held), "domino"
    scores[side] += points
    return Playout(outcome, winner, side, points, moves, tuple(scores), scores[side] >= s.target)


# ---------------------------------------------------------------------------------------------
# Straight: four ends with the spinner, drawing, all-fives scoring during play


def _straight(s: FastState, rng: Random) -> Playout:
    """Play a Straight round on from ``s`` (lead included) without changing ``s``.

    Ends are kept as numbers (``nums``), masks (``masks``) and what they add to the all-fives
    count (``vals``, summed in ``total``), so a play updates the count by a difference.
    """
    tab: Tables = s.tab
    mask = tab.mask
    other = tab.other
    double = tab.double
    bit = tab.bit
    rnd = rng.random
    n = s.players
    sides = s.sides
    target = s.target
    after = tuple((k + 1) % n for k in range(n))
    hands = s.hands[:]
    scores = s.scores[:]
    stock = s.stock
    drawn = s.stock_at
    stock_size = len(stock)
    turn = s.turn
    moves = 0
    closed = tab.closed
    nums = s.nums[:]
    masks = [mask[x] for x in nums]
    # What each end adds to the count (S4): a crosswise double both halves; a spinner side
    # with no tile yet nothing.
    vals = [0, 0, 0, 0]
    for e in range(4):
        if nums[e] != closed and (e < 2 or s.arm[e]):
            vals[e] = 2 * nums[e] if s.tips[e] else nums[e]
    total = vals[0] + vals[1] + vals[2] + vals[3]
    # Spinner (S2): -1 none yet; else `pending` holds the long ends (bit 0 left, bit 1 right)
    # still to be covered before its crosswise sides open; 0 once they are open or decided.
    spin = s.spinner
    pending = 0
    if spin >= 0 and nums[2] == closed:
        arm = s.arm
        # the ends that still lack a tile: both arms of a spinner lead, else its own arm
        # (which is not covered yet, or the sides would be open)
        pending = (arm[0] == 0) | (arm[1] == 0) << 1 if s.spinner_arm < 0 else 1 << s.spinner_arm
    if s.board_tiles == 0:  # the lead
        h = hands[turn]
        if s.forced >= 0:
            i = s.forced
        else:
            x = h
            if h & (h - 1):
                j = int(rnd() * h.bit_count())
                while j:
                    x &= x - 1
                    j -= 1
            i = (x & -x).bit_length() - 1
        a, b = tab.lo[i], tab.hi[i]
        nums[0], nums[1] = a, b
        masks[0], masks[1] = mask[a], mask[b]
        if double[i]:
            vals[0] = vals[1] = 2 * a
            spin = a
            pending = 3
        else:
            vals[0], vals[1] = a, b
        total = vals[0] + vals[1]
        h ^= 1 << i
        hands[turn] = h
        moves = 1
        lone = a + b  # S4: a lone lead counts its pips once
        if lone % 5 == 0 and lone:
            side = sides[turn]
            scores[side] += lone
            if scores[side] >= target:
                return _straight_target(s, turn, moves, scores)
        if not h:
            return _straight_domino(s, hands, turn, moves, scores)
        turn = after[turn]
    run = 0  # passes since the last play or draw
    m0, m1, m2, m3 = masks
    open_mask = m0 | m1 | m2 | m3
    while True:
        h = hands[turn]
        p = h & open_mask
        if not p and drawn < stock_size:  # S3: draw until a tile plays
            while drawn < stock_size:
                h |= bit[stock[drawn]]
                drawn += 1
                moves += 1
                p = h & open_mask
                if p:
                    break
            hands[turn] = h
            run = 0
        if p:
            run = 0
            p0 = p & m0
            p1 = p & m1
            p2 = p & m2
            p3 = p & m3
            c0 = p0.bit_count()
            c1 = p1.bit_count()
            c2 = p2.bit_count() if p2 else 0
            c3 = p3.bit_count() if p3 else 0
            choices = c0 + c1 + c2 + c3
            if choices == 1:
                b = p
                e = 0 if p0 else 1 if p1 else 2 if p2 else 3
            else:
                # a float in [0, choices): its integer part picks the move, end-major
                k = rnd() * choices
                if k < c0:
                    x, e = p0, 0
                elif k < c0 + c1:
                    x, e, k = p1, 1, k - c0
                elif k < c0 + c1 + c2:
                    x, e, k = p2, 2, k - c0 - c1
                else:
                    x, e, k = p3, 3, k - c0 - c1 - c2
                while k >= 1:
                    x &= x - 1
                    k -= 1
                b = x & -x
            i = b.bit_length() - 1
            x = other[i][nums[e]]
            nums[e] = x
            masks[e] = mask[x]
            v = 2 * x if double[i] else x
            total += v - vals[e]
            vals[e] = v
            if spin < 0:
                if double[i]:  # S2: the first double played is the spinner
                    spin = x
                    pending = 1 << e
            elif pending & (1 << e):
                pending &= ~(1 << e)
                if not pending:  # both long sides covered: the crosswise sides open
                    nums[2] = nums[3] = spin
                    masks[2] = masks[3] = mask[spin]
            m0, m1, m2, m3 = masks
            open_mask = m0 | m1 | m2 | m3
            moves += 1
            h ^= b
            hands[turn] = h
            if total % 5 == 0 and total:  # S4
                side = sides[turn]
                scores[side] += total
                if scores[side] >= target:  # C9: the match ends here, nothing more scored
                    return _straight_target(s, turn, moves, scores)
            if not h:
                return _straight_domino(s, hands, turn, moves, scores)
        else:
            moves += 1
            run += 1
            if run == n:  # C10: nobody could play after the last play or draw
                return _straight_blocked(s, hands, moves - n, scores)
        turn = after[turn]


def _straight_target(s: FastState, seat: int, moves: int, scores: list[int]) -> Playout:
    return Playout("target", seat, s.sides[seat], 0, moves, tuple(scores), True)


def _straight_domino(
    s: FastState, hands: list[int], seat: int, moves: int, scores: list[int]
) -> Playout:
    count = s.tab.count
    side = s.sides[seat]
    points = round5(sum(count(h) for k, h in enumerate(hands) if s.sides[k] != side))  # S5
    scores[side] += points
    return Playout("domino", seat, side, points, moves, tuple(scores), scores[side] >= s.target)


def _straight_blocked(s: FastState, hands: list[int], moves: int, scores: list[int]) -> Playout:
    count = s.tab.count
    winner, side, points = blocked_score(
        [count(h) for h in hands], s.sides, s.leader, True, s.partners
    )  # S6
    scores[side] += points
    return Playout("blocked", winner, side, points, moves, tuple(scores), scores[side] >= s.target)


__all__ = ["Playout", "choose", "deal_hands", "playout", "random_round", "round_player"]
