"""Straight, the draw game with all-fives scoring (S1-S7), and its mid-round match end (C9).

Every deal is scripted (seat k's hand, then the stock front first) and every count and score
below is worked out by hand in the comments. In a count, ``[5-5]`` is a crosswise double at an
end (both halves count) and ``_`` a spinner side with no tile yet (counts 0).
"""

from __future__ import annotations

import pytest

from engine.game import legal_moves
from events.model import (
    DrawTile,
    MatchEnded,
    PassTurn,
    PlayTile,
    RoundEnded,
    TileDrawn,
    TilePlayed,
    TurnPassed,
)
from tests.engine.helpers import Table, match_end, move_tiles, points_by_play, round_end, tiles

pytestmark = pytest.mark.engine

# --- Scripted deals ---------------------------------------------------------------------------

# Two players; seat 0 leads 5-5, the spinner: RULES.md's worked example, then every side.
SPINNER_LEAD = ["5-5 2-5 1-5 0-0 0-1 0-2 0-3", "3-5 4-5 1-6 0-4 0-6 1-1 1-2"]

# Two players; seat 0 leads 3-5 and seat 1's 5-5, the first double, becomes the spinner.
LATE_SPINNER = ["3-5 1-5 0-5 0-0 0-1 0-2 0-3", "5-5 1-1 2-2 2-3 2-4 3-3 3-4"]

# Two players; seat 1 holds no 6: it draws 1-2 (no use), then 1-6 (plays).
DRAWING = ["6-6 5-6 4-6 2-2 2-3 2-4 2-5", "0-0 0-1 0-2 0-3 0-4 0-5 1-1"]
DRAWING_STOCK = "1-2 1-6 0-6 1-3 1-4 1-5 2-6 3-3 3-4 3-5 3-6 4-4 4-5 5-5"

# Four players, all 28 dealt (the boneyard is empty from the start); seat 1 holds no 6.
EMPTY_BONEYARD = [
    "6-6 0-0 0-1 0-2 0-3 0-4 0-5",
    "1-1 1-2 1-3 1-4 1-5 2-2 2-3",
    "0-6 1-6 2-6 3-6 2-4 2-5 3-3",
    "4-6 5-6 3-4 3-5 4-4 4-5 5-5",
]

# Two players, no double played: one line grown on the right, the left end stays 0, so the
# count is 0 + the right end. Seat 0 dominoes on the 13th play; seat 1 keeps one tile.
TRAIL_0 = "0-1 2-3 4-5 0-6 2-4 1-6 3-5"
TRAIL_1 = "1-2 3-4 5-6 0-2 4-6 1-3"
TRAIL_SCRIPT = (
    "0: 0-1",  # 0 + 1 = 1
    "1: 1-2 right",  # 0 + 2 = 2
    "0: 2-3 right",  # 3
    "1: 3-4 right",  # 4
    "0: 4-5 right",  # 5: seat 0 scores 5
    "1: 5-6 right",  # 6
    "0: 0-6 right",  # 0 + 0 = 0: not a positive multiple, nothing
    "1: 0-2 right",  # 2
    "0: 2-4 right",  # 4
    "1: 4-6 right",  # 6
    "0: 1-6 right",  # 1
    "1: 1-3 right",  # 3
    "0: 3-5 right",  # 5: seat 0 scores 5, and it was seat 0's last tile
)

# Four players, all dealt: ten plays put every 6 on the line, every end shows 6, nobody plays.
BLOCKED_4P = [
    "6-6 2-6 4-5 1-5 2-2 2-4 2-5",
    "0-6 2-3 5-6 0-0 0-2 0-3 1-1",
    "0-1 3-6 3-3 3-4 3-5 4-4 5-5",
    "1-6 4-6 0-4 0-5 1-2 1-3 1-4",
]
BLOCKED_4P_SCRIPT = (
    "0: 6-6",  # lone double: 6 + 6 = 12
    "1: 0-6 left",  # 0 + [6-6] 12 = 12
    "2: 0-1 left",  # 1 + 12 = 13
    "3: 1-6 left",  # 6 + 12 = 18
    "0: 2-6 right",  # both long sides covered, the spinner stops counting: 6 + 2 = 8
    "1: 2-3 right",  # 6 + 3 = 9
    "2: 3-6 right",  # 6 + 6 = 12
    "3: 4-6 left",  # 4 + 6 = 10: seat 3 scores 10
    "0: 4-5 left",  # 5 + 6 = 11
    "1: 5-6 left",  # 6 + 6 = 12; all seven 6s are out: blocked
)
# Left in hand: seat 0: 1-5 2-2 2-4 2-5 = 6+4+6+7 = 23; seat 1: 0-0 0-2 0-3 1-1 = 0+2+3+2 = 7;
# seat 2: 3-3 3-4 3-5 4-4 5-5 = 6+7+8+8+10 = 39; seat 3: 0-4 0-5 1-2 1-3 1-4 = 4+5+3+4+5 = 21.
BLOCKED_4P_POINTS = [0, 0, 0, 0, 0, 0, 0, 10, 0, 0]

