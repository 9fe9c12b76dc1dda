"""Play a whole match in one process, bots and all: for the quick demo, tests and tools."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from engine.game import apply
from engine.rules import Rules
from engine.state import MatchState
from engine.strategy import Strategy
from engine.views import view_for
from events.envelope import Envelope
from events.model import AnyCommand, CreateMatch
from services.core.dealer import deal


def play_local_match(
    rules: Rules,
    strategies: Sequence[Strategy],
    *,
    seed: int | None = None,
    match_id: str = "local",
    on_event: Callable[[MatchState, Envelope], None] | None = None,
) -> tuple[MatchState, list[Envelope]]:
    """Play a match to its end with one strategy per seat; return the final state and log."""
    if len(strategies) != rules.players:
        raise ValueError(f"{rules.players} strategies needed, {len(strategies)} given")
    rng = random.Random(seed)
    log: list[Envelope] = []
    state: MatchState | None = None
    players = tuple(s.name for s in strategies)
    command: AnyCommand = CreateMatch(rules=rules, players=players)
    n = 0
    while True:
        n += 1
        state, events = apply(state, command)
        for event in events:
            envelope = Envelope(
                match_id=match_id,
                version=len(log) + 1,
                command_id=f"{match_id}-c{n}",
                ts=time.time(),
                event=event,
            )
            log.append(envelope)
            if on_event is not None:
                on_event(state, envelope)
        if state.phase == "over":
            return state, log
        if state.phase == "dealing":
            command = deal(rules, rng)
        else:
            command = strategies[state.turn].choose(view_for(state, state.turn))
