"""Common ground (C1-C10): the set, pips, seats and sides, turns, the deal, matching, the hand,
what each seat sees, the match's end and the blocked round."""

from __future__ import annotations

import pytest

from engine.game import apply, decide, legal_moves, replay
from engine.rules import Rules, RulesError
from engine.tiles import full_set, pips, tile
from engine.views import public_view, redact, view_for
from events.model import (
    DealRound,
    PlayTile,
    Rejection,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TurnPassed,
)
from tests.engine.helpers import Table, deal_order, round_end, tiles

pytestmark = pytest.mark.engine


# --- C1: sets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("top", "size"), [(6, 28), (9, 55), (12, 91)])
def test_a_double_n_set_holds_every_pair_once(top: int, size: int) -> None:
    """C1: (N+1)(N+2)/2 tiles: 7*8/2 = 28, 10*11/2 = 55, 13*14/2 = 91; each {a, b} once."""
    tiles_ = full_set(top)
    assert len(tiles_) == len(set(tiles_)) == size
    assert set(tiles_) == {(a, b) for a in range(top + 1) for b in range(a, top + 1)}


@pytest.mark.parametrize(("top", "stock"), [(6, 0), (9, 27), (12, 63)])
def test_a_four_player_deal_uses_the_whole_set_of_its_size(top: int, stock: int) -> None:
    """C1, C5: 28 tiles dealt to four players; 28 - 28 = 0, 55 - 28 = 27, 91 - 28 = 63 left."""
    table = Table("express", players=4, top=top)
    started = table.deal([full_set(top)[7 * k : 7 * k + 7] for k in range(4)])
    assert started.hand_sizes == (7, 7, 7, 7)
    assert started.stock_size == stock


def test_the_default_set_is_double_six() -> None:
    """C1."""
    assert Rules.make("express").top == Rules.make("straight").top == 6


# --- C2: pips ---------------------------------------------------------------------------------


def test_a_tiles_value_is_the_sum_of_its_halves_and_a_hand_counts_its_tiles() -> None:
    """C2: 3-5 = 8, 0-0 = 0, 6-6 = 12; after TIED_3P's lead the counts are seat 0: 3-4 3-3 2-4
    0-1 0-2 1-2 1-4 = 7+6+6+1+2+3+5 = 30, seat 1: 5-5 4-5 4-4 3-5 2-5 0-3 = 10+9+8+8+7+3 = 45,
    seat 2: 0-4 0-5 1-1 1-3 1-5 2-2 2-3 = 4+5+2+4+6+4+5 = 30."""
    assert (pips(tile(5, 3)), pips((0, 0)), pips((6, 6))) == (8, 0, 12)
    table = Table("express", players=3)
    table.deal(
        [
            "3-4 3-3 2-4 0-1 0-2 1-2 1-4",
            "6-6 5-5 4-5 4-4 3-5 2-5 0-3",
            "0-4 0-5 1-1 1-3 1-5 2-2 2-3",
        ],
        "0-6 1-6 2-6 3-6 4-6 5-6 0-0",
    )
    assert round_end(table.run("1: 6-6")).counts == (30, 45, 30)


# --- C3: players and pairs --------------------------------------------------------------------


def test_partners_sit_opposite_seats_0_and_2_against_1_and_3() -> None:
    """C3: with partners, two sides; seats 0 and 2 score for side 0, seats 1 and 3 for side 1."""
    rules = Rules.make("express", players=4)
    assert rules.partners and rules.sides == 2
    assert [rules.side_of(seat) for seat in range(4)] == [0, 1, 0, 1]
    assert Table("express").state.scores == [0, 0]


@pytest.mark.parametrize(
    ("family", "players", "partners", "sides"),
    [
        ("express", 4, True, 2),
        ("express", 3, False, 3),
        ("express", 2, False, 2),
        ("straight", 4, False, 4),
        ("straight", 2, False, 2),
    ],
)
def test_partners_default_on_for_four_in_express_and_off_for_straight(
    family: str, players: int, partners: bool, sides: int
) -> None:
    """C3: the option's defaults; without partners every seat is its own side."""
    rules = Rules.make(family, players=players)  # type: ignore[arg-type]
    assert (rules.partners, rules.sides) == (partners, sides)