# The same line one seat later, seat 1 leading.
BLOCKED_4P_LATER = [
    "1-6 4-6 1-5 2-2 2-4 2-5 3-3",
    "6-6 2-6 4-5 5-5 4-4 3-5 3-4",
    "0-6 2-3 5-6 0-4 1-2 1-3 1-4",
    "0-1 3-6 0-0 0-2 0-3 1-1 0-5",
]
BLOCKED_4P_LATER_SCRIPT = (
    "1: 6-6",
    "2: 0-6 left",
    "3: 0-1 left",
    "0: 1-6 left",
    "1: 2-6 right",
    "2: 2-3 right",
    "3: 3-6 right",
    "0: 4-6 left",  # 4 + 6 = 10: seat 0 scores 10
    "1: 4-5 left",
    "2: 5-6 left",
)
# Left in hand: seat 0: 1-5 2-2 2-4 2-5 3-3 = 29; seat 1: 5-5 4-4 3-5 3-4 = 33;
# seat 2: 0-4 1-2 1-3 1-4 = 16; seat 3: 0-0 0-2 0-3 1-1 0-5 = 12.

# Three players, seven in the boneyard: the same ten plays, then seat 1 (no 6) must draw all
# seven tiles; none is a 6, and the last draw leaves nobody able to play.
BLOCKED_3P = [
    "6-6 1-6 3-6 5-6 0-0 0-2 0-3",
    "0-6 2-6 4-6 1-3 1-4 1-5 2-2",
    "0-1 2-3 4-5 0-4 0-5 1-1 1-2",
]
BLOCKED_3P_STOCK = "2-4 2-5 3-3 3-4 3-5 4-4 5-5"
BLOCKED_3P_SCRIPT = (
    "0: 6-6",
    "1: 0-6 left",
    "2: 0-1 left",
    "0: 1-6 left",
    "1: 2-6 right",
    "2: 2-3 right",
    "0: 3-6 right",
    "1: 4-6 left",  # 4 + 6 = 10: seat 1 scores 10
    "2: 4-5 left",
    "0: 5-6 left",
)
# Then seat 0 keeps 0-0 0-2 0-3 = 5; seat 2 keeps 0-4 0-5 1-1 1-2 = 4+5+2+3 = 14; seat 1 keeps
# 1-3 1-4 1-5 2-2 = 19 and draws 2-4 2-5 3-3 3-4 3-5 4-4 5-5 = 6+7+6+7+8+8+10 = 52: 71.


def count(table: Table) -> int:
    """The all-fives count of the open ends now (S4)."""
    return table.state.board.count()


# --- S1: leaders --------------------------------------------------------------------------------


def test_the_first_straight_leader_is_the_recorded_draw_and_may_lead_any_tile() -> None:
    """S1: the draw names seat 2 of three; the canonical order deals it 2-3 2-4 2-5 2-6 3-3 3-4
    3-5 and any of them may lead (no forced double)."""
    table = Table("straight", players=3)
    started = table.deal_canonical(first_leader=2)
    assert (started.leader, started.forced_lead) == (2, None)
    assert table.state.turn == 2
    assert move_tiles(legal_moves(table.state)) == [
        (2, 3),
        (2, 4),
        (2, 5),
        (2, 6),
        (3, 3),
        (3, 4),
        (3, 5),
    ]
    assert table.run("2: 2-5")[0] == TilePlayed(seat=2, tile=(2, 5), end=None)


