"""The referee's decision as a pure function: state and command in, the append's content out."""

from __future__ import annotations

import random

import msgspec
import pytest

from engine.rules import Rules
from engine.state import MatchState
from engine.views import view_for
from events.codec import JSON
from events.envelope import CommandEnvelope
from events.model import (
    AnyCommand,
    CreateMatch,
    DealRound,
    DrawTile,
    PlayTile,
    Rejection,
    Resign,
    TimeOutTurn,
)
from services.core.decision import Decision, append_request, decide_command, refusal_rejection
from services.store.base import AppendRequest, Refusal, TurnCheck
from services.store.keys import Keys

pytestmark = pytest.mark.behaviour


def created(
    deadline_ms: int = 0, seats: tuple[str | None, ...] = ("greedy", "random"), seed: int = 5
) -> Decision:
    """A new two-player Straight match, dealt."""
    create = CreateMatch(
        rules=Rules.make("straight", players=2),
        players=("a", "b"),
        bots=seats,
        deadline_ms=deadline_ms,
    )
    envelope = CommandEnvelope(match_id="m-1", command_id="create", command=create)
    decision = decide_command(None, envelope, now=100.0, rng=random.Random(seed))
    assert isinstance(decision, Decision)
    return decision


def snapshot(state: MatchState) -> bytes:
    """Everything a seat and a spectator may see of the state, plus its version."""
    views = [view_for(state, seat) for seat in range(state.rules.players)]
    return msgspec.json.encode([state.version, views, sorted(map(sorted, state.hands))])


def test_a_decision_leaves_the_state_it_was_given_as_it_was() -> None:
    state = created().state
    before = snapshot(state)
    move = view_for(state, state.turn).legal[0]
    envelope = CommandEnvelope(match_id="m-1", command_id="move", command=move)
    decision = decide_command(state, envelope, now=101.0, rng=random.Random(1))
    assert isinstance(decision, Decision)
    assert decision.state.version == state.version + len(decision.events)
    assert snapshot(state) == before


def test_the_same_state_command_clock_and_shuffle_give_the_same_decision() -> None:
    """S1: the shuffle is handed in, so a decision can be made again exactly."""
    first, again = created(), created()
    assert first.events == again.events
    assert JSON.encode(first.turn) == JSON.encode(again.turn)


def test_a_new_match_is_dealt_and_its_first_turn_and_deadline_are_decided() -> None:
    decision = created(deadline_ms=4_000)
    assert [e.__struct_config__.tag for e in decision.events] == ["match_created", "round_started"]
    assert (decision.deadline_ms, decision.new_turn) == (4_000, True)
    assert decision.turn is not None and decision.turn.seat == decision.state.turn
    assert decision.turn.deadline == 104.0  # as the referee's clock reckons it
    assert decision.turn.view.hand == tuple(sorted(decision.state.hands[decision.state.turn]))


def test_an_outside_seat_to_play_gets_no_turn_message() -> None:
    decision = created(seats=(None, None))
    assert decision.turn is None


def test_deals_and_timeouts_from_outside_are_refused_and_from_inside_decided() -> None:
    state = created().state
    for command in (
        DealRound(order=((0, 0),)),
        TimeOutTurn(seat=state.turn, version=state.version),
    ):
        envelope = CommandEnvelope(match_id="m-1", command_id="x", command=command)
        refused = decide_command(state, envelope, now=1.0, rng=random.Random(1))
        assert isinstance(refused, Rejection) and refused.reason == "bad_command"
    timeout = CommandEnvelope(
        match_id="m-1", command_id="t", command=TimeOutTurn(seat=state.turn, version=state.version)
    )
    decided = decide_command(state, timeout, now=1.0, rng=random.Random(1), from_stream=False)
    assert isinstance(decided, Decision)
    assert decided.events[0].__struct_config__.tag == "turn_timed_out"


def test_an_illegal_move_is_a_rejection_naming_its_rule() -> None:
    state = created().state
    other = 1 - state.turn
    envelope = CommandEnvelope(
        match_id="m-1", command_id="x", command=PlayTile(seat=other, tile=(6, 6))
    )
    refused = decide_command(state, envelope, now=1.0, rng=random.Random(1))
    assert isinstance(refused, Rejection) and refused.rule != ""


