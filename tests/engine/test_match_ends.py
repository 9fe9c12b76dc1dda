"""How a match ends other than at its target (C9): a forfeit after timeouts in a row, the round
cap, an abort before a side has moved, and the operator's cancel. These are the service's rules,
written in README.md's "Rules: choices where RULES.md is silent" (cited as README below); each
of them leaves a log that ``verify`` re-derives."""

from __future__ import annotations

import msgspec
import pytest

from engine.game import FoldError, decide, replay
from engine.rules import Rules
from engine.verify import verify
from events.codec import JSON, MSGPACK
from events.model import (
    Abort,
    AnyCommand,
    CancelMatch,
    CreateMatch,
    MatchEnded,
    Rejection,
    Resign,
    RoundEnded,
    TilePlayed,
    TimeOutTurn,
    TurnPassed,
    TurnTimedOut,
)
from tests.engine.helpers import Table, match_end, round_end, tiles

pytestmark = pytest.mark.engine

# Two players, Express: seat 0 must lead 6-6 (E2); seat 1 then holds 5-6.
EXPRESS_2P = ["6-6 3-6 0-6 1-6 3-3 1-3 0-1", "5-6 3-4 5-5 4-4 4-5 2-5 0-5"]
# Two players, Express: 6-6, 4-6, 5-6 block the round (ends 4 | 5); seat 1 wins 27.
BLOCKING_2P = ["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"]
# Four players in pairs, Express: seat 0 leads 6-6.
PAIRS = [
    "6-6 2-6 4-5 1-5 2-2 2-4 2-5",
    "0-6 2-3 5-6 0-0 0-2 0-3 1-1",
    "0-1 3-6 3-3 3-4 3-5 4-4 5-5",
    "1-6 4-6 0-4 0-5 1-2 1-3 1-4",
]


def time_out(table: Table) -> list[object]:
    """The events of the seat to move running out of time at the current version."""
    return list(table.send(TimeOutTurn(seat=table.state.turn, version=table.state.version)))


def assert_verifies(table: Table) -> None:
    """The whole log is what today's rules decide, event for event."""
    assert verify(table.log) is None


# --- Forfeit ----------------------------------------------------------------------------------


def test_a_seat_that_times_out_forfeit_after_turns_in_a_row_forfeits_the_match() -> None:
    """README (forfeit): with forfeit_after 2, seat 0's second timeout in a row ends the match
    at once: no default move, the round ends with every hand shown and nothing scored, and the
    other side wins."""
    table = Table("express", players=2, forfeit_after=2)
    table.deal(EXPRESS_2P)
    assert time_out(table) == [TurnTimedOut(seat=0), TilePlayed(seat=0, tile=(6, 6), end=None)]
    table.run("1: 5-6 left")
    events = time_out(table)
    assert [type(e) for e in events] == [TurnTimedOut, RoundEnded, MatchEnded]
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("forfeit", None, None, 0)
    assert ended.hands == (tiles("0-1 0-6 1-3 1-6 3-3 3-6"), tiles("0-5 2-5 3-4 4-4 4-5 5-5"))
    assert match_end(events) == MatchEnded(winner=1, scores=(0, 0), reason="forfeit", resigned=0)
    assert table.state.phase == "over"
    assert_verifies(table)


def test_a_move_of_its_own_starts_the_seats_count_of_timeouts_again() -> None:
    """README (forfeit): timeout, own move, timeout is one in a row, not two; the next timeout
    of seat 0 is its second in a row and forfeits."""
    table = Table("express", players=2, forfeit_after=2)
    table.deal(EXPRESS_2P)
    time_out(table)  # seat 0: 6-6 played for it
    table.run("1: 5-6 left", "0: 3-6 right", "1: 3-4 right")  # seat 0 moves on its own
    assert time_out(table) == [TurnTimedOut(seat=0), TurnPassed(seat=0)]  # one in a row
    assert table.state.timeouts == [1, 0]
    table.run("1: 4-4 right")
    assert match_end(time_out(table)).reason == "forfeit"
    assert_verifies(table)


def test_another_seats_timeouts_do_not_break_a_seats_run() -> None:
    """README (forfeit): the count is each seat's own: seat 1 timing out in between leaves
    seat 0's run going."""
    table = Table("express", players=2, forfeit_after=2)
    table.deal(EXPRESS_2P)
    time_out(table)
    time_out(table)  # seat 1's first
    assert table.state.timeouts == [1, 1]
    assert match_end(time_out(table)) == MatchEnded(
        winner=1, scores=(0, 0), reason="forfeit", resigned=0
    )


