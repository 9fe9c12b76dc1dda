"""What the engine refuses, each with its reason and rule (RULES.md's closing list); bad deals and
bad rules; resigning; and the referee's time-outs with the default move they make."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from engine.board import End
from engine.game import decide
from engine.rules import Rules, RulesError
from engine.tiles import full_set
from events.model import (
    AnyCommand,
    CreateMatch,
    DealRound,
    DrawTile,
    MatchEnded,
    PassTurn,
    PlayTile,
    Rejection,
    Resign,
    RoundEnded,
    TileDrawn,
    TilePlayed,
    TimeOutTurn,
    TurnPassed,
    TurnTimedOut,
)
from tests.engine.helpers import Table, deal_order, parse_move

pytestmark = pytest.mark.engine

# --- Scripted positions ---------------------------------------------------------------------------

# Two players, Express, double-six: seat 0 must lead 6-6 (E2); seat 1 then holds 5-6, playable.
EXPRESS_2P = ["6-6 3-6 0-6 1-6 3-3 1-3 0-1", "5-6 3-4 5-5 4-4 4-5 2-5 0-5"]
# Two players, Express: blocked on the third play (ends 4 | 5); seat 1 wins 27.
BLOCKING_2P = ["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"]
# Two players, Straight: seat 1 holds no 6; the boneyard starts 1-2 (no use), 1-6 (plays).
DRAWING = ["6-6 5-6 4-6 2-2 2-3 2-4 2-5", "0-0 0-1 0-2 0-3 0-4 0-5 1-1"]
DRAWING_STOCK = "1-2 1-6 0-6 1-3 1-4 1-5 2-6 3-3 3-4 3-5 3-6 4-4 4-5 5-5"
# Four players, Straight, no boneyard: seat 1 holds no 6.
NO_BONEYARD = [
    "6-6 0-0 0-1 0-2 0-3 0-4 0-5",
    "1-1 1-2 1-3 1-4 1-5 2-2 2-3",
    "0-6 1-6 2-6 3-6 2-4 2-5 3-3",
    "4-6 5-6 3-4 3-5 4-4 4-5 5-5",
]
# Two players, Straight: seat 0 leads 5-5, the spinner.
SPINNER = ["5-5 2-5 1-5 0-0 0-1 0-2 0-3", "3-5 4-5 1-6 0-4 0-6 1-1 1-2"]


def express_dealt() -> Table:
    """Express, two players, dealt; seat 0 to lead 6-6."""
    table = Table("express", players=2)
    table.deal(EXPRESS_2P)
    return table


def express_led() -> Table:
    """Express, two players, after the 6-6 lead; seat 1 to move, holding 5-6."""
    table = express_dealt()
    table.run("0: 6-6")
    return table


def express_round_over() -> Table:
    """Express, two players, between rounds: the first round blocked, seat 1 scored 27."""
    table = Table("express", players=2)
    table.deal(BLOCKING_2P)
    table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    return table


def express_match_over() -> Table:
    """Express, two players, target 27: the blocked round's 27 ended the match."""
    table = Table("express", players=2, target=27)
    table.deal(BLOCKING_2P)
    table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert table.state.phase == "over"
    return table


def straight_led() -> Table:
    """Straight, two players, after the 6-6 lead; seat 1 holds no 6, 14 in the boneyard."""
    table = Table("straight", players=2)
    table.deal(DRAWING, DRAWING_STOCK, first_leader=0)
    table.run("0: 6-6")
    return table


def straight_drew_playable() -> Table:
    """Straight: seat 1 has drawn 1-2 and then 1-6, which plays."""
    table = straight_led()
    table.run("1: draw", "1: draw")
    return table


def straight_no_boneyard() -> Table:
    """Straight, four players, after the 6-6 lead: seat 1 holds no 6 and there is no boneyard."""
    table = Table("straight", players=4)
    table.deal(NO_BONEYARD, first_leader=0)
    table.run("0: 6-6")
    return table


def straight_spinner_half_open() -> Table:
    """Straight: 5-5 led, 3-5 on its left; its right side is bare, up and down still closed."""
    table = Table("straight", players=2)
    table.deal(SPINNER, first_leader=0)
    table.run("0: 5-5", "1: 3-5 left")
    return table


def straight_plain_lead() -> Table:
    """Straight: 0-1 led, no double played yet, so there is no spinner and no up or down."""
    table = Table("straight", players=2)
    table.deal(["0-1 2-3 4-5 0-6 2-4 1-6 3-5", "1-2 3-4 5-6 0-2 4-6 1-3 6-6"], first_leader=0)
    table.run("0: 0-1")
    return table