def test_the_append_stores_the_events_the_turn_the_deadline_and_the_watch_in_one_request() -> None:
    keys = Keys("dom", 8)
    partition = keys.partition_of("m-1")
    decision = created(deadline_ms=4_000)
    request = append_request(decision, keys, partition, watch_ms=10_000)
    assert request.expected_version == 0
    assert [JSON.decode_envelope(e.data).version for e in request.events] == [1, 2]
    assert [o.stream for o in request.outbox] == [keys.turns(partition, "greedy")]
    assert {(s.key, s.at_ms, s.relative) for s in request.schedule} == {
        (keys.deadlines(partition), 4_000, True),  # counted from the Redis server's clock
        (keys.turn_began(partition), 0, True),
        (keys.watch(partition), 110_000, False),
    }


def judged(
    state: MatchState, command: AnyCommand, arrived_ms: int | None = 100_500
) -> AppendRequest:
    """The append of ``command`` from a stream (``arrived_ms``: when it reached it), or the
    referee's own with ``arrived_ms`` None, checked against a stall of 1 s."""
    keys = Keys("dom", 8)
    envelope = CommandEnvelope(match_id="m-1", command_id="x", command=command)
    decision = decide_command(
        state, envelope, now=1.0, rng=random.Random(1), from_stream=arrived_ms is not None
    )
    assert isinstance(decision, Decision), decision
    partition = keys.partition_of("m-1")
    return append_request(decision, keys, partition, arrived_ms=arrived_ms, stall_ms=1_000)


def test_a_move_on_the_clock_is_judged_by_its_append_against_the_turns_stored_deadline() -> None:
    """README (deadlines): whether a move came in time is decided where the deadline is kept,
    as it stands (a stall made up for first), never against a referee's memory of it."""
    keys = Keys("dom", 8)
    p = keys.partition_of("m-1")
    state = created(deadline_ms=4_000).state
    move = view_for(state, state.turn).legal[0]
    assert judged(state, move).turn == TurnCheck(
        keys.deadlines(p), keys.turn_began(p), keys.clock(p), "m-1", 100_500, 1_000
    )
    timeout = judged(state, TimeOutTurn(seat=state.turn, version=state.version), None).turn
    assert timeout is not None and timeout.arrived_ms is None  # judged against the server's now


def test_a_command_off_the_clock_is_appended_without_a_turn_check() -> None:
    """Resigning is no move of a turn; a match without deadlines has no clock to judge."""
    state = created(deadline_ms=4_000).state
    assert judged(state, Resign(seat=state.turn)).turn is None
    assert judged(state, Resign(seat=1 - state.turn)).turn is None
    untimed = created().state
    assert judged(untimed, view_for(untimed, untimed.turn).legal[0]).turn is None


def test_a_refused_move_tells_its_sender_late_or_not_its_turn() -> None:
    """C4: a move that reached the stream before its turn began was not the seat's answer."""
    late = refusal_rejection(Refusal("late", 104_000), 250_000)
    assert (late.reason, late.rule) == ("late", "-") and "146000 ms after" in late.message
    early = refusal_rejection(Refusal("early", 100_000), 99_999)
    assert (early.reason, early.rule) == ("not_your_turn", "C4")


def test_a_turn_begins_with_another_seat_or_round_and_a_draw_keeps_it() -> None:
    """S3: a seat that draws goes on with the same turn: when it began stays, the deadline
    is counted again from the draw."""
    for seed in range(200):
        state = created(deadline_ms=4_000, seed=seed).state
        lead = view_for(state, state.turn).legal[0]
        envelope = CommandEnvelope(match_id="m-1", command_id="lead", command=lead)
        led = decide_command(state, envelope, now=101.0, rng=random.Random(1))
        assert isinstance(led, Decision)
        assert led.new_turn and led.state.turn != state.turn
        if any(isinstance(m, DrawTile) for m in view_for(led.state, led.state.turn).legal):
            break
    else:
        raise AssertionError("no deal of 200 left the second seat to draw")
    draw = DrawTile(seat=led.state.turn)
    envelope = CommandEnvelope(match_id="m-1", command_id="draw", command=draw)
    drew = decide_command(led.state, envelope, now=102.0, rng=random.Random(1))
    assert isinstance(drew, Decision)
    assert drew.state.turn == led.state.turn and drew.deadline_ms == 4_000
    assert not drew.new_turn
    request = append_request(drew, Keys("dom", 8), Keys("dom", 8).partition_of("m-1"))
    assert [s.key.rsplit(":", 1)[1] for s in request.schedule] == ["deadlines"]
