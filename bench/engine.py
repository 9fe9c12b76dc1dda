"""The ``engine`` benchmark group: random complete rounds per second on the fast path.

``engine.express4p`` times 4-player partnership Express on double-six, a fresh deal each
round, against the same workload on the PyPI package ``dominoes`` (block game, pairs, the
double-six leads), and reports the ratio. The two are timed in alternating slices so that
machine noise falls on both, and on the process's CPU clock, so that other processes sharing
the machine do not count against either. ``engine.straight2p`` times two-player Straight
(drawing, the spinner, all-fives scoring); ``engine.reference`` times the reference
``decide``/``evolve`` for context.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

from engine.fast_playout import round_player
from engine.game import decide, evolve, legal_moves
from engine.rules import Rules
from engine.state import MatchState
from engine.tiles import full_set
from events.model import AnyCommand, CreateMatch, DealRound, Rejection

BASELINE = "dominoes-6.1.0"
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
    import dominoes  # the baseline is a dev dependency; import it only when benchmarking

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