@pytest.mark.parametrize("players", [1, 5])
def test_a_match_has_two_three_or_four_players(players: int) -> None:
    """C3."""
    with pytest.raises(RulesError):
        Rules.make("express", players=players)


def test_partners_need_exactly_four_players() -> None:
    """C3."""
    with pytest.raises(RulesError):
        Rules.make("straight", players=3, partners=True)


# --- C4: turn order ---------------------------------------------------------------------------


def test_the_turn_passes_from_seat_k_to_seat_k_plus_one_wrapping_round() -> None:
    """C4, three players: 0 -> 1 -> 2 -> 0 after plays and passes alike; a draw keeps the turn
    (S3)."""
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
    turns = []
    for move in ("0: 6-6", "1: 0-6 left", "2: 0-1 left", "0: 1-6 left"):
        table.run(move)
        turns.append(table.state.turn)
    assert turns == [1, 2, 0, 1]
    out_of_turn = table.reject("2: 2-3 right")
    assert (out_of_turn.reason, out_of_turn.rule) == ("not_your_turn", "C4")


def test_a_pass_hands_the_turn_to_the_next_seat() -> None:
    """C4: in a four-seat Straight round with no boneyard, seat 3 passes and seat 0 moves."""
    table = Table("straight", players=4)
    table.deal(
        [
            "0-6 1-6 2-6 3-6 2-4 2-5 3-3",
            "4-6 5-6 3-4 3-5 4-4 4-5 5-5",
            "6-6 0-0 0-1 0-2 0-3 0-4 0-5",
            "1-1 1-2 1-3 1-4 1-5 2-2 2-3",
        ],
        first_leader=2,
    )
    assert table.run("2: 6-6", "3: pass") == [
        TilePlayed(seat=2, tile=(6, 6), end=None, points=0),
        TurnPassed(seat=3),
    ]
    assert table.state.turn == 0


# --- C5: the deal -----------------------------------------------------------------------------


def test_seven_tiles_go_to_each_seat_in_order_and_the_rest_is_the_stock_drawn_from_the_front() -> (
    None
):
    """C5: seat k gets order[7k:7k+7]; the stock is the remainder, and a draw takes its head."""
    hands = ["6-6 5-6 4-6 2-2 2-3 2-4 2-5", "0-0 0-1 0-2 0-3 0-4 0-5 1-1"]
    stock = "1-2 1-6 0-6 1-3 1-4 1-5 2-6 3-3 3-4 3-5 3-6 4-4 4-5 5-5"
    order = deal_order(hands, stock)
    assert order[:7] == tiles(hands[0]) and order[14:] == tiles(stock)
    table = Table("straight", players=2)
    started = table.deal(hands, stock, first_leader=0)
    assert started.hands == (tuple(sorted(tiles(hands[0]))), tuple(sorted(tiles(hands[1]))))
    assert started.stock == tiles(stock)
    assert (started.hand_sizes, started.stock_size) == ((7, 7), 14)
    table.run("0: 6-6")
    assert table.run("1: draw") == [TileDrawn(seat=1, tile=(1, 2))]
    assert table.state.stock == list(tiles(stock)[1:])


def test_three_players_on_double_six_leave_seven_sleeping_tiles() -> None:
    """C5: 28 - 3 * 7 = 7."""
    table = Table("express", players=3)
    started = table.send(DealRound(order=full_set(6)))[0]
    assert isinstance(started, RoundStarted)
    assert (started.hand_sizes, started.stock_size) == ((7, 7, 7), 7)


# --- C6: matching -------------------------------------------------------------------------------


def test_a_tile_matches_an_end_by_one_half_and_its_other_half_becomes_the_end() -> None:
    """C6: 6-6 lead (ends 6, 6; a double keeps its number), 4-6 on the left makes it 4, 5-6 on
    the right makes it 5."""
    table = Table("express", players=2)
    table.deal(["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"])
    table.run("0: 6-6")
    assert table.state.board.numbers[:2] == [6, 6]
    table.run("1: 4-6 left")
    assert table.state.board.numbers[:2] == [4, 6]
    table.run("0: 5-6 right")
    assert table.state.board.numbers[:2] == [4, 5]


