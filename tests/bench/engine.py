"""The ``engine`` benchmark group: random complete rounds per second on the fast path.

``engine.express4p`` times 4-player partnership Express on double-six, a fresh deal each
round, against the same workload on the PyPI package ``dominoes`` (block game, pairs, the
double-six leads), and reports the ratio. The two are timed in alternating slices so that
machine noise falls on both, and on the process's CPU clock, so that other processes sharing
the machine do not count against either. ``engine.straight2p`` times two-player Straight
(drawing, the spinner, all-fives scoring); ``engine.reference`` times the reference
``decide``/``evolve`` for context. ``engine.perft.*`` count every move sequence to a fixed
depth from a fixed deal, check the count against its golden number, and time it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

from engine.fast import FastState, perft
from engine.fast_playout import round_player
from engine.game import decide, evolve, legal_moves
from engine.rules import Family, Rules
from engine.state import MatchState
from engine.tiles import full_set, parse_tile
from events.model import AnyCommand, CreateMatch, DealRound, Rejection

BASELINE = "dominoes-6.1.0"
PERFT_DEAL = "14 00 02 44 34 46 16 01 56 23 04 03 55 25 35 36 15 66 11 26 12 22 06 13 33 45 05 24"
"""A fixed double-six deal: seat k holds tiles 7k to 7k + 6, the rest is the stock."""
PERFT: tuple[tuple[Family, int, int, int], ...] = (
    ("express", 4, 12, 65566),
    ("straight", 2, 8, 27197),
)
"""(family, players, depth, golden count) from :data:`PERFT_DEAL`; checked against the
reference engine in tests/engine/test_fast_differential.py."""
SLICE = 0.25  # seconds per timed slice
SLICES = 12  # slices per workload in the interleaved comparison: 3 s each

Workload = Callable[[int], int]
"""Plays ``n`` random rounds and returns the moves made."""


def fast_rounds(rules: Rules, seed: int) -> Workload:
    """Random rounds on the fast path, dealt afresh from one generator."""
    rng = random.Random(seed)
    play = round_player(rules)

    def run(n: int) -> int:
        moves = 0
        for _ in range(n):
            moves += play(rng).moves
        return moves

    return run


def dominoes_rounds(seed: int) -> Workload:
    """Random 4-player partnership block rounds on the ``dominoes`` package."""
    import dominoes  # type: ignore[import-untyped]  # a dev dependency, for this bench only

    rng = random.Random(seed)
    random.seed(seed)  # dominoes shuffles with the module-level generator
    lead = dominoes.Domino(6, 6)
    choice = rng.choice

    def run(n: int) -> int:
        moves = 0
        for _ in range(n):
            game = dominoes.Game.new(starting_domino=lead)
            while game.result is None:
                game.make_move(*choice(game.valid_moves))
            moves += len(game.moves)  # plays and passes, as ours
        return moves

    return run


def reference_rounds(rules: Rules, seed: int) -> Workload:
    """Random rounds through the reference ``decide``/``evolve``, one match per round."""
    rng = random.Random(seed)
    names = tuple(f"p{k}" for k in range(rules.players))
    tiles = list(full_set(rules.top))

    def step(state: MatchState | None, command: AnyCommand) -> MatchState:
        events = decide(state, command)
        assert not isinstance(events, Rejection), events
        for event in events:
            state = evolve(state, event)
        assert state is not None
        return state

    def run(n: int) -> int:
        moves = 0
        for _ in range(n):
            state = step(None, CreateMatch(rules=rules, players=names))
            rng.shuffle(tiles)
            state = step(state, DealRound(order=tuple(tiles), first_leader=0))
            while state.phase == "playing":
                state = step(state, rng.choice(legal_moves(state)))
                moves += 1
        return moves

    return run


def perft_state(family: Family, players: int) -> FastState:
    """The first round of :data:`PERFT_DEAL` (E2's forced lead in Express, seat 0 in
    Straight)."""
    rules = Rules.make(family, players=players)
    order = [parse_tile(t) for t in PERFT_DEAL.split()]
    hands = [order[k * 7 : (k + 1) * 7] for k in range(players)]
    if family == "express":
        leader = next(k for k, h in enumerate(hands) if (6, 6) in h)
        return FastState.from_deal(rules, hands, order[players * 7 :], leader, (6, 6))
    return FastState.from_deal(rules, hands, order[players * 7 :], 0)


class Meter:
    """Times a workload in slices and totals rounds, moves and seconds."""

    def __init__(self, work: Workload) -> None:
        self.work = work
        self.batch = 1
        self.rounds = self.moves = 0
        self.seconds = 0.0

    def slice(self, seconds: float) -> None:
        """Run whole batches for about ``seconds``, growing the batch to keep timing cheap."""
        clock = time.process_time
        end = clock() + seconds
        while True:
            start = clock()
            moves = self.work(self.batch)
            now = clock()
            self.rounds += self.batch
            self.moves += moves
            self.seconds += now - start
            if now - start < 0.01:
                self.batch *= 2
            if now >= end:
                return

    def rounds_per_s(self) -> float:
        """Rounds a second so far."""
        return self.rounds / self.seconds

    def moves_per_s(self) -> float:
        """Moves a second so far."""
        return self.moves / self.seconds


def measure(*works: Workload, slices: int = SLICES) -> list[Meter]:
    """Time the workloads in alternating slices (after one warm-up batch each)."""
    meters = [Meter(w) for w in works]
    for w in works:
        w(1)
    for _ in range(slices):
        for meter in meters:
            meter.slice(SLICE)
    return meters


def run() -> Iterator[dict[str, object]]:
    """Yield one result per workload (the runner prints each as a JSON line)."""
    ours, theirs = measure(fast_rounds(Rules.make("express"), 1), dominoes_rounds(1))
    yield {
        "bench": "engine.express4p",
        "rounds_per_s": round(ours.rounds_per_s()),
        "moves_per_s": round(ours.moves_per_s()),
        "baseline": BASELINE,
        "baseline_rounds_per_s": round(theirs.rounds_per_s()),
        "ratio": round(ours.rounds_per_s() / theirs.rounds_per_s(), 2),
    }
    (straight,) = measure(fast_rounds(Rules.make("straight", players=2), 2), slices=8)
    yield {
        "bench": "engine.straight2p",
        "rounds_per_s": round(straight.rounds_per_s()),
        "moves_per_s": round(straight.moves_per_s()),
    }
    for family, players, depth, golden in PERFT:
        state = perft_state(family, players)
        runs = 0
        clock = time.process_time
        start = clock()
        while runs == 0 or clock() - start < 1.0:
            count = perft(state, depth)
            if count != golden:
                raise AssertionError(f"perft({family}, {depth}) = {count}, golden {golden}")
            runs += 1
        seconds = clock() - start
        yield {
            "bench": f"engine.perft.{family}{players}p",
            "depth": depth,
            "leaves": golden,
            "leaves_per_s": round(runs * golden / seconds),
        }
    (reference,) = measure(reference_rounds(Rules.make("express"), 3), slices=8)
    yield {
        "bench": "engine.reference",
        "family": "express",
        "players": 4,
        "rounds_per_s": round(reference.rounds_per_s()),
        "moves_per_s": round(reference.moves_per_s()),
        "fast_ratio": round(ours.rounds_per_s() / reference.rounds_per_s(), 1),
    }


if __name__ == "__main__":
    import json

    for line in run():
        print(json.dumps(line), flush=True)