def test_later_straight_rounds_rotate_from_the_previous_leader_whoever_won() -> None:
    """S1: round 1 led by seat 0 (drawn); round 2 by seat 1; round 2's winner is seat 3, yet
    round 3 is led by seat 2, the seat after round 2's leader (not seat 0, after the winner)."""
    table = Table("straight", players=4)
    assert table.deal(BLOCKED_4P, first_leader=0).leader == 0
    assert round_end(table.run(*BLOCKED_4P_SCRIPT)).winner == 1
    assert table.deal(BLOCKED_4P_LATER).leader == 1
    assert round_end(table.run(*BLOCKED_4P_LATER_SCRIPT)).winner == 3
    started = table.deal_canonical()
    assert (started.round, started.leader) == (3, 2)


# --- S2, S4: spinner and all-fives counting -------------------------------------------------------


def test_the_worked_example_of_a_spinner_lead_counts_as_rules_md_says() -> None:
    """S2, S4 (RULES.md's example): lone 5-5 = 10, scored; then 5-3 on one side: 3 + [5-5] 10
    = 13, not scored; the crosswise sides stay closed until both long sides carry a tile."""
    table = Table("straight", players=2)
    table.deal(SPINNER_LEAD, first_leader=0)
    assert table.run("0: 5-5") == [TilePlayed(seat=0, tile=(5, 5), end=None, points=10)]
    assert count(table) == 10
    closed = table.reject("1: 4-5 up")
    assert (closed.reason, closed.rule) == ("no_such_end", "S2")
    assert table.run("1: 3-5 left") == [TilePlayed(seat=1, tile=(3, 5), end="left", points=0)]
    assert count(table) == 13
    closed = table.reject("0: 2-5 down")
    assert (closed.reason, closed.rule) == ("no_such_end", "S2")
    ends = {m.end for m in legal_moves(table.state) if isinstance(m, PlayTile)}
    assert ends == {"left", "right"}  # 0-3 on the 3, 2-5 and 1-5 on the spinner's bare 5
    assert table.state.scores == [10, 0]


def test_a_covered_spinner_stops_counting_and_its_crosswise_sides_count_their_own_lines() -> None:
    """S2, S4 continued: 5-2 on the spinner's other side: 3 + 2 = 5 (the spinner no longer
    counts), scored; the up and down sides open, counting 0 while bare: 5-4 up: 3+2+4+_ = 9;
    5-1 down: 3+2+4+1 = 10, scored; a line grows from down: 1-6: 3+2+4+6 = 15, scored.
    Seat 0: 10 + 5 + 10 = 25; seat 1: 15."""
    table = Table("straight", players=2)
    table.deal(SPINNER_LEAD, first_leader=0)
    table.run("0: 5-5", "1: 3-5 left")
    events = table.run("0: 2-5 right", "1: 4-5 up", "0: 1-5 down", "1: 1-6 down")
    assert points_by_play(events) == [(0, "2-5", 5), (1, "4-5", 0), (0, "1-5", 10), (1, "1-6", 15)]
    assert count(table) == 15
    assert table.state.scores == [25, 15]


def test_the_first_double_played_after_a_plain_lead_becomes_the_spinner() -> None:
    """S2, S4: lead 3-5 = 8; 5-5 on the right: 3 + [5-5] 10 = 13; it is the spinner, but its
    crosswise sides stay closed until 1-5 covers its far side: 3 + 1 = 4. A later double is
    not a spinner and counts both halves: 1-1: 3 + [1-1] 2 = 5, scored. Then 0-5 up:
    3 + 2 + 0 + _ = 5, scored (a bare down side counts 0, not 5)."""
    table = Table("straight", players=2)
    table.deal(LATE_SPINNER, first_leader=0)
    events = table.run("0: 3-5", "1: 5-5 right")
    assert table.state.board.spinner == (5, 5)
    assert count(table) == 13
    closed = table.reject("0: 0-5 up")
    assert (closed.reason, closed.rule) == ("no_such_end", "S2")
    events += table.run("0: 1-5 right", "1: 1-1 right", "0: 0-5 up")
    assert points_by_play(events) == [
        (0, "3-5", 0),
        (1, "5-5", 0),
        (0, "1-5", 0),
        (1, "1-1", 5),
        (0, "0-5", 5),
    ]
    assert table.state.board.spinner == (5, 5)
    assert table.state.scores == [5, 5]


