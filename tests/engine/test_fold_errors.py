"""A corrupt log does not fold: ``evolve`` raises FoldError naming the event, what it would
follow and what is wrong — under ``python -O`` too — and a bug in the engine is not dressed up
as a corrupt log."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from engine.board import Board
from engine.game import FoldError, decide, evolve, replay
from engine.rules import Rules
from engine.views import redact
from events.model import (
    AnyEvent,
    DealRound,
    MatchCreated,
    MatchEnded,
    Rejection,
    Resign,
    RoundEnded,
    RoundStarted,
    TileDrawn,
    TilePlayed,
    TurnPassed,
    TurnTimedOut,
)
from tests.engine.helpers import Table

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]

# --- Logs to corrupt ------------------------------------------------------------------------------


def express_dealt() -> list[AnyEvent]:
    """Express, four players in pairs, dealt in canonical order: seat 3 must lead 6-6 (E2)."""
    table = Table("express")
    table.deal_canonical()
    return table.log


def express_led() -> list[AnyEvent]:
    """As :func:`express_dealt`, after seat 3's 6-6 lead: seat 0 (0-0 … 0-6) to move."""
    table = Table("express")
    table.deal_canonical()
    table.run("3: 6-6")
    return table.log


def express_two_dealt() -> list[AnyEvent]:
    """Express, two players, canonical deal: seat 1 leads 2-2 (E2); 14 tiles sleep (C5)."""
    table = Table("express", players=2)
    table.deal_canonical()
    return table.log


def straight_dealt() -> list[AnyEvent]:
    """Straight, two players, canonical deal, seat 0 leads; the boneyard starts 2-3 (C5)."""
    table = Table("straight", players=2)
    table.deal_canonical(first_leader=0)
    return table.log


def straight_four_dealt() -> list[AnyEvent]:
    """Straight, four single players: all 28 tiles are dealt and the boneyard is empty."""
    table = Table("straight", players=4)
    table.deal_canonical(first_leader=0)
    return table.log


def resigned() -> list[AnyEvent]:
    """Express in pairs: seat 1 resigns after the lead, ending the round and the match (C9)."""
    table = Table("express")
    table.deal_canonical()
    table.run("3: 6-6")
    table.send(Resign(seat=1))
    return table.log


def started(log: list[AnyEvent]) -> RoundStarted:
    """The last ``RoundStarted`` of ``log``."""
    return [e for e in log if isinstance(e, RoundStarted)][-1]


def swap_last(log: list[AnyEvent], **changes: object) -> list[AnyEvent]:
    """``log`` with its last event changed as ``changes`` say."""
    return [*log[:-1], msgspec.structs.replace(log[-1], **changes)]


def short_hand() -> list[AnyEvent]:
    """Seat 0 is dealt six tiles; its seventh goes to the stock."""
    log = express_two_dealt()
    deal = started(log)
    hands = deal.hands
    assert hands[0] is not None and deal.stock is not None
    return swap_last(log, hands=(hands[0][:6], *hands[1:]), stock=(hands[0][6], *deal.stock))


def doubled_tile() -> list[AnyEvent]:
    """The stock holds 6-6 twice and 5-6 not at all."""
    log = express_two_dealt()
    stock = started(log).stock
    assert stock is not None
    return swap_last(log, stock=tuple((6, 6) if t == (5, 6) else t for t in stock))


# --- The cases ------------------------------------------------------------------------------------

Case = tuple[Callable[[], list[AnyEvent]], str]
"""A corrupt log, and what the FoldError's message must say."""

