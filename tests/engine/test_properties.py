"""Invariants over random games of every family, player count and set (property tests)."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.game import decide, evolve, legal_moves, replay
from engine.rules import Rules
from engine.state import MatchState
from engine.tiles import full_set
from engine.verify import verify
from engine.views import public_view, redact, view_for
from events.codec import JSON, MSGPACK
from events.envelope import Envelope
from events.model import (
    Abort,
    AnyCommand,
    AnyEvent,
    CancelMatch,
    CreateMatch,
    DrawTile,
    PassTurn,
    PlayTile,
    Rejection,
    Resign,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TimeOutTurn,
)
from events.vocabulary import END_NAMES
from services.core.dealer import deal

pytestmark = pytest.mark.engine

RULE_SETS = [
    Rules.make(family, players=players, partners=partners, top=top)
    for family in ("express", "straight")
    for players, partners in ((2, False), (3, False), (4, False), (4, True))
    for top in (6, 9, 12)
]

games = st.tuples(st.sampled_from(RULE_SETS), st.integers(0, 2**32 - 1))
fast = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_match(rules: Rules, seed: int, max_steps: int = 400):  # type: ignore[no-untyped-def]
    """Yield (state before, command, events) for one random match, a few rounds at most."""
    rng = random.Random(seed)
    state: MatchState | None = None
    command: AnyCommand = CreateMatch(rules=rules, players=tuple("abcd"[: rules.players]))
    for _ in range(max_steps):
        result = decide(state, command)
        assert not isinstance(result, Rejection), result
        yield state, command, result
        for event in result:
            state = evolve(state, event)
        assert state is not None
        if state.phase == "over":
            return
        command = deal(rules, rng) if state.phase == "dealing" else rng.choice(legal_moves(state))


def _played(state: MatchState) -> list[tuple[int, int]]:
    return [e.tile for e in state.history if isinstance(e, TilePlayed)]


@fast
@given(games)
def test_every_tile_of_the_set_is_always_accounted_for(game: tuple[Rules, int]) -> None:
    """C1, C5: hands, stock and line together hold the whole set, each tile once."""
    rules, seed = game
    for state, _, _ in random_match(rules, seed):
        if state is None or (state.phase == "dealing" and state.round == 0):
            continue
        tiles = [t for h in state.hands for t in h] + state.stock + _played(state)
        assert sorted(tiles) == list(full_set(rules.top))


@fast
@given(games)
def test_replaying_the_events_reproduces_the_live_state(game: tuple[Rules, int]) -> None:
    """Replay equals live: folding the log again gives the same state at every step."""
    rules, seed = game
    log: list[AnyEvent] = []
    live: MatchState | None = None
    for _, _, events in random_match(rules, seed):
        log.extend(events)
        for event in events:
            live = evolve(live, event)
        assert live is not None
        again = replay(log)
        assert view_for(again, 0) == view_for(live, 0)
        assert again.hands == live.hands and again.stock == live.stock
        assert again.version == live.version == len(log)


@fast
@given(games)
def test_no_view_ever_shows_a_tile_held_by_another_seat_or_the_stock(
    game: tuple[Rules, int],
) -> None:
    """C8: a seat sees its own hand, the table, counts; never another hand or the stock."""
    rules, seed = game
    for state, _, _ in random_match(rules, seed):
        if state is None or state.phase != "playing":
            continue
        for seat in [None, *range(rules.players)]:
            view = view_for(state, seat)
            hidden = set(state.stock)
            for other in range(rules.players):
                if other != seat:
                    hidden |= state.hands[other]
            seen: set[tuple[int, int]] = set(view.hand or ()) | set(view.played)
            for event in (redact(e, seat) for e in state.history):
                if isinstance(event, RoundStarted):
                    assert event.stock is None
                    for s, hand in enumerate(event.hands):
                        assert hand is None or s == seat
                        seen |= set(hand or ())
                    if event.forced_lead is not None:  # E2's lead: a tile of the leader's hand
                        seen.add(event.forced_lead)
                elif isinstance(event, TileDrawn):
                    assert event.tile is None or event.seat == seat
                    if event.tile is not None:
                        seen.add(event.tile)
            for other, numbers in enumerate(view.voids):  # what passes and draws showed
                assert not any(set(t) & set(numbers) for t in state.hands[other])
            seen |= {m.tile for m in view.legal if isinstance(m, PlayTile)}
            assert not seen & hidden
            assert view.hand == (None if seat is None else tuple(sorted(state.hands[seat])))
            assert view.hand_sizes == tuple(len(h) for h in state.hands)
            assert view.stock_size == len(state.stock)
        assert public_view(state).hand is None


@fast
@given(games)
def test_every_event_and_command_survives_both_codecs(game: tuple[Rules, int]) -> None:
    """Every message round-trips through JSON and MessagePack unchanged."""
    rules, seed = game
    version = 0
    for _, command, events in random_match(rules, seed, max_steps=150):
        for codec in (JSON, MSGPACK):
            assert codec.decode_command(codec.encode(command)) == command
        for event in events:
            version += 1
            envelope = Envelope(match_id="m1", version=version, command_id="c", ts=1.5, event=event)
            for codec in (JSON, MSGPACK):
                assert codec.decode_event(codec.encode(event)) == event
                assert codec.decode_envelope(codec.encode(envelope)) == envelope


def _candidates(state: MatchState, rng: random.Random) -> list[AnyCommand]:
    """A spread of commands, legal and not, for the current position."""
    rules = state.rules
    tiles = list(full_set(rules.top))
    out: list[AnyCommand] = []
    for _ in range(12):
        seat = rng.randrange(-1, rules.players + 1)
        t = rng.choice(tiles)
        end = rng.choice([None, *END_NAMES])
        out.append(
            rng.choice(
                [PlayTile(seat=seat, tile=t, end=end), DrawTile(seat=seat), PassTurn(seat=seat)]
            )
        )
    return out


@fast
@given(games)
def test_every_illegal_move_is_rejected_with_a_reason_and_changes_nothing(
    game: tuple[Rules, int],
) -> None:
    """Anything not in legal_moves is rejected (with a reason and rule); decide is pure."""
    rules, seed = game
    rng = random.Random(seed)
    for state, _, _ in random_match(rules, seed, max_steps=120):
        if state is None or state.phase == "dealing":
            continue
        legal = legal_moves(state)
        before = msgspec.json.encode(view_for(state, state.turn))
        for command in _candidates(state, rng) + legal:
            result = decide(state, command)
            is_legal = command in legal
            if (
                isinstance(command, PlayTile)
                and command.seat == state.turn
                and command.end is None
                and not state.board.empty
            ):
                fits = [m for m in legal if isinstance(m, PlayTile) and m.tile == command.tile]
                is_legal = len(fits) == 1
            if is_legal:
                assert not isinstance(result, Rejection), (command, result)
            else:
                assert isinstance(result, Rejection), command
                assert result.reason and result.rule and result.message
        assert msgspec.json.encode(view_for(state, state.turn)) == before


@fast
@given(games)
def test_a_resignation_ends_the_match_for_the_other_side(game: tuple[Rules, int]) -> None:
    """Resigning ends the match at once; the resigning side never wins."""
    rules, seed = game
    for state, _, _ in random_match(rules, seed, max_steps=30):
        if state is None:
            continue
        seat = seed % rules.players
        result = decide(state, Resign(seat=seat))
        assert not isinstance(result, Rejection)
        end = result[-1]
        assert end.__struct_config__.tag == "match_ended"
        assert getattr(end, "winner", None) != rules.side_of(seat)


def _unruly(state: MatchState, rng: random.Random) -> AnyCommand:
    """A command of a match that may end early: often a timeout, now and then an abort by any
    seat (refused once its side has moved) or the operator's cancel, else a legal move."""
    r = rng.random()
    if r < 0.3:
        return TimeOutTurn(seat=state.turn, version=state.version)
    if r < 0.33:
        return Abort(seat=rng.randrange(state.rules.players))
    if r < 0.335:
        return CancelMatch()
    return rng.choice(legal_moves(state))


