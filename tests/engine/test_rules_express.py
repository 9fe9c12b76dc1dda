"""Express, the block game (E1-E6): leads, dominoes, blocked rounds, pair scoring, target.

Every deal is scripted (seat k's hand, then the stock) and every score below is worked out by
hand in the comments; a tile is written ``a-b`` and its value is ``a + b`` (C2).
"""

from __future__ import annotations

import pytest

from engine.game import legal_moves
from engine.tiles import full_set
from events.model import (
    DealRound,
    MatchEnded,
    PlayTile,
    RoundEnded,
    TilePlayed,
    TurnPassed,
)
from tests.engine.helpers import Table, match_end, move_tiles, passes, round_end, tiles

pytestmark = pytest.mark.engine

# --- Scripted deals ---------------------------------------------------------------------------

# Two players, double-six: seat 1 dominoes while seat 0, who led, passes four times.
DOMINO_2P = ["6-6 3-6 0-6 1-6 3-3 1-3 0-1", "5-6 3-4 5-5 4-4 4-5 2-5 0-5"]
DOMINO_2P_SCRIPT = (
    "0: 6-6",  # ends 6 | 6
    "1: 5-6 left",  # 5 | 6
    "0: 3-6 right",  # 5 | 3
    "1: 3-4 right",  # 5 | 4
    "0: pass",  # seat 0 holds 0-6 1-6 3-3 1-3 0-1: no 4, no 5
    "1: 5-5 left",  # 5 | 4
    "0: pass",
    "1: 4-4 right",  # 5 | 4
    "0: pass",
    "1: 4-5 right",  # 5 | 5
    "0: pass",
    "1: 2-5 left",  # 2 | 5
    "0: pass",
    "1: 0-5 right",  # seat 1's last tile: domino
)

# Four players, double-nine (28 of the 55 tiles dealt): seat 0 holds a chain on 7, 8 and 9 and
# dominoes; nobody else holds a 7, 8 or 9, so the other three pass every time.
CHAIN_4P = [
    "9-9 8-9 8-8 7-8 7-7 7-9 0-9",
    "0-0 0-1 0-2 0-3 0-4 0-5 0-6",  # 0+1+2+3+4+5+6 = 21
    "1-1 1-2 1-3 1-4 1-5 1-6 2-2",  # 2+3+4+5+6+7+4 = 31
    "2-3 2-4 2-5 2-6 3-3 3-4 3-5",  # 5+6+7+8+6+7+8 = 47
]
CHAIN_4P_PLAYS = (
    "0: 9-9",  # 9 | 9
    "0: 8-9 left",  # 8 | 9
    "0: 8-8 left",  # 8 | 9
    "0: 7-8 left",  # 7 | 9
    "0: 7-7 left",  # 7 | 9
    "0: 7-9 left",  # 9 | 9
    "0: 0-9 left",  # seat 0's last tile: domino
)


def chain_script() -> list[str]:
    """Seat 0's seven plays, each followed (but the last) by passes from seats 1, 2 and 3."""
    script: list[str] = []
    for play in CHAIN_4P_PLAYS[:-1]:
        script += [play, "1: pass", "2: pass", "3: pass"]
    return [*script, CHAIN_4P_PLAYS[-1]]


# Two players, double-six: blocked after three plays, ends 4 | 5 with every other 4 and 5
# sleeping.
BLOCKED_2P = ["6-6 5-6 3-6 3-3 2-3 1-3 0-3", "4-6 2-6 2-2 1-2 0-2 1-1 0-1"]
BLOCKED_2P_SCRIPT = ("0: 6-6", "1: 4-6 left", "0: 5-6 right")