def test_timeouts_in_a_row_run_on_from_one_round_into_the_next() -> None:
    """README (forfeit): seat 0 times out on both its turns of a blocked round (6-6, then its
    heaviest play 5-6) and on the lead of the next: the third in a row forfeits. Seat 1, with
    the round's 27, wins."""
    table = Table("express", players=2, forfeit_after=3)
    table.deal(BLOCKING_2P)
    time_out(table)
    table.run("1: 4-6 left")
    assert round_end(time_out(table)).outcome == "blocked"
    table.deal(EXPRESS_2P)  # E3: after the winner, seat 1, seat 0 leads
    assert table.state.turn == 0
    assert match_end(time_out(table)) == MatchEnded(
        winner=1, scores=(0, 27), reason="forfeit", resigned=0
    )
    assert_verifies(table)


def test_a_forfeit_loses_for_the_whole_pair_and_the_other_pair_wins() -> None:
    """README (forfeit), C3: seat 1 forfeits for pair 1+3."""
    table = Table("express", forfeit_after=1)
    table.deal(PAIRS)
    table.run("0: 6-6")
    events = time_out(table)
    assert match_end(events) == MatchEnded(winner=0, scores=(0, 0), reason="forfeit", resigned=1)
    assert_verifies(table)


def test_without_forfeit_after_a_seat_may_time_out_for_ever() -> None:
    """README (forfeit): forfeit_after 0 (the default) never forfeits."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    for _ in range(6):
        time_out(table)
    assert table.state.phase == "playing"
    assert table.state.timeouts == [3, 3]


# --- The round cap ----------------------------------------------------------------------------


def test_the_match_ends_after_max_rounds_and_the_highest_score_wins() -> None:
    """README (round cap): with max_rounds 1, the blocked first round (seat 1 scores 27 of a
    target of 100) ends the match: side 1 wins by 27 to 0."""
    table = Table("express", players=2, max_rounds=1)
    table.deal(BLOCKING_2P)
    events = table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert round_end(events).outcome == "blocked"
    assert match_end(events) == MatchEnded(winner=1, scores=(0, 27), reason="rounds")
    assert_verifies(table)


def test_a_tie_after_the_last_round_goes_to_the_side_nearest_that_rounds_hand() -> None:
    """README (round cap), C7: three players, rounds led in rotation. Round 1: seat 1 leads
    6-6 and blocks; seats 0 and 2 tie at 30 and seat 2 wins 30 + 45 = 75 (E5). Round 2: seat 2
    leads 6-6 with every other 6 asleep; counts 30, 40 and 35; seat 0 wins 40 + 35 = 75. Sides
    0 and 2 tie at 75: seat 2, the hand, is nearest (seat 0 would win in plain seat order)."""
    table = Table("express", players=3, next_leader="rotate", max_rounds=2)
    asleep = "0-6 1-6 2-6 3-6 4-6 5-6 0-0"
    table.deal(
        [
            "3-4 3-3 2-4 0-1 0-2 1-2 1-4",
            "6-6 5-5 4-5 4-4 3-5 2-5 0-3",
            "0-4 0-5 1-1 1-3 1-5 2-2 2-3",
        ],
        asleep,
    )
    assert round_end(table.run("1: 6-6")).scores == (0, 0, 75)
    table.deal(
        [
            "0-1 0-2 0-3 0-4 0-5 1-5 4-5",
            "1-4 2-2 2-3 2-4 2-5 3-3 3-4",
            "6-6 5-5 4-4 3-5 1-1 1-2 1-3",
        ],
        asleep,
    )
    assert table.state.leader == 2
    events = table.run("2: 6-6")
    ended = round_end(events)
    assert (ended.counts, ended.winner, ended.points) == ((30, 40, 35), 0, 75)
    assert match_end(events) == MatchEnded(winner=2, scores=(75, 0, 75), reason="rounds")
    assert_verifies(table)


def test_a_side_reaching_the_target_in_the_last_round_wins_by_the_target() -> None:
    """C9 first: the round cap applies only when no side reached the target."""
    table = Table("express", players=2, target=27, max_rounds=1)
    table.deal(BLOCKING_2P)
    events = table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert match_end(events) == MatchEnded(winner=1, scores=(0, 27), reason="target")


def test_rounds_before_the_cap_go_on_as_usual() -> None:
    """README (round cap): with max_rounds 2, the first round's end deals the next."""
    table = Table("express", players=2, max_rounds=2)
    table.deal(BLOCKING_2P)
    events = table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert not [e for e in events if isinstance(e, MatchEnded)]
    assert table.state.phase == "dealing"


# --- Abort ------------------------------------------------------------------------------------