def test_a_double_is_crosswise_and_keeps_the_number_of_its_end() -> None:
    """C6: on an end showing 5, 5-5 leaves it 5."""
    table = Table("express", players=2)
    table.deal(["6-6 3-6 0-6 1-6 3-3 1-3 0-1", "5-6 3-4 5-5 4-4 4-5 2-5 0-5"])
    table.run("0: 6-6", "1: 5-6 left", "0: 3-6 right", "1: 3-4 right", "0: pass")
    table.run("1: 5-5 left")
    assert table.state.board.numbers[:2] == [5, 4]
    assert table.state.board.tips[:2] == [True, False]


def test_one_tile_matching_two_ends_that_show_the_same_number_is_two_moves() -> None:
    """C6: after the 6-6 lead seat 1's 4-6 and 2-6 each go left or right: four moves, listed
    tile by tile, left before right; naming no end is refused as ambiguous."""
    table = Table("express", players=2)
    table.deal(["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"])
    table.run("0: 6-6")
    assert legal_moves(table.state) == [
        PlayTile(seat=1, tile=(2, 6), end="left"),
        PlayTile(seat=1, tile=(2, 6), end="right"),
        PlayTile(seat=1, tile=(4, 6), end="left"),
        PlayTile(seat=1, tile=(4, 6), end="right"),
    ]
    left, _ = apply(table.state.copy(), PlayTile(seat=1, tile=(4, 6), end="left"))
    right, _ = apply(table.state.copy(), PlayTile(seat=1, tile=(4, 6), end="right"))
    assert left.board.numbers[:2] == [4, 6] and right.board.numbers[:2] == [6, 4]
    ambiguous = table.reject("1: 4-6")
    assert (ambiguous.reason, ambiguous.rule) == ("ambiguous_end", "C6")


def test_a_tile_that_fits_one_end_needs_no_end_named() -> None:
    """C6: ends 4 | 6; seat 0's 5-6 fits only the right end."""
    table = Table("express", players=2)
    table.deal(["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"])
    table.run("0: 6-6", "1: 4-6 left")
    assert table.run("0: 5-6")[0] == TilePlayed(seat=0, tile=(5, 6), end="right")


# --- C7: the hand ---------------------------------------------------------------------------------


def test_the_leader_of_a_round_is_the_hand_and_ties_run_in_turn_order_from_it() -> None:
    """C7: seat 1 leads and blocks at once; seats 0 and 2 tie at 30 and seat 2, next after the
    hand, wins (seat 0 would win in plain seat order). Worked out in test_rules_express."""
    table = Table("express", players=3)
    table.deal(
        [
            "3-4 3-3 2-4 0-1 0-2 1-2 1-4",
            "6-6 5-5 4-5 4-4 3-5 2-5 0-3",
            "0-4 0-5 1-1 1-3 1-5 2-2 2-3",
        ],
        "0-6 1-6 2-6 3-6 4-6 5-6 0-0",
    )
    assert table.state.leader == 1
    assert round_end(table.run("1: 6-6")).winner == 2


# --- C8: what each seat sees ----------------------------------------------------------------------

SEEN_HANDS = ["6-6 5-6 4-6 2-2 2-3 2-4 2-5", "0-0 0-1 0-2 0-3 0-4 0-5 1-1"]
SEEN_STOCK = "1-2 1-6 0-6 1-3 1-4 1-5 2-6 3-3 3-4 3-5 3-6 4-4 4-5 5-5"


def test_a_seat_sees_its_own_hand_the_table_and_only_sizes_of_the_rest() -> None:
    """C8: after 6-6 and seat 1's two draws (1-2, 1-6): seat 0 sees its six tiles, the line,
    7 + 2 = 9 tiles in seat 1's hand and 12 in the stock, but neither seat 1's tiles, nor the
    tiles it drew, nor the stock."""
    table = Table("straight", players=2)
    table.deal(SEEN_HANDS, SEEN_STOCK, first_leader=0)
    table.run("0: 6-6", "1: draw", "1: draw")
    view = view_for(table.state, 0)
    assert view.hand == ((2, 2), (2, 3), (2, 4), (2, 5), (4, 6), (5, 6))
    assert (view.hand_sizes, view.stock_size) == ((6, 9), 12)
    assert [(e.end, e.number) for e in view.ends] == [("left", 6), ("right", 6)]
    assert view.played == ((6, 6),)
    assert view.voids == ((), ())  # seat 1 is still drawing: nothing is settled yet
    seen = [redact(e, 0) for e in table.state.history]
    started = seen[0]
    assert isinstance(started, RoundStarted)
    assert started.hands[1] is None and started.stock is None
    assert [e.tile for e in seen if isinstance(e, TileDrawn)] == [None, None]
    own = [redact(e, 1) for e in table.state.history]
    assert [e.tile for e in own if isinstance(e, TileDrawn)] == [(1, 2), (1, 6)]
    spectator = public_view(table.state)
    assert spectator.hand is None
    public = redact(table.state.history[0], None)
    assert isinstance(public, RoundStarted)
    assert public.hands == (None, None)


