"""Match logs in schema 0, the worked example of an older shape (events/upcast.py), and
messages as the next schema would write them.

The service never wrote schema 0: these logs are today's matches written the way schema 0
would have had them — ``round_ended`` with ``pips`` for ``counts``, a pass or a timeout as
one ``turn_skipped`` event told apart by ``why`` — so every read path can be shown to bring
an older log to the current shape, exactly. A message of the next schema is today's with its
``schema`` one higher: what a reader must refuse rather than read as its own.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from engine.game import apply
from engine.rules import Rules
from engine.state import MatchState
from engine.strategy import make_strategy
from engine.views import view_for
from events.codec import JSON
from events.envelope import SCHEMA, Envelope
from events.model import AnyCommand, CreateMatch, TimeOutTurn
from services.core.dealer import deal
from services.store import NewEvent

SKIPPED = {"turn_passed": "pass", "turn_timed_out": "timeout"}


def played(match_id: str, seed: int = 7, timeout_every: int = 9) -> list[Envelope]:
    """A whole two-player Express match to a low target (passes and blocked rounds come
    often), every ``timeout_every``-th turn timed out (its default move follows)."""
    rules = Rules.make("express", players=2, target=30)
    rng = random.Random(seed)
    bots = [make_strategy("random", seed=seed + seat) for seat in range(rules.players)]
    command: AnyCommand = CreateMatch(rules=rules, players=("ann", "bob"), deadline_ms=10_000)
    log: list[Envelope] = []
    state: MatchState | None = None
    turns = 0
    while state is None or state.phase != "over":
        state, events = apply(state, command)
        for event in events:
            log.append(
                Envelope(
                    match_id=match_id,
                    version=len(log) + 1,
                    command_id=f"{match_id}-c{len(log) + 1}",
                    ts=1_700_000_000.0 + len(log),
                    event=event,
                )
            )
        if state.phase == "dealing":
            command = deal(rules, rng)
        elif state.phase == "playing":
            turns += 1
            if turns % timeout_every == 0:
                command = TimeOutTurn(seat=state.turn, version=state.version)
            else:
                command = bots[state.turn].choose(view_for(state, state.turn))
    return log


def downcast(envelope: Envelope) -> bytes:
    """The envelope as schema 0 stored it (the inverse of the upcaster from 0)."""
    raw: dict[str, Any] = msgspec.json.decode(JSON.encode(envelope))
    event = raw["event"]
    if event["type"] == "round_ended":
        event["pips"] = event.pop("counts")
    elif event["type"] in SKIPPED:
        raw["event"] = {
            "type": "turn_skipped",
            "seat": event["seat"],
            "why": SKIPPED[event["type"]],
        }
    raw["schema"] = 0
    return msgspec.json.encode(raw)


def stored(log: list[Envelope]) -> list[NewEvent]:
    """The log as schema 0 appended it to the store: each event's type as it was then."""
    events = []
    for envelope in log:
        data = downcast(envelope)
        events.append(NewEvent(msgspec.json.decode(data)["event"]["type"], data))
    return events


def current(log: list[Envelope]) -> list[NewEvent]:
    """The log as this schema appends it to the store."""
    return [NewEvent(e.event.__struct_config__.tag, JSON.encode(e)) for e in log]


def newer(message: msgspec.Struct) -> bytes:
    """An envelope, command envelope or turn as a process of the next schema would write it."""
    raw: dict[str, Any] = msgspec.json.decode(JSON.encode(message))
    raw["schema"] = SCHEMA + 1
    return msgspec.json.encode(raw)


def stored_newer(envelope: Envelope) -> NewEvent:
    """``envelope`` as a process of the next schema would append it to the store."""
    return NewEvent(envelope.event.__struct_config__.tag, newer(envelope))