# Four players, double-six, all dealt; seat 0 holds 6-6 and leads. Ten plays put every 6 on the
# line with 6 at both ends: nobody can play.
BLOCKED_PAIRS = [
    "6-6 2-6 4-5 1-5 2-2 2-4 2-5",
    "0-6 2-3 5-6 0-0 0-2 0-3 1-1",
    "0-1 3-6 3-3 3-4 3-5 4-4 5-5",
    "1-6 4-6 0-4 0-5 1-2 1-3 1-4",
]
BLOCKED_PAIRS_SCRIPT = (
    "0: 6-6",  # 6 | 6
    "1: 0-6 left",  # 0 | 6
    "2: 0-1 left",  # 1 | 6
    "3: 1-6 left",  # 6 | 6
    "0: 2-6 right",  # 6 | 2
    "1: 2-3 right",  # 6 | 3
    "2: 3-6 right",  # 6 | 6
    "3: 4-6 left",  # 4 | 6
    "0: 4-5 left",  # 5 | 6
    "1: 5-6 left",  # 6 | 6, all seven 6s played: blocked
)
# Left in hand: seat 0: 1-5 2-2 2-4 2-5 = 6+4+6+7 = 23; seat 1: 0-0 0-2 0-3 1-1 = 0+2+3+2 = 7;
# seat 2: 3-3 3-4 3-5 4-4 5-5 = 6+7+8+8+10 = 39; seat 3: 0-4 0-5 1-2 1-3 1-4 = 4+5+3+4+5 = 21.

# The same line one seat later: seat 1 holds 6-6 and is the hand; the pairs tie at 45.
TIED_PAIRS = [
    "1-6 4-6 1-5 2-2 2-4 2-5 3-3",
    "6-6 2-6 4-5 5-5 4-4 3-5 3-4",
    "0-6 2-3 5-6 0-4 1-2 1-3 1-4",
    "0-1 3-6 0-0 0-2 0-3 1-1 0-5",
]
TIED_PAIRS_SCRIPT = (
    "1: 6-6",
    "2: 0-6 left",
    "3: 0-1 left",
    "0: 1-6 left",
    "1: 2-6 right",
    "2: 2-3 right",
    "3: 3-6 right",
    "0: 4-6 left",
    "1: 4-5 left",
    "2: 5-6 left",
)
# Left in hand: seat 0: 1-5 2-2 2-4 2-5 3-3 = 6+4+6+7+6 = 29; seat 1: 5-5 4-4 3-5 3-4 =
# 10+8+8+7 = 33; seat 2: 0-4 1-2 1-3 1-4 = 4+3+4+5 = 16; seat 3: 0-0 0-2 0-3 1-1 0-5 =
# 0+2+3+2+5 = 12. Pairs: seats 0+2 = 29+16 = 45, seats 1+3 = 33+12 = 45.

# The same line again, seat 1 leading; pair 0 wins and its two hands tie at 17.
TIED_PARTNERS = [
    "1-6 4-6 0-0 0-2 0-3 1-1 5-5",
    "6-6 2-6 4-5 3-5 4-4 3-4 2-5",
    "0-6 2-3 5-6 0-4 1-3 2-2 0-5",
    "0-1 3-6 1-2 1-4 1-5 2-4 3-3",
]
# Left in hand: seat 0: 0-0 0-2 0-3 1-1 5-5 = 0+2+3+2+10 = 17; seat 1: 3-5 4-4 3-4 2-5 =
# 8+8+7+7 = 30; seat 2: 0-4 1-3 2-2 0-5 = 4+4+4+5 = 17; seat 3: 1-2 1-4 1-5 2-4 3-3 =
# 3+5+6+6+6 = 26. Pairs: 17+17 = 34 and 30+26 = 56.

# Three players, double-six: seat 1 holds 6-6 and every other 6 sleeps, so the lead blocks.
TIED_3P = [
    "3-4 3-3 2-4 0-1 0-2 1-2 1-4",  # 7+6+6+1+2+3+5 = 30
    "6-6 5-5 4-5 4-4 3-5 2-5 0-3",  # after the lead: 10+9+8+8+7+3 = 45
    "0-4 0-5 1-1 1-3 1-5 2-2 2-3",  # 4+5+2+4+6+4+5 = 30
]
TIED_3P_STOCK = "0-6 1-6 2-6 3-6 4-6 5-6 0-0"


# --- E1: no drawing; pass only without a legal play --------------------------------------------


def test_a_player_who_cannot_play_passes_and_the_round_goes_on() -> None:
    """E1, C4: seat 0 holds no 4 or 5 and passes; seat 1 can still play, so no block."""
    table = Table("express", players=2)
    table.deal(DOMINO_2P)
    events = table.run(*DOMINO_2P_SCRIPT[:5])
    assert events[-1] == TurnPassed(seat=0)
    assert table.state.turn == 1 and table.state.phase == "playing"
    assert table.reject("0: pass").reason == "not_your_turn"


