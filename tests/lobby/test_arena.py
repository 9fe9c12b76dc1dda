"""The arena engine, pure: round robin, Swiss and timed-arena schedules, seats, standings."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from itertools import combinations

import msgspec
import pytest

from engine.rules import Rules
from services.lobby.arena import (
    BYE_POINTS,
    ArenaError,
    Pairing,
    Progress,
    Result,
    Round,
    Spec,
    Table,
    arena_round,
    next_round,
    over,
    round_robin,
    seatings,
    standings,
    swiss_round,
    wilson,
)

pytestmark = pytest.mark.behaviour

TWO = Table(players=2)
THREE = Table(players=3)
FOUR = Table(players=4)
PAIRS = Table(players=4, partners=True)
TABLES = [TWO, THREE, FOUR, PAIRS]


def table_id(table: Table) -> str:
    return f"{table.players}{' partners' if table.partners else ''}"


def names(n: int) -> list[str]:
    return [f"e{i}" for i in range(n)]


def played(pairing: Pairing, table: Table, rng: random.Random) -> Result:
    """A made-up result: a random side wins, with the highest score."""
    winner = rng.randrange(table.sides)
    scores = [rng.randrange(100) for _ in range(table.sides)]
    scores[winner] = 100
    return Result.of(pairing, table, winner, scores)


def sides_played(pairings: Sequence[Pairing], table: Table) -> Counter[tuple[str, int]]:
    """How often each entrant played each side."""
    return Counter(
        (entrant, side)
        for p in pairings
        for entrant, side in dict.fromkeys(
            (e, table.side_of(seat)) for seat, e in enumerate(p.seats)
        )
    )


def meetings(pairings: Sequence[Pairing]) -> Counter[frozenset[str]]:
    return Counter(frozenset(pair) for p in pairings for pair in combinations(p.entrants, 2))


# -- tables and seats -------------------------------------------------------------------------


def test_a_table_of_partners_seats_each_side_opposite_itself() -> None:
    """C3: seats 0 and 2 against 1 and 3."""
    assert PAIRS.sides == 2 and FOUR.sides == 4 and THREE.sides == 3
    assert PAIRS.seating(("a", "b")) == ("a", "b", "a", "b")
    assert Table.of(Rules.make("express", players=4)) == PAIRS
    assert Table.of(Rules.make("straight", players=3)) == THREE
    with pytest.raises(ArenaError):
        Table(players=5)
    with pytest.raises(ArenaError):
        Table(players=3, partners=True)
    with pytest.raises(ArenaError):
        PAIRS.seating(("a", "b", "c"))


def test_a_fixed_line_up_is_turned_a_seat_each_game() -> None:
    plan = seatings(["s", "g", "s", "g"], 4)
    assert plan == [("s", "g", "s", "g"), ("g", "s", "g", "s")] * 2  # the pairs swap (C3)
    assert seatings(["a", "b", "c"], 3) == [("a", "b", "c"), ("c", "a", "b"), ("b", "c", "a")]


# -- round robin ----------------------------------------------------------------------------


@pytest.mark.parametrize("table", TABLES, ids=table_id)
@pytest.mark.parametrize("n", range(2, 9))
def test_every_group_meets_once_a_pass_and_rounds_seat_each_entrant_once(
    table: Table, n: int
) -> None:
    if n < table.sides:
        with pytest.raises(ArenaError):
            round_robin(names(n), table)
        return
    rounds = round_robin(names(n), table, games_per_pairing=2)
    pairings = [p for r in rounds for p in r.pairings]
    groups = Counter(frozenset(p.entrants) for p in pairings)
    assert groups == {frozenset(g): 2 for g in combinations(names(n), table.sides)}
    assert [r.number for r in rounds] == list(range(1, len(rounds) + 1))
    for r in rounds:
        seated = [e for p in r.pairings for e in p.entrants]
        assert len(seated) == len(set(seated))  # nobody at two tables in a round
        assert [p.board for p in r.pairings] == list(range(len(r.pairings)))
        assert all(p.round == r.number and len(p.seats) == table.players for p in r.pairings)
        assert all(len(p.entrants) == table.sides for p in r.pairings)
        assert r.byes == ()


@pytest.mark.parametrize("n", range(2, 13))
def test_two_sided_round_robins_take_the_fewest_rounds(n: int) -> None:
    """The circle method: n - 1 rounds for an even field, n for an odd one (one rests)."""
    assert len(round_robin(names(n), TWO)) == (n - 1 if n % 2 == 0 else n)
    assert len(round_robin(names(n), PAIRS, games_per_pairing=3)) == 3 * len(
        round_robin(names(n), TWO)
    )


@pytest.mark.parametrize("table", TABLES, ids=table_id)
@pytest.mark.parametrize("n", range(2, 8))
def test_over_as_many_games_as_sides_every_entrant_of_a_group_plays_every_side_once(
    table: Table, n: int
) -> None:
    if n < table.sides:
        return
    rounds = round_robin(names(n), table, games_per_pairing=table.sides)
    by_group: dict[frozenset[str], list[Pairing]] = {}
    for p in (p for r in rounds for p in r.pairings):
        by_group.setdefault(frozenset(p.entrants), []).append(p)
    for group, games in by_group.items():
        counts = sides_played(games, table)
        assert counts == {(e, s): 1 for e in group for s in range(table.sides)}
    # with partners the entrant of a side holds both of its seats (C3)
    if table.partners:
        assert all(
            p.seats[0] == p.seats[2] and p.seats[1] == p.seats[3]
            for g in by_group.values()
            for p in g
        )


@pytest.mark.parametrize("n", range(2, 14))
def test_one_pass_of_a_two_sided_round_robin_plays_each_side_within_one_game_of_even(
    n: int,
) -> None:
    pairings = [p for r in round_robin(names(n), TWO) for p in r.pairings]
    counts = sides_played(pairings, TWO)
    for e in names(n):
        assert abs(counts[e, 0] - counts[e, 1]) <= (n - 1) % 2


def test_a_round_robin_depends_on_its_seed_alone() -> None:
    field = names(8)
    assert round_robin(field, TWO, seed=7) == round_robin(field, TWO, seed=7)
    assert round_robin(field, TWO, seed=7) != round_robin(field, TWO, seed=8)
    assert round_robin(field, TWO) == round_robin(field, TWO, seed=None)
    first = round_robin(field, TWO)[0].pairings[0]
    assert first.seats == ("e0", "e7")  # no seed: the order given


def test_a_round_robin_refuses_an_entrant_named_twice_or_no_games() -> None:
    with pytest.raises(ArenaError, match="more than once: a"):
        round_robin(["a", "b", "a"], TWO)
    with pytest.raises(ArenaError):
        round_robin(["a", "b"], TWO, games_per_pairing=0)


# -- Swiss ----------------------------------------------------------------------------------


def _groupable(players: Sequence[str], k: int, met: Counter[frozenset[str]], limit: int) -> bool:
    """Brute force: can ``players`` be cut into groups of ``k`` who have met at most ``limit``
    times each?"""
    if not players:
        return True
    head, rest = players[0], players[1:]
    for others in combinations(rest, k - 1):
        group = (head, *others)
        if all(met[frozenset(p)] <= limit for p in combinations(group, 2)) and _groupable(
            [e for e in rest if e not in others], k, met, limit
        ):
            return True
    return False


def swiss(
    n: int, table: Table, rounds: int, seed: int, games: int = 1
) -> list[tuple[Round, list[Result]]]:
    """A whole Swiss event with made-up results."""
    rng = random.Random(seed)
    results: list[Result] = []
    byes: list[str] = []
    out = []
    for number in range(1, rounds + 1):
        r = swiss_round(number, names(n), table, results, byes, games=games, seed=seed)
        these = [played(p, table, rng) for p in r.pairings]
        out.append((r, these))
        results += these
        byes += r.byes
    return out


@pytest.mark.parametrize("table", TABLES, ids=table_id)
@pytest.mark.parametrize("n", range(2, 11))
def test_swiss_never_repeats_a_meeting_while_one_can_be_avoided(table: Table, n: int) -> None:
    if n < table.sides:
        return
    for seed in range(3):
        history: list[Pairing] = []
        for r, _ in swiss(n, table, rounds=n + 2, seed=seed):
            met = meetings(history)
            now = [p.entrants for p in r.pairings]
            most = max((met[frozenset(p)] for g in now for p in combinations(g, 2)), default=0)
            playing = [e for e in names(n) if e not in r.byes]
            if most > 0:
                assert not _groupable(playing, table.sides, met, most - 1), (n, seed, r)
            assert sorted(e for g in now for e in g) == sorted(playing)
            history += r.pairings


def test_swiss_meets_everyone_once_before_anyone_twice_in_a_small_field() -> None:
    events = swiss(6, TWO, rounds=5, seed=1)
    assert set(meetings([p for r, _ in events for p in r.pairings]).values()) == {1}


def test_swiss_seats_the_nearest_scores_together() -> None:
    """After round 1 the winners meet winners and the losers meet losers."""
    table = TWO
    first = swiss_round(1, names(8), table)
    assert [p.entrants for p in first.pairings] == [
        ("e0", "e1"),
        ("e2", "e3"),
        ("e4", "e5"),
        ("e6", "e7"),
    ]  # no seed: the order given; the nearest places together
    results = [Result.of(p, table, 0, (100, 40)) for p in first.pairings]
    winners = {p.seats[0] for p in first.pairings}
    second = swiss_round(2, names(8), table, results)
    for p in second.pairings:
        assert len(winners & set(p.entrants)) in (0, 2)
    assert set(second.pairings[0].entrants) <= winners  # the top board holds the leaders


def test_the_swiss_bye_goes_to_the_lowest_placed_without_one_and_is_worth_a_win() -> None:
    field = names(5)
    results: list[Result] = []
    byes: list[str] = []
    for number in range(1, 6):
        r = swiss_round(number, field, TWO, results, byes)
        assert len(r.byes) == 1 and r.byes[0] not in byes
        ranked = [s.entrant for s in standings(results, byes, field)]
        without = [e for e in ranked if e not in byes]
        points = {s.entrant: s.points for s in standings(results, byes, field)}
        assert points[r.byes[0]] == min(points[e] for e in without)
        results += [Result.of(p, TWO, 1, (10, 100)) for p in r.pairings]
        byes += r.byes
    assert sorted(byes) == field  # five rounds: everyone rests once
    row = {s.entrant: s for s in standings(results, byes, field)}
    assert all(s.byes == 1 and s.games == 4 for s in row.values())
    assert sum(s.points for s in row.values()) == len(results) + 5 * BYE_POINTS


def test_a_swiss_round_plays_each_pairing_as_often_as_asked_with_the_sides_turned() -> None:
    r = swiss_round(1, names(4), THREE, games=3)
    assert len(r.pairings) == 3 and r.byes == ("e3",)
    assert [p.board for p in r.pairings] == [0, 1, 2]
    assert sides_played(r.pairings, THREE) == {(e, s): 1 for e in names(3) for s in range(3)}


@pytest.mark.parametrize("table", TABLES, ids=table_id)
def test_swiss_seats_each_entrant_on_every_side_within_two_games_of_even(table: Table) -> None:
    """Each table is seated to even out its entrants' sides; it cannot always even them out
    exactly (two who have both played side 0 more often meet), but never by more than two."""
    n = table.sides * 3
    for seed in range(10):
        events = swiss(n, table, rounds=table.sides * 2, seed=seed)
        counts = sides_played([p for r, _ in events for p in r.pairings], table)
        for e in names(n):
            played_sides = [counts[e, s] for s in range(table.sides)]
            assert max(played_sides) - min(played_sides) <= 2, (table, e, played_sides)


def test_a_swiss_event_depends_on_its_seed_alone() -> None:
    assert swiss(9, THREE, 4, seed=5) == swiss(9, THREE, 4, seed=5)
    assert swiss(9, THREE, 4, seed=5) != swiss(9, THREE, 4, seed=6)


def test_swiss_pairs_a_large_field_quickly_without_repeats() -> None:
    events = swiss(64, TWO, rounds=10, seed=2)
    assert set(meetings([p for r, _ in events for p in r.pairings]).values()) == {1}


# -- arena ----------------------------------------------------------------------------------


def test_an_arena_seats_only_idle_entrants_with_the_nearest_points() -> None:
    field = names(6)
    # e0 and e1 have won twice, e2 and e3 once, e4 and e5 never
    results = [
        Result.of(Pairing(round=0, board=0, seats=("e0", "e5")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=0, board=1, seats=("e1", "e4")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=0, board=2, seats=("e2", "e4")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=0, board=3, seats=("e3", "e5")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=0, board=4, seats=("e0", "e2")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=0, board=5, seats=("e1", "e3")), TWO, 0, (100, 0)),
    ]
    r = arena_round(7, field, TWO, results, entrants=field)
    assert r.number == 7
    assert [set(p.entrants) for p in r.pairings] == [{"e0", "e1"}, {"e2", "e3"}, {"e4", "e5"}]
    idle = ["e0", "e2", "e5"]
    r = arena_round(8, idle, TWO, results, entrants=field)
    assert [set(p.entrants) for p in r.pairings] == [{"e0", "e5"}]  # e2 just played e0
    assert all(set(p.entrants) <= set(idle) for p in r.pairings)


def test_an_arena_never_seats_anyone_with_the_entrants_of_their_last_game() -> None:
    field = names(4)
    last = [
        Result.of(Pairing(round=1, board=0, seats=("e0", "e1")), TWO, 0, (100, 0)),
        Result.of(Pairing(round=1, board=1, seats=("e2", "e3")), TWO, 0, (100, 0)),
    ]
    assert arena_round(2, ["e0", "e1"], TWO, last, entrants=field).pairings == ()
    r = arena_round(2, field, TWO, last, entrants=field)
    assert {frozenset(p.entrants) for p in r.pairings} == {
        frozenset({"e0", "e2"}),
        frozenset({"e1", "e3"}),
    }
    # an arena of two: nobody else to play, so the rematch it is
    alone = arena_round(2, ["e0", "e1"], TWO, last[:1], entrants=["e0", "e1"])
    assert [set(p.entrants) for p in alone.pairings] == [{"e0", "e1"}]


def test_an_arena_of_three_player_tables_waits_for_three_idle_entrants() -> None:
    assert arena_round(1, names(2), THREE, entrants=names(5)).pairings == ()
    r = arena_round(1, names(5), THREE, entrants=names(5))
    assert len(r.pairings) == 1 and len(r.pairings[0].entrants) == 3


def arena_spec(duration: float = 60.0, table: Table = TWO) -> Spec:
    return Spec(format="arena", table=table, duration_s=duration)


def test_an_arena_pairs_whoever_is_idle_until_its_time_is_up_then_ends_when_play_ends() -> None:
    spec = arena_spec(60.0)
    progress = Progress(roster=tuple(names(4)), present=tuple(names(4)), started=1000.0)
    first = next_round(spec, progress, now=1000.0)
    assert first is not None and len(first.pairings) == 2
    progress = msgspec.structs.replace(progress, rounds=(first,))
    assert next_round(spec, progress, now=1010.0) is None  # everyone is at a table
    done = first.pairings[0]
    progress = msgspec.structs.replace(
        progress, results={done.id: Result.of(done, TWO, 0, (100, 3))}
    )
    # the two now idle have just played each other, and the others are busy: they wait
    assert next_round(spec, progress, now=1020.0) is None
    other = first.pairings[1]
    progress = msgspec.structs.replace(
        progress,
        results={**progress.results, other.id: Result.of(other, TWO, 1, (5, 100))},
    )
    second = next_round(spec, progress, now=1030.0)
    assert second is not None and second.number == 2 and len(second.pairings) == 2
    for p in second.pairings:
        assert frozenset(p.entrants) not in {frozenset(done.entrants), frozenset(other.entrants)}
    # the caller may say who is idle (say, who is connected)
    only = next_round(spec, progress, now=1030.0, idle={"e0", "e1", "e2"})
    assert only is not None and len(only.pairings) == 1
    assert set(only.pairings[0].entrants) <= {"e0", "e1", "e2"}
    progress = msgspec.structs.replace(progress, rounds=(first, second))
    assert not over(spec, progress, now=1070.0)  # time is up, but games are in play
    assert next_round(spec, progress, now=1070.0) is None
    results = dict(progress.results)
    for p in second.pairings:
        results[p.id] = Result.of(p, TWO, 0, (100, 0))
    progress = msgspec.structs.replace(progress, results=results)
    assert next_round(spec, progress, now=1060.0) is None  # the end time itself is too late
    assert over(spec, progress, now=1060.0)
    assert not over(spec, progress, now=1059.0)


# -- an event in progress -------------------------------------------------------------------


def run(spec: Spec, field: list[str], seed: int = 0) -> Progress:
    """Play an event to its end, one round at a time, with made-up results."""
    rng = random.Random(seed)
    progress = Progress(roster=tuple(field), present=tuple(field))
    while (r := next_round(spec, progress, now=0.0)) is not None:
        progress = msgspec.structs.replace(progress, rounds=(*progress.rounds, r))
        if r.pairings:  # nothing more is due while the round is in play
            assert next_round(spec, progress, now=0.0) is None
        results = dict(progress.results)
        results.update({p.id: played(p, spec.table, rng) for p in r.pairings})
        progress = msgspec.structs.replace(progress, results=results)
    assert over(spec, progress, now=0.0)
    return progress


def test_a_round_robin_event_schedules_its_rounds_one_at_a_time_to_the_end() -> None:
    spec = Spec(format="round_robin", table=TWO, games_per_pairing=2)
    progress = run(spec, names(5))
    assert progress.rounds == tuple(round_robin(names(5), TWO, games_per_pairing=2))
    rows = progress.standings()
    assert sum(s.games for s in rows) == 2 * 2 * 10 and all(s.games == 8 for s in rows)


def test_a_round_robin_drops_the_games_of_an_entrant_who_has_left() -> None:
    spec = Spec(format="round_robin", table=TWO)
    field = tuple(names(4))
    progress = Progress(roster=field, present=field)
    first = next_round(spec, progress, 0.0)
    assert first is not None and len(first.pairings) == 2
    results = {p.id: Result.of(p, TWO, 0, (100, 0)) for p in first.pairings}
    progress = Progress(roster=field, present=field[:3], rounds=(first,), results=results)
    second = next_round(spec, progress, 0.0)
    assert second is not None and second.number == 2 and len(second.pairings) == 1
    assert "e3" not in second.pairings[0].seats


def test_a_swiss_event_ends_after_its_rounds() -> None:
    spec = Spec(format="swiss", table=THREE, rounds=4)
    progress = run(spec, names(7))
    assert len(progress.rounds) == 4
    assert len(progress.byes()) == 4  # one entrant rests each round
    rows = progress.standings()
    assert {s.entrant for s in rows} == set(names(7))
    assert sum(s.points for s in rows) == pytest.approx(8 * 1.5 + 4 * BYE_POINTS)


def test_an_event_waits_for_its_round_to_finish() -> None:
    for spec in (Spec(format="swiss", table=TWO, rounds=3), Spec(format="round_robin")):
        progress = Progress(roster=tuple(names(4)), present=tuple(names(4)))
        first = next_round(spec, progress, 0.0)
        assert first is not None
        progress = msgspec.structs.replace(progress, rounds=(first,))
        assert progress.unfinished() == list(first.pairings)
        assert next_round(spec, progress, 0.0) is None and not over(spec, progress, 0.0)


def test_settings_out_of_range_are_refused() -> None:
    with pytest.raises(ArenaError):
        Spec(format="swiss", rounds=0)
    with pytest.raises(ArenaError):
        Spec(format="arena", duration_s=0)
    with pytest.raises(ArenaError):
        Spec(format="round_robin", games_per_pairing=0)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"format":"knockout"}', type=Spec)


def test_an_event_survives_a_round_trip_through_json() -> None:
    spec = Spec(format="swiss", table=PAIRS, rounds=3, games_per_pairing=2, seed=4)
    progress = run(spec, names(5), seed=1)
    assert msgspec.json.decode(msgspec.json.encode(spec), type=Spec) == spec
    assert msgspec.json.decode(msgspec.json.encode(progress), type=Progress) == progress


# -- standings ------------------------------------------------------------------------------


def test_a_win_is_worth_a_point_and_a_loss_nothing() -> None:
    p = Pairing(round=1, board=0, seats=("a", "b"))
    rows = {s.entrant: s for s in standings([Result.of(p, TWO, 1, (60, 101))])}
    assert (rows["b"].points, rows["b"].wins, rows["b"].games) == (1.0, 1, 1)
    assert (rows["a"].points, rows["a"].wins, rows["a"].games) == (0.0, 0, 1)
    assert (rows["b"].score_for, rows["b"].score_against, rows["b"].score_difference) == (
        101,
        60,
        41,
    )


def test_in_a_free_for_all_the_rank_gives_the_points_and_equal_scores_share() -> None:
    four = Result.of(
        Pairing(round=1, board=0, seats=("a", "b", "c", "d")), FOUR, 2, (10, 30, 100, 5)
    )
    assert four.points() == pytest.approx((1 / 3, 2 / 3, 1.0, 0.0))
    three = Result.of(Pairing(round=1, board=0, seats=("a", "b", "c")), THREE, 0, (100, 20, 20))
    assert three.points() == (1.0, 0.25, 0.25)
    # the winner is the side the match says, even if another scored as much (C7)
    tie = Result.of(Pairing(round=1, board=0, seats=("a", "b", "c")), THREE, 1, (50, 50, 0))
    assert tie.points() == (0.5, 1.0, 0.0)


def test_partners_count_once_per_match_and_a_match_without_a_winner_not_at_all() -> None:
    pairs = Result.of(Pairing(round=1, board=0, seats=("s", "g", "s", "g")), PAIRS, 0, (101, 60))
    aborted = Result.of(Pairing(round=1, board=1, seats=("s", "g", "s", "g")), PAIRS, None, (0, 0))
    singles = Result(
        seats=("s", "g", "s", "g"), sides=(0, 1, 2, 3), winner=2, scores=(10, 20, 100, 30)
    )
    rows = {r.entrant: r for r in standings([pairs, aborted, singles])}
    assert (rows["s"].games, rows["s"].wins) == (3, 2)
    assert (rows["g"].games, rows["g"].wins) == (3, 0)
    assert rows["s"].score_for == 101 + 10 + 100
    assert rows["s"].score_against == 60 + 150 + 60


def test_standings_rank_by_points_then_score_difference_and_list_those_yet_to_play() -> None:
    a = Result.of(Pairing(round=1, board=0, seats=("a", "b")), TWO, 0, (100, 90))
    c = Result.of(Pairing(round=1, board=1, seats=("c", "d")), TWO, 0, (100, 10))
    rows = standings([a, c], entrants=["a", "b", "c", "d", "e"])
    assert [s.entrant for s in rows] == ["c", "a", "e", "b", "d"]
    assert rows[2].games == 0 and rows[2].interval == (0.0, 1.0)


def test_the_wilson_interval_of_a_win_rate() -> None:
    lo, hi = wilson(120, 200)
    assert (round(lo, 3), round(hi, 3)) == (0.531, 0.665)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)
    p = Pairing(round=1, board=0, seats=("a", "b"))
    results = [
        Result.of(p, TWO, 0, (100, 0)) if i < 120 else Result.of(p, TWO, 1, (0, 100))
        for i in range(200)
    ]
    row = standings(results)[0]
    assert row.entrant == "a" and row.rate == 0.6 and row.interval == wilson(120, 200)
    line = row.public()
    assert line["rate"] == 0.6 and line["interval"] == list(wilson(120, 200))
    assert line["score_difference"] == 120 * 100 - 80 * 100
