"""The referee's decision: a match state and a command in, everything the append must do out.

:func:`decide_command` is pure. It is handed the clock and the shuffle, checks where the command
may come from, asks the engine, deals every round that the command's events open (randomness
enters the log here), and returns a :class:`Decision` — the events, the state after them, the
next turn message for a house bot, the turn's time limit — or a :class:`Rejection` for the
sender. :func:`append_request` turns a decision into the one atomic append that stores it.

Deadlines are on the Redis server's clock: the append sets the next turn's deadline from the
server's TIME, and a move's arrival is its command-stream entry's time. Whether a move came in
time is not decided here but by the append that would store it (a :class:`TurnCheck`), against
the deadline as it stands in Redis — the one the timeout fires from, pushed back by any stall —
so every referee judges it the same: a move that arrived at or after the deadline is refused
(``late``) and the turn times out; one that arrived before its turn began is not an answer to
it (``not_your_turn``, C4); a timeout whose deadline a stall pushed back is not due yet.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine.game import decide, evolve
from engine.state import MatchState
from engine.views import view_for
from events.codec import JSON
from events.envelope import CommandEnvelope, Envelope
from events.model import (
    AnyCommand,
    AnyEvent,
    DealRound,
    DrawTile,
    PassTurn,
    PlayTile,
    Rejection,
    TimeOutTurn,
)
from events.wire import TurnMessage
from services.core.dealer import deal
from services.store.base import (
    Ack,
    AppendRequest,
    NewEvent,
    OutboxEntry,
    Refusal,
    Schedule,
    TurnCheck,
)
from services.store.keys import EXTERNAL, Keys

REFEREE_ONLY = (DealRound, TimeOutTurn)
"""Commands the referee makes itself; arriving on a command stream they are rejected."""
MOVES = (PlayTile, DrawTile, PassTurn)
"""The commands a seat makes on its turn: the ones a deadline applies to."""


class DealError(Exception):
    """Raised when the engine refuses a deal the referee made itself (a bug, never input)."""


@dataclass(slots=True)
class Decision:
    """What one accepted command does to its match (made once per move: not frozen, whose
    checks would cost a tenth of the decision)."""

    envelope: CommandEnvelope
    expected_version: int
    events: tuple[AnyEvent, ...]
    state: MatchState
    """The match after the events."""
    turn: TurnMessage | None
    """The next turn for a house bot's pool; None for an outside seat or a match not in play."""
    deadline_ms: int | None
    """The next turn's time limit, counted by the append from the Redis server's clock; None
    without one."""
    new_turn: bool
    """Whether a turn began: another seat's, or a new round's (a draw keeps the turn)."""
    now: float
    timed: bool = False
    """Whether the command answers a turn with a deadline — a move of the seat to play, or
    the referee's timeout — so that its append must check the turn's clock first."""

    @property
    def match_id(self) -> str:
        """The match decided."""
        return self.envelope.match_id


def decide_command(
    state: MatchState | None,
    envelope: CommandEnvelope,
    *,
    now: float,
    rng: random.Random,
    arrived: float | None = None,
    from_stream: bool = True,
    owned: bool = False,
) -> Decision | Rejection:
    """Decide ``envelope``'s command against ``state`` (None: the match has no events yet),
    leaving ``state`` as it was.

    ``from_stream`` says the command came from a command stream (a sender), where deals and
    timeouts are refused: the referee alone deals and keeps the clock. ``arrived`` is when the
    command reached the referee (for the turn's latency, on its own clock), ``now`` by default.
    Whether a move came in time is left to its append (``Decision.timed``, :func:`append_request`).

    ``state`` is left as it was, unless the caller says it is ``owned``: a state nobody else
    holds (the referee takes it out of its repository first), which the decision then evolves
    in place instead of copying — a copy is a tenth of a move's work.
    """
    command = envelope.command
    if from_stream and isinstance(command, REFEREE_ONLY):
        what = command.__struct_config__.tag
        message = f"{what} comes from the referee alone: it deals and keeps the clock"
        return Rejection(reason="bad_command", rule="-", message=message)
    result = decide(state, command)
    if isinstance(result, Rejection):
        return result
    expected = 0 if state is None else state.version
    before = None if state is None or state.phase != "playing" else (state.turn, state.round)
    timed = (
        before is not None
        and state is not None
        and bool(state.deadline_ms)
        and on_the_clock(command, state.turn)
    )
    events = list(result)
    after = state if owned or state is None else state.copy()  # evolve works in place
    for event in result:
        after = evolve(after, event)
    if after is None:
        raise DealError(f"{type(command).__name__} made no events for a new match")
    while after.phase == "dealing":
        dealt = decide(after, deal(after.rules, rng))
        if isinstance(dealt, Rejection):
            raise DealError(f"the engine refused the referee's deal: {dealt.message}")
        events.extend(dealt)
        for event in dealt:
            after = evolve(after, event)
    playing = after.phase == "playing"
    limit = after.deadline_ms if playing and after.deadline_ms else None
    deadline = None if limit is None else now + limit / 1000  # as this clock reckons it
    return Decision(
        envelope=envelope,
        expected_version=expected,
        events=tuple(events),
        state=after,
        turn=turn_for(envelope.match_id, after, deadline, now if arrived is None else arrived),
        deadline_ms=limit,
        new_turn=playing and before != (after.turn, after.round),
        now=now,
        timed=timed,
    )


