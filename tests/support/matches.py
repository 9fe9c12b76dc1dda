"""Whole matches played in this process, for tests that need a real log without a service."""

from __future__ import annotations

import random

from engine.game import decide, evolve, legal_moves
from engine.rules import Rules
from engine.state import MatchState
from events.model import AnyCommand, AnyEvent, CreateMatch, Rejection
from services.core.dealer import deal


def random_match(rules: Rules, seed: int) -> list[AnyEvent]:
    """A whole match of random legal moves, every round dealt by the service's dealer (from a
    seed drawn from ``seed``: the same seed, the same log)."""
    rng = random.Random(seed)
    command: AnyCommand = CreateMatch(rules=rules, players=tuple("abcd"[: rules.players]))
    state: MatchState | None = None
    log: list[AnyEvent] = []
    while state is None or state.phase != "over":
        result = decide(state, command)
        assert not isinstance(result, Rejection), result
        for event in result:
            state = evolve(state, event)
        log.extend(result)
        assert state is not None
        if state.phase == "dealing":
            command = deal(rules, rng)
        elif state.phase == "playing":
            command = rng.choice(legal_moves(state))
    return log