# --- E2: the first round's lead ----------------------------------------------------------------


def test_the_highest_double_dealt_leads_the_first_round_and_must_be_led() -> None:
    """E2: 6-6 sleeps; seat 1's 5-5 beats seat 0's 4-4, so seat 1 leads 5-5 and nothing else."""
    table = Table("express", players=2)
    started = table.deal(["4-4 0-1 0-2 0-3 0-4 0-5 0-6", "5-5 1-2 1-3 1-4 1-5 1-6 2-3"])
    assert (started.leader, started.forced_lead) == (1, (5, 5))
    assert legal_moves(table.state) == [PlayTile(seat=1, tile=(5, 5))]
    rejection = table.reject("1: 2-3")
    assert (rejection.reason, rejection.rule) == ("must_lead_forced_tile", "E2")
    assert table.run("1: 5-5") == [TilePlayed(seat=1, tile=(5, 5), end=None)]


def test_with_four_players_on_double_six_the_double_six_leads() -> None:
    """E2: all 28 tiles are dealt; 6-6 is with seat 2, who leads it."""
    table = Table("express", players=4)
    hands = [BLOCKED_PAIRS[2], BLOCKED_PAIRS[3], BLOCKED_PAIRS[0], BLOCKED_PAIRS[1]]
    started = table.deal(hands)
    assert (started.leader, started.forced_lead) == (2, (6, 6))
    assert started.stock == () and started.stock_size == 0
    assert table.reject("2: 4-5").reason == "must_lead_forced_tile"


def test_only_dealt_doubles_count_for_the_first_lead() -> None:
    """E2 on double-nine: 9-9 sleeps, so seat 3's 8-8 beats seat 0's 7-7."""
    table = Table("express", players=4, top=9)
    started = table.deal(
        [
            "7-7 0-1 0-2 0-3 0-4 0-5 0-6",
            "1-2 1-3 1-4 1-5 1-6 1-7 1-8",
            "2-3 2-4 2-5 2-6 2-7 2-8 2-9",
            "8-8 3-4 3-5 3-6 3-7 3-8 3-9",
        ]
    )
    assert (started.leader, started.forced_lead) == (3, (8, 8))


def test_with_no_double_dealt_the_heaviest_tile_leads_highest_half_breaking_equal_pips() -> None:
    """E2: every double sleeps. Seat 0's 4-5 and seat 1's 3-6 both have 9 pips (the most
    dealt); 3-6 has the higher half (6 > 5), so seat 1 leads it."""
    table = Table("express", players=2)
    started = table.deal(
        ["4-5 0-1 0-2 0-3 0-4 0-5 0-6", "3-6 1-2 1-3 1-4 1-5 1-6 2-3"],
        "0-0 1-1 2-2 3-3 4-4 5-5 6-6 5-6 4-6 2-4 2-5 2-6 3-4 3-5",
    )
    assert (started.leader, started.forced_lead) == (1, (3, 6))
    rejection = table.reject("1: 1-6")
    assert (rejection.reason, rejection.rule) == ("must_lead_forced_tile", "E2")


# --- E4: domino -------------------------------------------------------------------------------


def test_a_single_who_dominoes_scores_the_opponents_count() -> None:
    """E4 singles: seat 1 goes out; seat 0 keeps 0-6 1-6 3-3 1-3 0-1 = 6+7+6+4+1 = 24."""
    table = Table("express", players=2)
    table.deal(DOMINO_2P)
    events = table.run(*DOMINO_2P_SCRIPT)
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("domino", 1, 1, 24)
    assert ended.counts == (24, 0)
    assert ended.scores == (0, 24)
    assert passes(table.log) == [0, 0, 0, 0, 0]
    assert table.state.phase == "dealing"


def test_a_pair_that_dominoes_scores_all_four_hands_the_partners_included() -> None:
    """E4 pairs: seat 0 goes out. All four hands: 0 + 21 + 31 + 47 = 99, partner seat 2's 31
    included (the opponents alone would be 21 + 47 = 68)."""
    table = Table("express", players=4, top=9)
    table.deal(CHAIN_4P)
    events = table.run(*chain_script())
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("domino", 0, 0, 99)
    assert ended.counts == (0, 21, 31, 47)
    assert ended.scores == (99, 0)