def straight_round_over() -> Table:
    """Straight, four players, between rounds (a round blocked on every 6)."""
    table = Table("straight", players=4)
    table.deal(
        [
            "6-6 2-6 4-5 1-5 2-2 2-4 2-5",
            "0-6 2-3 5-6 0-0 0-2 0-3 1-1",
            "0-1 3-6 3-3 3-4 3-5 4-4 5-5",
            "1-6 4-6 0-4 0-5 1-2 1-3 1-4",
        ],
        first_leader=0,
    )
    table.run(
        "0: 6-6",
        "1: 0-6 left",
        "2: 0-1 left",
        "3: 1-6 left",
        "0: 2-6 right",
        "1: 2-3 right",
        "2: 3-6 right",
        "3: 4-6 left",
        "0: 4-5 left",
        "1: 5-6 left",
    )
    assert table.state.phase == "dealing"
    return table


REJECTIONS: list[tuple[str, Callable[[], Table], str, str, str]] = [
    # (id, position, scripted move, reason, rule)
    ("express-draw-on-turn", express_led, "1: draw", "draw_in_express", "E1"),
    ("express-draw-out-of-turn", express_led, "0: draw", "draw_in_express", "E1"),
    ("express-draw-no-such-seat", express_led, "7: draw", "draw_in_express", "E1"),
    ("express-draw-round-over", express_round_over, "0: draw", "draw_in_express", "E1"),
    ("express-draw-match-over", express_match_over, "9: draw", "draw_in_express", "E1"),
    ("play-out-of-turn", express_led, "0: 0-6 left", "not_your_turn", "C4"),
    ("pass-out-of-turn", express_led, "0: pass", "not_your_turn", "C4"),
    ("straight-draw-out-of-turn", straight_led, "0: draw", "not_your_turn", "C4"),
    ("tile-held-by-another-seat", express_led, "1: 0-6 left", "tile_not_in_hand", "C8"),
    ("tile-not-in-the-set", express_led, "1: 7-7 left", "tile_not_in_hand", "C8"),
    ("tile-matches-not-the-named-end", express_led, "1: 3-4 left", "tile_does_not_match", "C6"),
    ("tile-matches-no-end", express_led, "1: 3-4", "tile_does_not_match", "C6"),
    ("express-has-no-up-end", express_led, "1: 5-6 up", "no_such_end", "C6"),
    ("lead-names-an-end", express_dealt, "0: 6-6 left", "no_such_end", "C6"),
    ("no-spinner-no-down-end", straight_plain_lead, "1: 1-2 down", "no_such_end", "C6"),
    ("spinner-side-closed", straight_spinner_half_open, "0: 2-5 up", "no_such_end", "S2"),
    ("ambiguous-end", express_led, "1: 5-6", "ambiguous_end", "C6"),
    ("forced-lead", express_dealt, "0: 3-6", "must_lead_forced_tile", "E2"),
    ("express-pass-holding-a-play", express_led, "1: pass", "must_play", "E1"),
    ("express-pass-on-the-lead", express_dealt, "0: pass", "must_play", "E1"),
    ("draw-holding-a-play", straight_drew_playable, "1: draw", "must_play", "S3"),
    ("straight-pass-holding-a-play", straight_drew_playable, "1: pass", "must_play", "S3"),
    ("draw-with-empty-boneyard", straight_no_boneyard, "1: draw", "boneyard_empty", "S3"),
    ("pass-while-boneyard-has-tiles", straight_led, "1: pass", "must_draw", "S3"),
    ("play-after-round-ended", express_round_over, "0: 3-3", "round_over", "C10"),
    ("pass-after-round-ended", express_round_over, "1: pass", "round_over", "C10"),
    ("draw-after-round-ended", straight_round_over, "2: draw", "round_over", "C10"),
    ("play-after-match-ended", express_match_over, "0: 3-3", "match_over", "C9"),
    ("pass-after-match-ended", express_match_over, "1: pass", "match_over", "C9"),
    ("play-by-seat-4-of-4", straight_no_boneyard, "4: 1-1", "no_such_seat", "C3"),
    ("play-by-seat-minus-1", express_led, "-1: 5-6 left", "no_such_seat", "C3"),
    ("pass-by-seat-2-of-2", express_led, "2: pass", "no_such_seat", "C3"),
    ("straight-draw-by-seat-2-of-2", straight_led, "2: draw", "no_such_seat", "C3"),
]


