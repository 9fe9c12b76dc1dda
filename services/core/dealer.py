"""Where randomness enters a match: each round's secret seed, from which the shuffle and the
first leader's draw (S1) follow (engine.fairness, F1; docs/fairness.md)."""

from __future__ import annotations

import random
import secrets

from engine.fairness import SALT_BYTES, SEED_BYTES, seeded_deal
from engine.rules import Rules
from events.model import DealRound


def deal(rules: Rules, rng: random.Random | None = None) -> DealRound:
    """A fresh deal for the next round, with the seed and salt that make it checkable.

    The seed and salt come from the operating system's generator (``secrets``), unless ``rng``
    is a seeded ``random.Random``: a test or a local match that must deal the same every run.
    """
    seed = _random_bytes(SEED_BYTES, rng)
    salt = _random_bytes(SALT_BYTES, rng)
    dealt = seeded_deal(seed, rules.top, rules.players)
    return DealRound(
        order=dealt.order, first_leader=dealt.first_leader, seed=seed.hex(), salt=salt.hex()
    )


def _random_bytes(n: int, rng: random.Random | None) -> bytes:
    if rng is None or isinstance(rng, random.SystemRandom):
        return secrets.token_bytes(n)
    return rng.randbytes(n)