def test_four_singles_domino_scores_the_three_opponents() -> None:
    """E4 singles with four players (partners off): 21 + 31 + 47 = 99 to seat 0 alone."""
    table = Table("express", players=4, partners=False, top=9)
    table.deal(CHAIN_4P)
    ended = round_end(table.run(*chain_script()))
    assert (ended.winner, ended.side, ended.points) == (0, 0, 99)
    assert ended.scores == (99, 0, 0, 0)


# --- E5: blocked ------------------------------------------------------------------------------


def test_a_blocked_single_round_goes_to_the_lowest_count_scoring_the_opponents() -> None:
    """E5 singles, C10: ends 4 | 5 and no 4 or 5 in hand. Seat 0 keeps 3-6 3-3 2-3 1-3 0-3 =
    9+6+5+4+3 = 27; seat 1 keeps 2-6 2-2 1-2 0-2 1-1 0-1 = 8+4+3+2+2+1 = 20. Seat 1 wins, 27."""
    table = Table("express", players=2)
    table.deal(BLOCKED_2P)
    events = table.run(*BLOCKED_2P_SCRIPT)
    ended = round_end(events)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 1, 1, 27)
    assert ended.counts == (27, 20)
    assert ended.scores == (0, 27)


def test_a_blocked_pair_round_goes_to_the_lower_pair_scoring_all_four_hands() -> None:
    """E5 pairs: seats 0+2 = 23+39 = 62, seats 1+3 = 7+21 = 28; pair 1 wins and scores all
    four hands, its own included: 23+7+39+21 = 90. Its lowest hand, seat 1 (7), is the winner
    (E3)."""
    table = Table("express", players=4)
    table.deal(BLOCKED_PAIRS)
    ended = round_end(table.run(*BLOCKED_PAIRS_SCRIPT))
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 1, 1, 90)
    assert ended.counts == (23, 7, 39, 21)
    assert ended.scores == (0, 90)


def test_a_blocked_round_with_pairs_tied_goes_to_the_pair_nearest_the_hand() -> None:
    """E5, C7: both pairs count 45; seat 1 led (the hand), so pair 1 wins, scoring 45+45 = 90.
    Its winner is its lowest hand, seat 3 (12 < 33), not the hand itself (E3)."""
    table = Table("express", players=4)
    started = table.deal(TIED_PAIRS)
    assert started.leader == 1
    ended = round_end(table.run(*TIED_PAIRS_SCRIPT))
    assert ended.counts == (29, 33, 16, 12)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 3, 1, 90)
    assert ended.scores == (0, 90)


def test_the_winner_of_a_blocked_pair_round_is_its_lowest_hand_the_nearer_on_a_tie() -> None:
    """E3, E5, C7: pair 0 wins (34 < 56) and scores 17+30+17+26 = 90. Its seats 0 and 2 both
    count 17; from the hand, seat 1, the turn reaches seat 2 before seat 0: seat 2 is the
    winner."""
    table = Table("express", players=4)
    table.deal(TIED_PARTNERS)
    ended = round_end(table.run(*TIED_PAIRS_SCRIPT))
    assert ended.counts == (17, 30, 17, 26)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 2, 0, 90)


def test_a_blocked_round_with_singles_tied_goes_to_the_seat_nearest_the_hand() -> None:
    """E5, C7: seat 1 leads 6-6 and blocks at once. Seats 0 and 2 both count 30; in turn order
    from the hand (1, 2, 0) seat 2 comes first and scores 30 + 45 = 75."""
    table = Table("express", players=3)
    table.deal(TIED_3P, TIED_3P_STOCK)
    ended = round_end(table.run("1: 6-6"))
    assert ended.counts == (30, 45, 30)
    assert (ended.outcome, ended.winner, ended.side, ended.points) == ("blocked", 2, 2, 75)
    assert ended.scores == (0, 0, 75)


# --- E3: later rounds' leaders ------------------------------------------------------------------