@pytest.mark.parametrize(
    ("position", "move", "reason", "rule"),
    [pytest.param(*case[1:], id=case[0]) for case in REJECTIONS],
)
def test_an_illegal_move_is_rejected_with_its_reason_and_rule(
    position: Callable[[], Table], move: str, reason: str, rule: str
) -> None:
    """RULES.md's list of rejections: E1, C4, C6, S2, E2, S3, C10, C9, C3 (see the ids)."""
    table = position()
    rejection = table.reject(move)
    assert (rejection.reason, rejection.rule) == (reason, rule)
    assert rejection.message


@pytest.mark.parametrize(
    ("position", "command", "reason"),
    [
        pytest.param(express_match_over, DealRound(order=full_set(6)), "match_over", id="deal"),
        pytest.param(express_match_over, Resign(seat=0), "match_over", id="resign"),
        pytest.param(express_match_over, TimeOutTurn(seat=0, version=5), "match_over", id="clock"),
        pytest.param(express_round_over, TimeOutTurn(seat=0, version=5), "round_over", id="clock2"),
        pytest.param(express_led, Resign(seat=4), "no_such_seat", id="resign-seat-4"),
        pytest.param(express_led, TimeOutTurn(seat=3, version=4), "no_such_seat", id="clock-seat"),
    ],
)
def test_commands_after_the_end_or_for_a_missing_seat_are_rejected(
    position: Callable[[], Table], command: AnyCommand, reason: str
) -> None:
    """C9, C10, C3: nothing but a new match follows a match's end; rounds need a deal."""
    assert position().reject(command).reason == reason


def test_an_end_with_a_name_no_line_has_is_rejected_as_no_such_end() -> None:
    """RULES.md's rejections ("an end that does not exist"): after the 6-6 lead, 5-6 on an end
    called "middle" must come back as a rejection, not an exception."""
    table = express_led()
    bad_end = cast(End, "middle")
    rejection = table.reject(PlayTile(seat=1, tile=(5, 6), end=bad_end))
    assert rejection.reason == "no_such_end"


def test_a_draw_in_express_is_rejected_before_any_other_check() -> None:
    """E1: a draw by a seat that does not exist, after the match ended, is still refused as a
    draw in Express, not as a missing seat or a finished match."""
    table = express_match_over()
    rejection = table.reject(DrawTile(seat=-3))
    assert (rejection.reason, rejection.rule) == ("draw_in_express", "E1")


# --- Bad deals ------------------------------------------------------------------------------------


def whole(top: int = 6) -> list[tuple[int, int]]:
    """The whole set in canonical order, as a list to spoil."""
    return list(full_set(top))


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(tuple(whole()[:-1]), id="a-tile-missing"),
        pytest.param((*whole()[:-1], (0, 0)), id="a-tile-twice"),
        pytest.param(tuple(whole(9)), id="the-wrong-set"),
        pytest.param(
            ((6, 5), *[t for t in whole() if t != (5, 6)]), id="a-tile-written-high-first"
        ),
        pytest.param((), id="nothing"),
    ],
)
def test_a_deal_that_is_not_the_whole_set_is_rejected(order: tuple[tuple[int, int], ...]) -> None:
    """C1, C5: the order must be every tile of the match's set, once, normalized."""
    rejection = Table("express").reject(DealRound(order=order))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "C1")


def test_the_deal_helper_refuses_hands_that_are_not_the_whole_set() -> None:
    """C1, C5: the scripted-deal builder checks what it builds."""
    with pytest.raises(ValueError, match="dealt 6 tiles"):
        deal_order(["6-6 5-6 4-6 2-2 2-3 2-4"])
    with pytest.raises(ValueError, match="more than once"):
        deal_order(["6-6 6-6 4-6 2-2 2-3 2-4 2-5"])
    with pytest.raises(ValueError, match="missing"):
        deal_order(["6-6 5-6 4-6 2-2 2-3 2-4 2-5"], "0-0")


def test_a_deal_during_a_round_is_rejected() -> None:
    """C5: one round at a time."""
    rejection = express_led().reject(DealRound(order=full_set(6)))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "C5")


@pytest.mark.parametrize("first_leader", [None, 4, -1])
def test_a_first_straight_deal_must_name_the_drawn_leader(first_leader: int | None) -> None:
    """S1: the draw for the first leader is part of the deal and must name a seat of four."""
    table = Table("straight", players=4)
    rejection = table.reject(DealRound(order=full_set(6), first_leader=first_leader))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "S1")


# --- Bad rules, players, match ------------------------------------------------------------------