def test_the_first_rounds_forced_lead_is_shown_to_the_leader_alone_until_it_is_played() -> None:
    """E2 and C8: the deal decides that the holder of 6-6 leads it, but until the lead is on
    the table that tile is in a hand nobody else may see: only the leader's copy of the deal
    names it."""
    table = Table("express", players=4)
    started = table.deal_canonical()  # seat 3 holds 3-6 … 6-6
    assert (started.leader, started.forced_lead) == (3, (6, 6))
    for seat in (None, 0, 1, 2):
        seen = redact(started, seat)
        assert isinstance(seen, RoundStarted) and seen.forced_lead is None
    own = redact(started, 3)
    assert isinstance(own, RoundStarted) and own.forced_lead == (6, 6)


@pytest.mark.parametrize("reveal_stock", [False, True])
def test_when_the_round_ends_every_hand_is_shown_and_the_stock_only_by_option(
    reveal_stock: bool,
) -> None:
    """C8: a two-player Express round blocks after three plays (see test_rules_express); its end
    shows both hands; the 14 sleeping tiles only with reveal_stock."""
    hands = ["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"]
    table = Table("express", players=2, reveal_stock=reveal_stock)
    started = table.deal(hands)
    table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    view = view_for(table.state, 0)
    ended = view.last_round
    assert isinstance(ended, RoundEnded)
    assert ended.hands == (tiles("0-3 1-3 2-3 3-3 3-6"), tiles("0-1 0-2 1-1 1-2 2-2 2-6"))
    assert ended.stock == (started.stock if reveal_stock else None)
    public = redact(table.state.history[0], 0)
    assert isinstance(public, RoundStarted) and public.stock is None


# --- C9, C10 --------------------------------------------------------------------------------------


def test_an_express_round_is_blocked_right_after_the_play_that_leaves_nobody_a_move() -> None:
    """C10: ends 4 | 5 after seat 0's 5-6 and nobody holds a 4 or a 5: the play's events end
    the round at once; no pass is recorded."""
    table = Table("express", players=2)
    table.deal(["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"])
    table.run("0: 6-6", "1: 4-6 left")
    events = table.run("0: 5-6 right")
    assert [type(e) for e in events] == [TilePlayed, RoundEnded]
    assert round_end(events).outcome == "blocked"
    assert not [e for e in table.log if isinstance(e, TurnPassed)]
    over = table.reject("1: pass")
    assert (over.reason, over.rule) == ("round_over", "C10")


def test_a_whole_scripted_match_replays_to_the_same_state() -> None:
    """C9: two Express rounds to a target of 40 (24 + 27 = 51 >= 40), folded again from the log."""
    table = Table("express", players=2, target=40)
    table.deal(["6-6 3-6 0-6 1-6 3-3 1-3 0-1", "5-6 3-4 5-5 4-4 4-5 2-5 0-5"])
    table.run(
        "0: 6-6",
        "1: 5-6 left",
        "0: 3-6 right",
        "1: 3-4 right",
        "0: pass",
        "1: 5-5 left",
        "0: pass",
        "1: 4-4 right",
        "0: pass",
        "1: 4-5 right",
        "0: pass",
        "1: 2-5 left",
        "0: pass",
        "1: 0-5 right",
    )
    assert table.state.scores == [0, 24]
    # Round 2 is led by seat 0, after the winner (E3); the blocked deal gives seat 1 27 more.
    table.deal(["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"])
    events = table.run("0: 6-6", "1: 4-6 left", "0: 5-6 right")
    assert round_end(events).scores == (0, 51)
    assert table.state.phase == "over" and table.state.result is not None
    assert table.state.result.winner == 1
    again = replay(table.log)
    assert view_for(again, 0) == view_for(table.state, 0)
    assert isinstance(decide(again, DealRound(order=full_set(6))), Rejection)