LATER_LEADERS = [
    # (deal, stock, script, players, top, previous leader -> winner, after_winner, rotate)
    pytest.param(DOMINO_2P, None, DOMINO_2P_SCRIPT, 2, 6, 0, 1, id="domino-2p"),
    pytest.param(BLOCKED_PAIRS, None, BLOCKED_PAIRS_SCRIPT, 4, 6, 2, 1, id="blocked-pairs"),
    pytest.param(TIED_PAIRS, None, TIED_PAIRS_SCRIPT, 4, 6, 0, 2, id="tied-pairs"),
    pytest.param(TIED_PARTNERS, None, TIED_PAIRS_SCRIPT, 4, 6, 3, 2, id="tied-partners"),
    pytest.param(TIED_3P, TIED_3P_STOCK, ("1: 6-6",), 3, 6, 0, 2, id="tied-3p"),
]


@pytest.mark.parametrize(
    ("hands", "stock", "script", "players", "top", "after_winner", "rotate"), LATER_LEADERS
)
@pytest.mark.parametrize("next_leader", ["after_winner", "rotate"])
def test_the_next_round_is_led_after_the_winner_or_after_the_leader_by_option(
    hands: list[str],
    stock: str | None,
    script: tuple[str, ...],
    players: int,
    top: int,
    after_winner: int,
    rotate: int,
    next_leader: str,
) -> None:
    """E3. domino-2p: seat 0 led, seat 1 dominoed -> after_winner 0, rotate 1.
    blocked-pairs: seat 0 led, seat 1 is the winning pair's lowest hand -> 2, rotate 1.
    tied-pairs: seat 1 led, seat 3 is the winner -> 0, rotate 2.
    tied-partners: seat 1 led, seat 2 is the winner -> 3, rotate 2.
    tied-3p: seat 1 led, seat 2 won the tie -> 0, rotate 2."""
    table = Table("express", players=players, top=top, next_leader=next_leader)
    table.deal(hands, stock)
    table.run(*script)
    started = table.deal_canonical()
    expected = after_winner if next_leader == "after_winner" else rotate
    assert (started.round, started.leader, started.forced_lead) == (2, expected, None)


def test_the_option_next_leader_defaults_to_after_winner() -> None:
    """E3: seed 000's rule is the default."""
    assert Table("express").rules.next_leader == "after_winner"


def test_a_later_round_may_be_led_with_any_tile() -> None:
    """E3: round 2, led by seat 2 (after the winner, seat 1); the canonical order deals seat 2
    2-3 2-4 2-5 2-6 3-3 3-4 3-5 (canonical tiles 14-20), and every one is a legal lead."""
    table = Table("express", players=4)
    table.deal(BLOCKED_PAIRS)
    table.run(*BLOCKED_PAIRS_SCRIPT)
    table.deal_canonical()
    assert move_tiles(legal_moves(table.state)) == list(tiles("2-3 2-4 2-5 2-6 3-3 3-4 3-5"))
    assert table.run("2: 2-5") == [TilePlayed(seat=2, tile=(2, 5), end=None)]


# --- E6, C9: target ---------------------------------------------------------------------------


def test_the_express_target_defaults_to_100_and_a_99_point_round_does_not_end_the_match() -> None:
    """E6, C9: with the default target the pair domino worth 99 leaves the match on."""
    table = Table("express", top=9)
    assert table.rules.target == 100
    table.deal(CHAIN_4P)
    events = table.run(*chain_script())
    assert round_end(events).scores == (99, 0)
    assert not [e for e in events if isinstance(e, MatchEnded)]
    assert table.state.phase == "dealing"


def test_an_express_match_ends_at_the_end_of_the_round_that_reaches_the_target() -> None:
    """E6, C9: target 99 and the pair domino is worth exactly 99 (>= target): the round ends,
    then the match, and nothing more may be dealt."""
    table = Table("express", top=9, target=99)
    table.deal(CHAIN_4P)
    events = table.run(*chain_script())
    assert isinstance(events[-2], RoundEnded) and events[-2].outcome == "domino"
    assert match_end(events) == MatchEnded(winner=0, scores=(99, 0), reason="target")
    assert events[-1] == match_end(events)
    assert table.state.phase == "over"
    rejection = table.reject(DealRound(order=full_set(9)))
    assert (rejection.reason, rejection.rule) == ("match_over", "C9")