def test_a_seat_whose_side_has_not_moved_may_abort_and_the_match_has_no_winner() -> None:
    """README (abort): seat 1 has not moved; the round ends with every hand shown, the match
    ends aborted with no winner."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    table.run("0: 6-6")
    events = table.send(Abort(seat=1))
    assert [type(e) for e in events] == [RoundEnded, MatchEnded]
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("aborted", None, None, 0)
    assert ended.hands[1] == tuple(sorted(tiles(EXPRESS_2P[1])))
    assert match_end(events) == MatchEnded(winner=None, scores=(0, 0), reason="aborted", resigned=1)
    assert_verifies(table)


def test_a_seat_that_has_moved_may_not_abort() -> None:
    """README (abort): after its lead, seat 0 must resign instead."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    table.run("0: 6-6")
    rejection = table.reject(Abort(seat=0))
    assert rejection.reason == "too_late_to_abort"
    assert "resign" in rejection.message


def test_a_move_played_for_a_seat_after_a_timeout_is_not_its_own() -> None:
    """README (abort): the referee led 6-6 for seat 0 when it ran out of time; seat 0 has not
    moved by itself and may still abort."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    time_out(table)
    assert match_end(table.send(Abort(seat=0))).reason == "aborted"
    assert_verifies(table)


def test_a_partners_move_is_the_sides_move() -> None:
    """README (abort), C3: seat 0 led, so seat 2 (its partner) may not abort; seats 1 and 3 may."""
    table = Table("express")
    table.deal(PAIRS)
    table.run("0: 6-6")
    assert table.reject(Abort(seat=2)).reason == "too_late_to_abort"
    assert not isinstance(decide(table.state, Abort(seat=3)), Rejection)


def test_an_abort_between_rounds_ends_the_match_alone() -> None:
    """README (abort): no round is on, so only the match's end is recorded. (Seat 1 never moved
    by itself: its turn of the blocked round timed out.)"""
    table = Table("express", players=2)
    table.deal(BLOCKING_2P)
    table.run("0: 6-6")
    time_out(table)  # seat 1: 4-6 played for it
    table.run("0: 5-6 right")
    assert table.state.phase == "dealing"
    assert table.send(Abort(seat=1)) == [
        MatchEnded(winner=None, scores=(0, 27), reason="aborted", resigned=1)
    ]
    assert_verifies(table)


def test_an_abort_for_a_seat_that_does_not_exist_is_rejected() -> None:
    """C3."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    rejection = table.reject(Abort(seat=2))
    assert (rejection.reason, rejection.rule) == ("no_such_seat", "C3")


# --- Cancel -----------------------------------------------------------------------------------


def test_the_operator_may_cancel_a_live_match_at_any_time() -> None:
    """README (cancel): mid-round, after moves by both sides; no winner."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    table.run("0: 6-6", "1: 5-6 left")
    events = table.send(CancelMatch())
    assert round_end(events).outcome == "cancelled"
    assert match_end(events) == MatchEnded(winner=None, scores=(0, 0), reason="cancelled")
    assert_verifies(table)


def test_a_match_cancelled_between_rounds_records_only_its_end() -> None:
    """README (cancel)."""
    table = Table("express", players=2)
    table.deal(BLOCKING_2P)
    table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert table.send(CancelMatch()) == [
        MatchEnded(winner=None, scores=(0, 27), reason="cancelled")
    ]
    assert_verifies(table)


@pytest.mark.parametrize(
    "ending",
    [Resign(seat=0), Abort(seat=1), CancelMatch()],
    ids=["resigned", "aborted", "cancelled"],
)
@pytest.mark.parametrize(
    "later",
    [Resign(seat=1), Abort(seat=0), CancelMatch(), TimeOutTurn(seat=1, version=5)],
    ids=["resign", "abort", "cancel", "timeout"],
)
def test_once_a_match_is_over_every_command_is_refused(
    ending: AnyCommand, later: AnyCommand
) -> None:
    """C9: whatever ended it."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    table.send(ending)
    rejection = table.reject(later)
    assert (rejection.reason, rejection.rule) == ("match_over", "C9")


# --- Creating a match with these settings -----------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        pytest.param({"accounts": ("u-0123456789ab",)}, "bad_players", id="one-account-for-two"),
        pytest.param({"accounts": ("u-0123456789ab", "a b")}, "bad_players", id="a-bad-id"),
        pytest.param({"accounts": ("u-1", "house:x")}, "bad_players", id="a-house-like-id"),
        pytest.param({"forfeit_after": -1}, "bad_rules", id="negative-forfeit-after"),
        pytest.param({"max_rounds": -1}, "bad_rules", id="negative-max-rounds"),
    ],
)
def test_a_match_with_impossible_settings_is_not_created(
    settings: dict[str, object], reason: str
) -> None:
    """Accounts: none, or one (or None) per seat; forfeit_after and max_rounds 0 or more."""
    command = CreateMatch(rules=Rules.make("express", players=2), players=("a", "b"))
    rejection = decide(None, msgspec.structs.replace(command, **settings))
    assert isinstance(rejection, Rejection) and rejection.reason == reason