CASES: dict[str, Case] = {
    "an event before match_created": (
        lambda: express_dealt()[1:],
        "event 1 (round_started): a match's log opens with match_created",
    ),
    "a second match_created": (
        lambda: [*express_dealt()[:1], *express_dealt()[:1]],
        "event 2 (match_created) cannot follow version 1 (phase dealing, round 0): "
        "only the first event of a log creates the match",
    ),
    "match_created naming two players for four seats": (
        lambda: [MatchCreated(rules=Rules.make("express"), players=("a", "b"))],
        "event 1 (match_created): 2 players named for 4 seats (C3)",
    ),
    "a play before any deal": (
        lambda: [*express_dealt()[:1], TilePlayed(seat=3, tile=(6, 6), end=None)],
        "event 2 (tile_played) cannot follow version 1 (phase dealing, round 0): no round is on",
    ),
    "a deal while a round is on": (
        lambda: [*express_dealt(), express_dealt()[1]],
        "event 3 (round_started) cannot follow version 2 (phase playing, round 1): "
        "a round is still on",
    ),
    "a play after the match is over": (
        lambda: [*resigned(), TilePlayed(seat=0, tile=(0, 6), end="left")],
        "(phase over, round 1): the match is over",
    ),
    "a deal after the match is over": (
        lambda: [*resigned(), express_dealt()[1]],
        "(phase over, round 1): the match is over",
    ),
    "a play by a seat not to move": (
        lambda: [*express_dealt(), TilePlayed(seat=0, tile=(0, 0), end=None)],
        "event 3 (tile_played) cannot follow version 2 (phase playing, round 1): "
        "it is seat 3's turn, not seat 0's",
    ),
    "a pass by a seat not to move": (
        lambda: [*express_led(), TurnPassed(seat=2)],
        "it is seat 0's turn, not seat 2's",
    ),
    "a time-out of a seat not to move": (
        lambda: [*express_led(), TurnTimedOut(seat=1)],
        "it is seat 0's turn, not seat 1's",
    ),
    "a seat that does not exist": (
        lambda: [*express_led(), TilePlayed(seat=7, tile=(0, 6), end="left")],
        "it is seat 0's turn, not seat 7's",
    ),
    "a tile not in the hand": (
        lambda: [*express_dealt(), TilePlayed(seat=3, tile=(0, 0), end=None)],
        "[0|0] is not in seat 3's hand",
    ),
    "a tile that does not match its end": (
        lambda: [*express_led(), TilePlayed(seat=0, tile=(0, 1), end="left")],
        "[0|1] does not match the left end's 6",
    ),
    "a tile on an end that is not open": (
        lambda: [*express_led(), TilePlayed(seat=0, tile=(0, 6), end="up")],
        "the 'up' end is not open",
    ),
    "a play on no end after the lead": (
        lambda: [*express_led(), TilePlayed(seat=0, tile=(0, 6), end=None)],
        "only the lead is played on no end (C6)",
    ),
    "a lead on an end": (
        lambda: [*express_dealt(), TilePlayed(seat=3, tile=(6, 6), end="left")],
        "the lead is played on no end, not 'left'",
    ),
    "a draw from an empty boneyard": (
        lambda: [*straight_four_dealt(), TileDrawn(seat=0, tile=(6, 6))],
        "the boneyard is empty (S3)",
    ),
    "a draw in Express": (
        lambda: [*express_two_dealt(), TileDrawn(seat=1, tile=(2, 3))],
        "there is no drawing in Express (E1)",
    ),
    "a draw of a tile that is not next in the boneyard": (
        lambda: [*straight_dealt(), TileDrawn(seat=0, tile=(6, 6))],
        "[6|6] drawn, but the boneyard's next tile is [2|3]",
    ),
    "a draw whose tile is hidden": (
        lambda: [*straight_dealt(), TileDrawn(seat=0, tile=None)],
        "the drawn tile is hidden: a seat's view is not a log",
    ),
    "a deal of six tiles to a seat": (
        short_hand,
        "seat 0 is dealt 6 tiles, not 7 (C5)",
    ),
    "a deal of three hands to four players": (
        lambda: swap_last(express_dealt(), hands=started(express_dealt()).hands[:3]),
        "3 hands dealt to 4 players (C5)",
    ),
    "a deal that is not the whole set": (
        doubled_tile,
        "the hands and the stock are not the whole double-6 set (C1)",
    ),
    "a deal with a hidden hand": (
        lambda: [*express_dealt()[:1], redact(express_dealt()[1], 0)],
        "seat 1's hand is hidden: a view is not a log",
    ),
    "a deal that skips a round": (
        lambda: swap_last(express_dealt(), round=3),
        "round 3 dealt after round 0",
    ),
    "a deal led by a seat that does not exist": (
        lambda: swap_last(express_dealt(), leader=4),
        "the leader, seat 4, does not exist (C3)",
    ),
    "a forced lead the leader does not hold": (
        lambda: swap_last(express_dealt(), forced_lead=(0, 0)),
        "the forced lead [0|0] is not in the leader's hand (E2)",
    ),
    "a round end for another round": (
        lambda: swap_last(resigned()[:-1], round=2),
        "it ends round 2, not round 1",
    ),
    "a round end with one score for two sides": (
        lambda: swap_last(resigned()[:-1], scores=(0,)),
        "1 scores for 2 sides",
    ),
    "a round end between rounds": (
        lambda: [*resigned()[:-1], resigned()[-2]],
        "(phase dealing, round 1): no round is on",
    ),
    "a match end for a side that does not exist": (
        lambda: swap_last(resigned(), winner=2),
        "side 2 does not exist (C3)",
    ),
    "a second match end": (
        lambda: [*resigned(), resigned()[-1]],
        "the match is already over",
    ),
}