def test_play_points_of_a_blocked_line_go_to_the_mover() -> None:
    """S4: along BLOCKED_4P the counts are 12 12 13 18 8 9 12 10 11 12 (see the script); only
    seat 3's 4-6 (4 + 6 = 10) scores."""
    table = Table("straight", players=4)
    table.deal(BLOCKED_4P, first_leader=0)
    events = table.run(*BLOCKED_4P_SCRIPT)
    assert [points for _, _, points in points_by_play(events)] == BLOCKED_4P_POINTS


# --- S3: drawing ----------------------------------------------------------------------------------


def test_a_player_who_cannot_play_draws_until_a_tile_plays_and_must_then_play_it() -> None:
    """S3: seat 1 has no 6. Passing is refused while the boneyard has tiles; 1-2 is drawn and
    does not play, 1-6 is drawn and does: then neither drawing nor passing is allowed."""
    table = Table("straight", players=2)
    table.deal(DRAWING, DRAWING_STOCK, first_leader=0)
    table.run("0: 6-6")
    rejection = table.reject("1: pass")
    assert (rejection.reason, rejection.rule) == ("must_draw", "S3")
    assert table.run("1: draw") == [TileDrawn(seat=1, tile=(1, 2))]
    assert table.state.turn == 1
    assert table.run("1: draw") == [TileDrawn(seat=1, tile=(1, 6))]
    for move in ("1: draw", "1: pass"):
        rejection = table.reject(move)
        assert (rejection.reason, rejection.rule) == ("must_play", "S3")
    # 1-6 on the left: 1 + [6-6] 12 = 13, no score.
    assert table.run("1: 1-6 left") == [TilePlayed(seat=1, tile=(1, 6), end="left", points=0)]
    assert len(table.state.stock) == 12
    rejection = table.reject("0: draw")
    assert (rejection.reason, rejection.rule) == ("must_play", "S3")


def test_a_player_who_cannot_play_passes_only_when_the_boneyard_is_empty() -> None:
    """S3: four players leave no boneyard; seat 1 holds no 6, cannot draw, and passes."""
    table = Table("straight", players=4)
    started = table.deal(EMPTY_BONEYARD, first_leader=0)
    assert started.stock_size == 0
    table.run("0: 6-6")
    rejection = table.reject("1: draw")
    assert (rejection.reason, rejection.rule) == ("boneyard_empty", "S3")
    assert table.run("1: pass") == [TurnPassed(seat=1)]
    assert table.state.turn == 2
    assert legal_moves(table.state)[0] == PlayTile(seat=2, tile=(0, 6), end="left")


def test_legal_moves_offer_the_draw_only_without_a_playable_tile() -> None:
    """S3: seat 1, with no 6 and a full boneyard, has exactly one legal move: draw."""
    table = Table("straight", players=2)
    table.deal(DRAWING, DRAWING_STOCK, first_leader=0)
    table.run("0: 6-6")
    assert legal_moves(table.state) == [DrawTile(seat=1)]
    table.run("1: draw", "1: draw")
    assert legal_moves(table.state) == [
        PlayTile(seat=1, tile=(1, 6), end="left"),
        PlayTile(seat=1, tile=(1, 6), end="right"),
    ]
    assert PassTurn(seat=1) not in legal_moves(table.state)


# --- S5: domino -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kept", "rounded"),
    [
        pytest.param("1-5", 5, id="6-rounds-down-to-5"),
        pytest.param("6-6", 10, id="12-rounds-down-to-10"),
        pytest.param("4-4", 10, id="8-rounds-up-to-10"),
        pytest.param("3-6", 10, id="9-rounds-up-to-10"),
        pytest.param("5-5", 10, id="10-stays-10"),
    ],
)
def test_a_straight_domino_scores_the_opponents_count_rounded_to_five(
    kept: str, rounded: int
) -> None:
    """S5, S4: seat 0 dominoes; seat 1 keeps one tile, its count rounded (remainder 1-2 down,
    3-4 up). The last play's own 5 is scored too: seat 0 = 5 + 5 + the rounded count."""
    table = Table("straight", players=2)
    table.deal([TRAIL_0, f"{TRAIL_1} {kept}"], first_leader=0)
    events = table.run(*TRAIL_SCRIPT)
    assert [(seat, points) for seat, _, points in points_by_play(events) if points] == [
        (0, 5),
        (0, 5),
    ]
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("domino", 0, 0, rounded)
    assert ended.scores == (10 + rounded, 0)