def on_the_clock(command: AnyCommand, turn: int) -> bool:
    """Whether ``command`` is bound by the deadline of ``turn``'s seat: its move, or the
    referee's timeout of it. Other commands — resigning, aborting — are not moves of a turn."""
    if isinstance(command, TimeOutTurn):
        return True
    return isinstance(command, MOVES) and command.seat == turn


def refusal_rejection(refusal: Refusal, arrived_ms: int | None) -> Rejection:
    """What the sender of a move its append refused is told (``late``, ``not_your_turn``)."""
    if refusal.reason == "early":
        message = "the move reached the referee before this turn began: it was not this seat's"
        return Rejection(reason="not_your_turn", rule="C4", message=message)
    late_by = "" if arrived_ms is None else f" {arrived_ms - refusal.at_ms} ms"
    message = f"the move reached the referee{late_by} after its turn's deadline"
    return Rejection(reason="late", rule="-", message=message)


def turn_for(
    match_id: str, state: MatchState, deadline: float | None, caused_at: float
) -> TurnMessage | None:
    """The turn message for the seat to play, if a house bot plays it (C8: its view only).

    Outside seats follow the match through the gateway, which builds their turns from the log.
    """
    if state.phase != "playing":
        return None
    pool = pool_of(state, state.turn)
    if pool == EXTERNAL:
        return None
    return TurnMessage(
        match_id=match_id,
        seat=state.turn,
        version=state.version,
        pool=pool,
        deadline=deadline,
        caused_at=caused_at,
        view=view_for(state, state.turn),
    )


def pool_of(state: MatchState, seat: int) -> str:
    """The pool of house bots playing ``seat``, or ``EXTERNAL`` for an outside player."""
    return (state.bots[seat] if state.bots else None) or EXTERNAL


def append_request(
    decision: Decision,
    keys: Keys,
    partition: int,
    *,
    ack: Ack | None = None,
    watch_ms: int | None = None,
    arrived_ms: int | None = None,
    stall_ms: int | None = None,
) -> AppendRequest:
    """The atomic append that stores ``decision``: its events, the turn message, the turn's
    deadline (and, when a turn began, when it did) set from the Redis server's clock or
    cleared, and ``ack`` (the command's entry, acknowledged by the append).

    With ``stall_ms``, a decision bound by its turn's deadline (``Decision.timed``) is
    checked by the append against that deadline as it stands, a stall of that long made up
    for first (:class:`TurnCheck`): a move from a command stream by ``arrived_ms`` (when it
    reached the stream, on the server's clock), the referee's timeout by the server's now.

    With ``watch_ms``, a new match goes on its partition's watch list, first checked that
    long after now, and a match that ends leaves it: the referee checks the live matches on
    the list, so a turn that is lost (a Redis that restarted, say) is found and sent again.
    The appends in between leave the list alone.
    """
    envelope = decision.envelope
    base = decision.expected_version
    new = [
        NewEvent(
            str(e.__struct_config__.tag),
            JSON.encode(
                Envelope(
                    match_id=envelope.match_id,
                    version=base + i,
                    command_id=envelope.command_id,
                    ts=decision.now,
                    event=e,
                )
            ),
        )
        for i, e in enumerate(decision.events, 1)
    ]
    turn = decision.turn
    outbox = (
        () if turn is None else (OutboxEntry(keys.turns(partition, turn.pool), JSON.encode(turn)),)
    )
    schedule: list[Schedule] = []
    match_id = envelope.match_id
    if decision.deadline_ms is not None:
        schedule.append(Schedule.after(keys.deadlines(partition), match_id, decision.deadline_ms))
        if decision.new_turn:
            schedule.append(Schedule.after(keys.turn_began(partition), match_id, 0))
    elif decision.state.deadline_ms:
        schedule.append(Schedule(keys.deadlines(partition), match_id, None))
        schedule.append(Schedule(keys.turn_began(partition), match_id, None))
    if watch_ms is not None and base == 0:
        at = int(decision.now * 1000) + watch_ms
        schedule.append(Schedule(keys.watch(partition), envelope.match_id, at))
    elif watch_ms is not None and decision.state.phase == "over":
        schedule.append(Schedule(keys.watch(partition), envelope.match_id, None))
    turn_check = None
    timeout = isinstance(envelope.command, TimeOutTurn)
    if decision.timed and stall_ms is not None and (timeout or arrived_ms is not None):
        turn_check = TurnCheck(
            keys.deadlines(partition),
            keys.turn_began(partition),
            keys.clock(partition),
            match_id,
            None if timeout else arrived_ms,
            stall_ms,
        )
    return AppendRequest(
        match_id=envelope.match_id,
        events=new,
        expected_version=base,
        command_id=envelope.command_id,
        outbox=outbox,
        schedule=tuple(schedule),
        ack=ack,
        turn=turn_check,
    )