BAD_RULES = [
    pytest.param({"players": 5}, id="five-players"),
    pytest.param({"players": 1, "partners": False}, id="one-player"),
    pytest.param({"players": 3, "partners": True}, id="partners-with-three"),
    pytest.param({"top": 7}, id="double-seven"),
    pytest.param({"target": 0}, id="target-zero"),
    pytest.param({"target": -5}, id="negative-target"),
    pytest.param({"family": "poker"}, id="unknown-family"),
    pytest.param({"next_leader": "random"}, id="unknown-next-leader"),
]


@pytest.mark.parametrize("options", BAD_RULES)
def test_impossible_rules_fail_validation_and_creating_the_match(
    options: dict[str, object],
) -> None:
    """C1, C3, E3, E6, S7: every option is checked, by Rules.validate and by CreateMatch."""
    rules = Rules(**options)  # type: ignore[arg-type]
    with pytest.raises(RulesError):
        rules.validate()
    players = tuple(f"p{k}" for k in range(max(rules.players, 0)))
    rejection = decide(None, CreateMatch(rules=rules, players=players))
    assert isinstance(rejection, Rejection) and rejection.reason == "bad_rules"


def test_rules_make_refuses_what_validate_refuses() -> None:
    """C1, C3: the builder validates."""
    with pytest.raises(RulesError):
        Rules.make("straight", players=4, top=8)


def test_rules_make_refuses_an_unknown_family_with_rules_error() -> None:
    """The builder names the families it knows rather than failing on a lookup."""
    with pytest.raises(RulesError, match="unknown family 'poker': use express or straight"):
        Rules.make("poker")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "players",
    [
        pytest.param(("a", "b", "c"), id="three-names-for-four-seats"),
        pytest.param(("a", "b", "c", " "), id="a-blank-name"),
        pytest.param(("a", "b", "c", "x" * 65), id="a-65-character-name"),
    ],
)
def test_a_match_needs_one_real_name_per_seat(players: tuple[str, ...]) -> None:
    """C3."""
    rejection = decide(None, CreateMatch(rules=Rules.make("express"), players=players))
    assert isinstance(rejection, Rejection)
    assert (rejection.reason, rejection.rule) == ("bad_players", "C3")


def test_a_match_is_created_once_and_commands_need_a_match() -> None:
    """Only CreateMatch may start a log; a second one is refused."""
    table = Table("express")
    create = CreateMatch(rules=Rules.make("express"), players=("a", "b", "c", "d"))
    assert table.reject(create).reason == "match_exists"
    rejection = decide(None, PlayTile(seat=0, tile=(6, 6)))
    assert isinstance(rejection, Rejection) and rejection.reason == "no_match"


# --- Resigning ------------------------------------------------------------------------------------


def express_led_pairs() -> Table:
    """Express, four players in pairs, after seat 0's forced 6-6 lead."""
    table = Table("express")
    table.deal(
        [
            "6-6 2-6 4-5 1-5 2-2 2-4 2-5",
            "0-6 2-3 5-6 0-0 0-2 0-3 1-1",
            "0-1 3-6 3-3 3-4 3-5 4-4 5-5",
            "1-6 4-6 0-4 0-5 1-2 1-3 1-4",
        ]
    )
    table.run("0: 6-6")
    return table


def test_resigning_mid_round_ends_the_round_and_the_match_for_the_other_pair() -> None:
    """C9: seat 3 resigns while seat 1 is to move; its pair loses, pair 0 wins 0 to 0."""
    table = express_led_pairs()
    events = table.send(Resign(seat=3))
    assert [type(e) for e in events] == [RoundEnded, MatchEnded]
    ended = events[0]
    assert isinstance(ended, RoundEnded)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("resigned", None, None, 0)
    assert events[1] == MatchEnded(winner=0, scores=(0, 0), reason="resigned", resigned=3)
    assert table.reject("1: 0-6 left").reason == "match_over"


def test_resigning_between_rounds_ends_the_match_at_once() -> None:
    """C9: seat 1 had 27; seat 1 resigns between rounds and seat 0 wins."""
    table = express_round_over()
    assert table.send(Resign(seat=1)) == [
        MatchEnded(winner=0, scores=(0, 27), reason="resigned", resigned=1)
    ]


# --- Time-outs ------------------------------------------------------------------------------------


def time_out(table: Table) -> list[object]:
    """The events of the seat to move running out of time at the current version."""
    return list(table.send(TimeOutTurn(seat=table.state.turn, version=table.state.version)))


