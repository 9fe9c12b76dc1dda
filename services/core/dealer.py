"""Where randomness enters a match: the shuffle and the first leader's draw (S1)."""

from __future__ import annotations

import random

from engine.rules import Rules
from engine.tiles import full_set
from events.model import DealRound


def deal(rules: Rules, rng: random.Random) -> DealRound:
    """A freshly shuffled deal for the next round; the command records it for replay."""
    order = list(full_set(rules.top))
    rng.shuffle(order)
    return DealRound(order=tuple(order), first_leader=rng.randrange(rules.players))