@fast
@given(games, st.integers(0, 3), st.integers(0, 3))
def test_every_way_a_match_ends_replays_verifies_and_names_a_fair_winner(
    game: tuple[Rules, int], forfeit_after: int, max_rounds: int
) -> None:
    """README (forfeit, round cap, abort, cancel): random matches with timeouts, aborts and
    cancels. Every log replays to the live state and verifies; an abort is refused only once
    the seat's side has moved; a called-off match has no winner; a resigning or forfeiting
    side never wins and the winner has the best score of the rest; after the round cap the
    best score wins (C7 on ties)."""
    rules, seed = game
    rng = random.Random(seed)
    players = tuple("abcd"[: rules.players])
    command: AnyCommand = CreateMatch(
        rules=rules, players=players, forfeit_after=forfeit_after, max_rounds=max_rounds
    )
    state: MatchState | None = None
    log: list[AnyEvent] = []
    for _ in range(300):
        result = decide(state, command)
        if isinstance(result, Rejection):
            assert isinstance(command, Abort) and result.reason == "too_late_to_abort"
            assert state is not None and state.moved[rules.side_of(command.seat)]
        else:
            for event in result:
                state = evolve(state, event)
            log.extend(result)
        assert state is not None
        if state.phase == "over":
            break
        command = deal(rules, rng) if state.phase == "dealing" else _unruly(state, rng)
    assert state is not None
    assert verify(log) is None
    assert view_for(replay(log), 0) == view_for(state, 0)
    if forfeit_after:  # 0: a seat never forfeits, however many turns it lets time out
        assert all(n < forfeit_after for n in state.timeouts) or state.phase == "over"
    ended = state.result
    if ended is None:
        return
    scores = ended.scores
    if ended.reason in ("aborted", "cancelled"):
        assert ended.winner is None
        return
    assert ended.winner is not None
    if ended.reason in ("resigned", "forfeit"):
        assert ended.resigned is not None
        loser = rules.side_of(ended.resigned)
        assert ended.winner != loser
        assert scores[ended.winner] == max(p for side, p in enumerate(scores) if side != loser)
    if ended.reason == "rounds":
        assert state.round == max_rounds
        assert scores[ended.winner] == max(scores)
    if ended.reason == "forfeit":
        assert state.timeouts[ended.resigned] == forfeit_after