def test_a_timed_out_first_leader_leads_the_forced_double() -> None:
    """E2: the default move of seat 0 is the only legal one, 6-6."""
    table = express_dealt()
    assert time_out(table) == [TurnTimedOut(seat=0), TilePlayed(seat=0, tile=(6, 6), end=None)]


def test_a_timed_out_seat_plays_its_heaviest_playable_tile_on_the_first_end() -> None:
    """Seat 1 after 6-6 could play 0-6 (6) or 5-6 (11): 5-6, on left, the first of its ends."""
    table = express_led_pairs()
    assert time_out(table) == [
        TurnTimedOut(seat=1),
        TilePlayed(seat=1, tile=(5, 6), end="left"),
    ]


def test_a_timed_out_straight_leader_leads_its_heaviest_tile_and_scores_it() -> None:
    """S4: seat 0's heaviest tile is 5-5 (10), a lone double lead counting 10."""
    table = Table("straight", players=2)
    table.deal(SPINNER, first_leader=0)
    assert time_out(table) == [
        TurnTimedOut(seat=0),
        TilePlayed(seat=0, tile=(5, 5), end=None, points=10),
    ]
    assert table.state.scores == [10, 0]


def test_a_timed_out_express_seat_without_a_play_passes() -> None:
    """E1: after 6-6 5-6 3-6 3-4 the ends are 5 | 4 and seat 0 holds no 4 or 5."""
    table = express_dealt()
    table.run("0: 6-6", "1: 5-6 left", "0: 3-6 right", "1: 3-4 right")
    assert time_out(table) == [TurnTimedOut(seat=0), TurnPassed(seat=0)]
    assert table.state.turn == 1


def test_a_timed_out_straight_seat_draws_until_it_can_play_then_plays() -> None:
    """S3: seat 1 draws 1-2, then 1-6, and plays 1-6 on the left (1 + [6-6] 12 = 13: 0)."""
    table = straight_led()
    assert time_out(table) == [
        TurnTimedOut(seat=1),
        TileDrawn(seat=1, tile=(1, 2)),
        TileDrawn(seat=1, tile=(1, 6)),
        TilePlayed(seat=1, tile=(1, 6), end="left", points=0),
    ]
    assert table.state.turn == 0


def test_a_timed_out_straight_seat_with_no_boneyard_and_no_play_passes() -> None:
    """S3: no boneyard, no 6 in seat 1's hand."""
    table = straight_no_boneyard()
    assert time_out(table) == [TurnTimedOut(seat=1), TurnPassed(seat=1)]


def test_a_timed_out_seat_drawing_the_last_tile_of_a_dead_round_blocks_it() -> None:
    """S3, C10: every 6 is out; seat 1 draws all seven tiles and the round ends, with no pass."""
    table = Table("straight", players=3)
    table.deal(
        [
            "6-6 1-6 3-6 5-6 0-0 0-2 0-3",
            "0-6 2-6 4-6 1-3 1-4 1-5 2-2",
            "0-1 2-3 4-5 0-4 0-5 1-1 1-2",
        ],
        "2-4 2-5 3-3 3-4 3-5 4-4 5-5",
        first_leader=0,
    )
    table.run(
        "0: 6-6",
        "1: 0-6 left",
        "2: 0-1 left",
        "0: 1-6 left",
        "1: 2-6 right",
        "2: 2-3 right",
        "0: 3-6 right",
        "1: 4-6 left",
        "2: 4-5 left",
        "0: 5-6 left",
    )
    events = time_out(table)
    assert [type(e) for e in events] == [TurnTimedOut, *[TileDrawn] * 7, RoundEnded]
    assert table.state.phase == "dealing"


@pytest.mark.parametrize("delta", [-1, 1])
def test_a_time_out_for_another_version_is_stale(delta: int) -> None:
    """The clock's command carries the version the deadline was set for; any other is refused."""
    table = express_led()
    command = TimeOutTurn(seat=1, version=table.state.version + delta)
    assert table.reject(command).reason == "stale_timeout"


def test_a_time_out_for_a_seat_not_to_move_is_rejected() -> None:
    """C4."""
    table = express_led()
    rejection = table.reject(TimeOutTurn(seat=0, version=table.state.version))
    assert (rejection.reason, rejection.rule) == ("not_your_turn", "C4")


def test_scripted_moves_parse_into_commands() -> None:
    """The helper's notation: seat, tile and end; draw; pass."""
    assert parse_move("1: 5-3 left") == PlayTile(seat=1, tile=(3, 5), end="left")
    assert parse_move("2: draw") == DrawTile(seat=2)
    assert parse_move("3: pass") == PassTurn(seat=3)