# Four players with partners, double-nine, nobody ever short of a play: 25 plays on the right
# (the left end stays 0) and seat 0 goes out on its seventh. Each other seat keeps one double.
PAIRS_TRAIL = [
    "0-1 4-5 8-9 4-6 3-5 1-4 3-6",
    "1-2 5-6 0-9 6-8 5-7 4-7 9-9",
    "2-3 6-7 0-2 1-8 7-9 0-7 7-7",
    "3-4 7-8 2-4 1-3 1-9 0-3 8-8",
]
PAIRS_TRAIL_RIGHT = "1-2 2-3 3-4 4-5 5-6 6-7 7-8 8-9 0-9 0-2 2-4 4-6 6-8 1-8 1-3 3-5 5-7 7-9"
PAIRS_TRAIL_RIGHT += " 1-9 1-4 4-7 0-7 0-3 3-6"


def test_a_straight_pair_domino_counts_the_opponents_only_not_the_partner() -> None:
    """S5 with partners: the right end shows 1 2 3 4 5 6 7 8 9 0 2 4 6 8 1 3 5 7 9 1 4 7 0 3 6;
    the count is 5 twice, both on seat 0's plays (4-5 and 3-5): 10. Seat 0 goes out; the
    opponents keep 9-9 and 8-8 = 18 + 16 = 34, rounded up to 35; partner seat 2's 7-7 (14) is
    not counted (with it: 48 -> 50). Pair 0: 10 + 35 = 45."""
    table = Table("straight", players=4, partners=True, top=9)
    table.deal(PAIRS_TRAIL, first_leader=0)
    script = ["0: 0-1"]
    for k, name in enumerate(PAIRS_TRAIL_RIGHT.split(), start=1):
        script.append(f"{k % 4}: {name} right")
    events = table.run(*script)
    assert [(seat, points) for seat, _, points in points_by_play(events) if points] == [
        (0, 5),
        (0, 5),
    ]
    ended = round_end(events)
    assert ended.counts == (0, 18, 14, 16)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("domino", 0, 0, 35)
    assert ended.scores == (45, 0)


# --- S6: blocked ----------------------------------------------------------------------------------


def test_a_blocked_straight_round_goes_to_the_lowest_count_rounded_to_five() -> None:
    """S6, C10: seat 1 has the lowest count (7) and scores the others' 23 + 39 + 21 = 83,
    rounded up to 85; seat 3 keeps the 10 it scored in play."""
    table = Table("straight", players=4)
    table.deal(BLOCKED_4P, first_leader=0)
    events = table.run(*BLOCKED_4P_SCRIPT)
    ended = round_end(events)
    assert ended.counts == (23, 7, 39, 21)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 1, 1, 85)
    assert ended.scores == (0, 85, 0, 10)


def test_a_blocked_straight_pair_round_scores_the_opponents_only_rounded_down() -> None:
    """S6 with partners: pairs count 23 + 39 = 62 and 7 + 21 = 28; pair 1 scores the opponents'
    62 (its own 28 not included), rounded down to 60, on top of seat 3's 10 in play: 70."""
    table = Table("straight", players=4, partners=True)
    table.deal(BLOCKED_4P, first_leader=0)
    ended = round_end(table.run(*BLOCKED_4P_SCRIPT))
    assert (ended.outcome, ended.side, ended.points) == ("blocked", 1, 60)
    assert ended.scores == (0, 70)


def test_a_blocked_straight_pair_tie_goes_to_the_pair_nearest_the_hand() -> None:
    """S6, C7: pairs count 29 + 16 = 45 and 33 + 12 = 45; seat 1 led, so pair 1 wins and
    scores 45 (already a multiple of 5). Pair 0 keeps seat 0's 10 from play."""
    table = Table("straight", players=4, partners=True)
    table.deal(BLOCKED_4P_LATER, first_leader=1)
    ended = round_end(table.run(*BLOCKED_4P_LATER_SCRIPT))
    assert ended.counts == (29, 33, 16, 12)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 3, 1, 45)
    assert ended.scores == (10, 45)