def fold_error(log: list[AnyEvent]) -> str | None:
    """The message of the FoldError that folding ``log`` raises, None if it folds."""
    try:
        replay(log)
    except FoldError as e:
        return str(e)
    return None


# --- Tests ----------------------------------------------------------------------------------------


def test_every_uncorrupted_log_here_folds() -> None:
    for build in (
        express_dealt,
        express_led,
        express_two_dealt,
        straight_dealt,
        straight_four_dealt,
        resigned,
    ):
        assert fold_error(build()) is None, build.__name__


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_corrupt_log_raises_fold_error_saying_what_is_wrong(case: str) -> None:
    """Each case breaks what a fold relies on (C1, C3, C4, C5, C6, C8, C9, E1, E2, S3); the
    message names the event, the version and phase it would follow, and the fault."""
    build, expected = CASES[case]
    message = fold_error(build())
    assert message is not None, f"{case}: folded"
    assert expected in message
    assert message.startswith("event ")


def test_a_corrupt_log_raises_the_same_fold_errors_under_python_dash_o() -> None:
    """The checks are explicit, not asserts: ``-O`` strips asserts, and must change nothing."""
    probe = (
        "import json, sys\n"
        "from tests.engine.test_fold_errors import CASES, fold_error\n"
        "print(json.dumps({'optimize': sys.flags.optimize,\n"
        "    'errors': {name: fold_error(build()) for name, (build, _) in CASES.items()}}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["optimize"] == 1
    assert report["errors"] == {name: fold_error(build()) for name, (build, _) in CASES.items()}
    for name, (_, expected) in CASES.items():
        assert expected in (report["errors"][name] or ""), name


def test_a_fold_error_names_the_event_by_its_version_in_the_log() -> None:
    log = [*express_led(), TilePlayed(seat=0, tile=(1, 1), end="left")]
    with pytest.raises(FoldError, match=r"^event 4 \(tile_played\) cannot follow version 3 "):
        replay(log)


def test_a_rejected_fold_leaves_the_version_where_it_was() -> None:
    state = replay(express_led())
    with pytest.raises(FoldError):
        evolve(state, TilePlayed(seat=0, tile=(1, 1), end="left"))
    assert state.version == 3


def test_an_empty_log_is_a_fold_error() -> None:
    with pytest.raises(FoldError, match="no events"):
        replay([])


def test_a_broken_state_is_a_bug_that_propagates_not_a_corrupt_log() -> None:
    """A state no log can give (a round on with no history) raises its own error, unwrapped."""
    state = replay(express_dealt())
    state.history = []
    with pytest.raises(IndexError):
        evolve(state, TilePlayed(seat=3, tile=(6, 6), end=None))


def test_a_round_ended_with_no_winner_gives_the_next_deal_no_leader() -> None:
    """E3: a round that names no winner (only a resignation does, and it ends the match) leaves
    the next round without a leader: the deal is refused, not guessed."""
    log = resigned()[:-1]  # the resignation's MatchEnded is lost
    state = replay(log)
    order = tuple(t for h in started(log).hands if h is not None for t in h)
    stock = started(log).stock
    assert stock is not None
    rejection = decide(state, DealRound(order=order + stock))
    assert isinstance(rejection, Rejection)
    assert (rejection.reason, rejection.rule) == ("bad_deal", "E3")


def test_placing_a_tile_on_a_closed_end_raises_value_error_naming_the_end() -> None:
    board = Board()
    board.lead((6, 6), spinners=True)
    with pytest.raises(ValueError, match=r"cannot place \[3\|6\]: the up end is closed"):
        board.place((3, 6), 2, spinners=True)


def test_round_ended_and_match_ended_fold_from_a_resignation() -> None:
    state = replay(resigned())
    assert state.phase == "over"
    assert isinstance(state.last_round, RoundEnded)
    assert isinstance(state.result, MatchEnded) and state.result.resigned == 1