def test_the_match_keeps_its_accounts_and_settings_from_creation() -> None:
    """The settings are in MatchCreated, so the log alone says how the match may end."""
    command = CreateMatch(
        rules=Rules.make("express", players=2),
        players=("ann", "greedy"),
        bots=(None, "greedy"),
        accounts=("u-0123456789ab", None),
        forfeit_after=3,
        max_rounds=5,
    )
    events = decide(None, command)
    assert not isinstance(events, Rejection)
    state = replay(events)
    assert (state.accounts, state.forfeit_after, state.max_rounds) == (
        ("u-0123456789ab", None),
        3,
        5,
    )
    assert verify(events) is None


def test_a_log_written_before_these_settings_decodes_with_none_of_them() -> None:
    """Stored events evolve only by added fields with defaults (README: export format)."""
    old = (
        b'{"type":"match_created","rules":{"family":"express","players":2,"partners":false},'
        b'"players":["a","b"],"bots":["greedy","random"],"deadline_ms":0}'
    )
    created = JSON.decode_event(old)
    assert created == JSON.decode_event(JSON.encode(created))
    state = replay([created])
    assert (state.accounts, state.forfeit_after, state.max_rounds) == ((), 0, 0)


@pytest.mark.parametrize("command", [Abort(seat=1), CancelMatch()], ids=["abort", "cancel"])
def test_the_new_commands_survive_both_codecs(command: AnyCommand) -> None:
    """Tags "abort" and "cancel_match"."""
    for codec in (JSON, MSGPACK):
        assert codec.decode_command(codec.encode(command)) == command
    tag = msgspec.json.decode(JSON.encode(command))["type"]
    assert tag == {Abort: "abort", CancelMatch: "cancel_match"}[type(command)]


# --- What the fold and verify refuse ----------------------------------------------------------


@pytest.mark.parametrize(
    ("winner", "reason"),
    [(None, "target"), (None, "forfeit"), (None, "rounds"), (0, "aborted"), (1, "cancelled")],
)
def test_only_an_aborted_or_cancelled_match_ends_with_no_winner(
    winner: int | None, reason: str
) -> None:
    """A log with a winner where there can be none, or none where there must be one, is
    corrupt."""
    table = Table("express", players=2)
    table.deal(BLOCKING_2P)
    table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    ended = msgspec.convert(
        {"type": "match_ended", "winner": winner, "scores": [0, 27], "reason": reason},
        MatchEnded,
    )
    with pytest.raises(FoldError, match="winner"):
        replay([*table.log, ended])


def test_verify_finds_a_forfeit_given_to_the_wrong_side() -> None:
    """A forfeit's winner is the rules' to decide: a log that says otherwise is caught."""
    table = Table("express", forfeit_after=1)
    table.deal(PAIRS)
    table.run("0: 6-6")
    time_out(table)
    forged = [*table.log[:-1], msgspec.structs.replace(match_end(table.log), winner=1)]
    found = verify(forged)
    assert found is not None and found.version == len(forged)


def test_verify_finds_a_forfeit_before_its_time() -> None:
    """With forfeit_after 2, one timeout plays the default move: a forfeit there is caught."""
    table = Table("express", players=2, forfeit_after=2)
    table.deal(EXPRESS_2P)
    table.send(TimeOutTurn(seat=0, version=table.state.version))
    *before, _ = table.log  # TurnTimedOut, then 6-6 played for seat 0
    forged = [
        *before,
        RoundEnded(
            round=1,
            outcome="forfeit",
            winner=None,
            side=None,
            points=0,
            counts=(45, 43),
            hands=(tiles(EXPRESS_2P[0]), tiles(EXPRESS_2P[1])),
            stock=None,
            scores=(0, 0),
        ),
        MatchEnded(winner=1, scores=(0, 0), reason="forfeit", resigned=0),
    ]
    found = verify(forged)
    assert found is not None and found.version == len(before) + 1


def test_verify_finds_an_abort_after_the_side_had_moved() -> None:
    """README (abort): an aborted match whose aborting side had moved is caught."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    table.run("0: 6-6", "1: 5-6 left")
    table.send(CancelMatch())
    forged = [
        *table.log[:-1],
        MatchEnded(winner=None, scores=(0, 0), reason="aborted", resigned=0),
    ]
    forged[-2] = msgspec.structs.replace(round_end(table.log), outcome="aborted")
    found = verify(forged)
    assert found is not None and "too_late_to_abort" in found.message