def test_a_straight_round_blocks_on_the_draw_that_empties_the_boneyard() -> None:
    """C10, S3, S6: seat 1 must draw all seven tiles; the seventh leaves nobody able to play
    and the round ends there, with no pass. Seat 0 (5) scores 71 + 14 = 85."""
    table = Table("straight", players=3)
    table.deal(BLOCKED_3P, BLOCKED_3P_STOCK, first_leader=0)
    table.run(*BLOCKED_3P_SCRIPT)
    for drawn in tiles("2-4 2-5 3-3 3-4 3-5 4-4"):
        (event,) = table.run("1: draw")
        assert event == TileDrawn(seat=1, tile=drawn)
        assert table.state.phase == "playing"
        assert table.reject("1: pass").reason == "must_draw"
    events = table.run("1: draw")
    assert events[0] == TileDrawn(seat=1, tile=(5, 5))
    ended = round_end(events)
    assert [type(e) for e in events] == [TileDrawn, RoundEnded]
    assert ended.counts == (5, 71, 14)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 0, 0, 85)
    assert ended.scores == (85, 10, 0)


def test_a_stock_revealed_after_the_draw_that_blocks_is_empty() -> None:
    """C8 (reveal_stock), C10: the seventh draw empties the boneyard and blocks the round; the
    stock shown must be empty, not still hold 5-5, which is now in seat 1's hand."""
    table = Table("straight", players=3, reveal_stock=True)
    table.deal(BLOCKED_3P, BLOCKED_3P_STOCK, first_leader=0)
    table.run(*BLOCKED_3P_SCRIPT)
    events = table.run(*["1: draw"] * 7)
    ended = round_end(events)
    assert (5, 5) in ended.hands[1]
    assert ended.stock == ()


# --- C9, S7: target -------------------------------------------------------------------------------


def test_the_straight_target_defaults_to_250() -> None:
    """S7: a round worth 85 and 10 leaves the match on."""
    table = Table("straight", players=4)
    assert table.rules.target == 250
    table.deal(BLOCKED_4P, first_leader=0)
    table.run(*BLOCKED_4P_SCRIPT)
    assert table.state.phase == "dealing" and table.state.scores == [0, 85, 0, 10]


def test_a_straight_match_ends_mid_round_when_play_points_reach_the_target() -> None:
    """C9: target 5; seat 0's 4-5 makes the count 0 + 5 = 5 and reaches it. The round stops
    with both seats still holding tiles: seat 0 keeps 0-6 2-4 1-6 3-5 = 6+6+7+8 = 27, seat 1
    keeps 5-6 0-2 4-6 1-3 6-6 = 11+2+10+4+12 = 39; nothing else is scored."""
    table = Table("straight", players=2, target=5)
    table.deal([TRAIL_0, f"{TRAIL_1} 6-6"], first_leader=0)
    table.run(*TRAIL_SCRIPT[:4])
    events = table.run(TRAIL_SCRIPT[4])
    assert [type(e) for e in events] == [TilePlayed, RoundEnded, MatchEnded]
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("target", 0, 0, 0)
    assert ended.counts == (27, 39)
    assert ended.scores == (5, 0)
    assert match_end(events) == MatchEnded(winner=0, scores=(5, 0), reason="target")
    rejection = table.reject("1: 5-6 right")
    assert (rejection.reason, rejection.rule) == ("match_over", "C9")


def test_a_domino_that_reaches_the_target_with_its_play_points_scores_no_domino_points() -> None:
    """C9: target 10; seat 0 has 5, and its last tile 3-5 makes the count 5: 5 + 5 = 10. The
    match ends on the play: seat 1's 6-6 (12, rounded 10) is not scored."""
    table = Table("straight", players=2, target=10)
    table.deal([TRAIL_0, f"{TRAIL_1} 6-6"], first_leader=0)
    table.run(*TRAIL_SCRIPT[:-1])
    events = table.run(TRAIL_SCRIPT[-1])
    assert events[0] == TilePlayed(seat=0, tile=(3, 5), end="right", points=5)
    ended = round_end(events)
    assert (ended.outcome, ended.points, ended.scores) == ("target", 0, (10, 0))
    assert match_end(events) == MatchEnded(winner=0, scores=(10, 0), reason="target")
