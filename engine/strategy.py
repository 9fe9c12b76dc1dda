"""Bot strategies: choose a move from a seat's view. Pure: randomness comes in as a generator.

A strategy sees only a :class:`events.view.View` — what its seat may know (C8) — and returns
one of ``view.legal``. Every bot, in-process or external, shares this interface.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from engine.search import DEFAULT_BUDGET_MS, SearchStrategy
from engine.tiles import weight
from events.model import Move, PlayTile
from events.view import View


class Strategy(Protocol):
    """Anything that picks a legal move for the seat whose view it is given."""

    name: str

    def choose(self, view: View) -> Move:
        """Return one of ``view.legal`` (never called with an empty list)."""
        ...


class RandomStrategy:
    """Uniformly random among the legal moves."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def choose(self, view: View) -> Move:
        """A uniformly random legal move."""
        return self.rng.choice(view.legal)


class GreedyStrategy:
    """Most points now (Straight's all-fives, S4); then the heaviest tile; draw or pass last."""

    name = "greedy"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def choose(self, view: View) -> Move:
        """The legal move scoring most, then the heaviest tile, ties at random."""
        best: list[Move] = []
        best_key: tuple[int, int, int] | None = None
        for move, points in zip(view.legal, view.legal_points, strict=True):
            if isinstance(move, PlayTile):
                w = weight(move.tile)
                key = (points, w[0], w[1])
            else:
                key = (-1, 0, 0)
            if best_key is None or key > best_key:
                best, best_key = [move], key
            elif key == best_key:
                best.append(move)
        return self.rng.choice(best)


STRATEGIES: dict[str, Callable[[int | None, float, int | None], Strategy]] = {
    "random": lambda seed, budget_ms, samples: RandomStrategy(seed),
    "greedy": lambda seed, budget_ms, samples: GreedyStrategy(seed),
    "search": lambda seed, budget_ms, samples: SearchStrategy(
        seed, budget_ms=budget_ms, max_samples=samples
    ),
}
"""Strategies by name: each factory takes a seed, a thinking time per move (in ms) and the
most deals a move tries (None: as many as the time allows), which only the strategies that
search use."""


def make_strategy(
    name: str,
    seed: int | None = None,
    budget_ms: float = DEFAULT_BUDGET_MS,
    samples: int | None = None,
) -> Strategy:
    """Build a strategy by name; raise ValueError naming the known ones otherwise. A search
    stops at ``budget_ms`` or after ``samples`` deals, whichever comes first."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise ValueError(f"unknown strategy {name!r}: choose one of {known}") from None
    return factory(seed, budget_ms, samples)
