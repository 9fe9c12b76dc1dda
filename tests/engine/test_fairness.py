"""Fair deals anyone can check (F1, docs/fairness.md): the seeded shuffle, the engine's refusal
of a deal its seed does not give, the seed kept secret until the round ends (C8), and the
check of a log — whole, or as a spectator sees it — catching a deal that was tampered with."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest

from engine import fairness
from engine.fairness import Draws, commitment, seeded_deal
from engine.rules import Rules
from engine.state import MatchState
from engine.tiles import full_set, parse_tile
from engine.verify import verify
from engine.views import redact
from events.model import (
    Abort,
    AnyCommand,
    AnyEvent,
    CancelMatch,
    DealRound,
    Resign,
    RoundEnded,
    RoundStarted,
)
from services.core.dealer import deal
from tests.engine.helpers import Table
from tests.support.matches import random_match

pytestmark = pytest.mark.engine

# The known-answer vector of docs/fairness.md: seed 00 01 … 1f, salt 00 01 … 0f.
KAT_SEED = bytes(range(32))
KAT_SALT = bytes(range(16))
KAT_COMMITMENT = "95e66ce408bcb45134e08d159c51e1f4f3432cba4204228e3473e5648bb4408e"
KAT_ORDER = (
    "2-3 5-6 2-2 3-6 1-5 4-5 2-4 1-4 0-4 2-5 5-5 1-1 6-6 0-3 "
    "0-2 4-4 1-3 3-3 0-6 3-5 0-0 2-6 1-6 0-5 4-6 0-1 3-4 1-2"
)
KAT_FIRST_LEADER = 2  # of 4 players


def _tiles(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(parse_tile(w) for w in text.split())


def _seeds(count: int, start: int = 0) -> list[bytes]:
    return [hashlib.sha256(f"fixed seed {i}".encode()).digest() for i in range(start, count)]


# --- the shuffle ------------------------------------------------------------------------------


def test_the_known_answer_vector_of_the_docs_holds() -> None:
    """F1: docs/fairness.md's vector, for other implementations to check themselves against."""
    assert commitment(KAT_SEED, KAT_SALT) == KAT_COMMITMENT
    dealt = seeded_deal(KAT_SEED, 6, 4)
    assert dealt.order == _tiles(KAT_ORDER)
    assert dealt.first_leader == KAT_FIRST_LEADER


def test_the_byte_stream_is_sha256_of_the_seed_and_a_big_endian_counter() -> None:
    """F1 step 1: the blocks are SHA-256(seed ‖ counter), the counter 8 bytes big-endian."""
    stream = fairness.byte_stream(KAT_SEED)
    first = bytes(next(stream) for _ in range(64))
    expected = b"".join(hashlib.sha256(KAT_SEED + c.to_bytes(8, "big")).digest() for c in (0, 1))
    assert first == expected
    words = Draws(KAT_SEED)  # its words are the stream's bytes, four at a time, across blocks
    assert [words.word() for _ in range(16)] == [
        int.from_bytes(expected[i : i + 4], "big") for i in range(0, 64, 4)
    ]


def test_a_word_at_or_above_the_last_whole_multiple_is_rejected() -> None:
    """F1 step 2: rejection sampling keeps every integer equally likely."""

    class Scripted(Draws):
        def __init__(self, words: list[int]) -> None:
            self.words = iter(words)

        def word(self) -> int:
            return next(self.words)

    limit = 2**32 - 2**32 % 3  # 4294967295 is the one word rejected below 3
    assert Scripted([limit, limit - 1]).below(3) == (limit - 1) % 3
    assert Scripted([2**32 - 1, 7]).below(3) == 1
    with pytest.raises(ValueError):
        Scripted([]).below(0)


def test_the_canonical_set_the_shuffle_starts_from_is_sorted_and_fixed() -> None:
    """F1 step 3 starts from engine.tiles.full_set: sorted, the same on every call."""
    for top in (6, 9, 12):
        assert list(full_set(top)) == sorted(full_set(top))
        assert full_set(top) == tuple((a, b) for a in range(top + 1) for b in range(a, top + 1))


@pytest.mark.parametrize("top", [6, 9, 12])
def test_every_seed_shuffles_the_whole_set_and_always_the_same_way(top: int) -> None:
    """F1: a permutation of the set (C1), and a function of the seed alone."""
    for seed in _seeds(50):
        dealt = seeded_deal(seed, top, 3)
        assert sorted(dealt.order) == list(full_set(top))
        assert seeded_deal(seed, top, 3) == dealt
        assert 0 <= dealt.first_leader < 3
    assert seeded_deal(_seeds(1)[0], top, 3) != seeded_deal(_seeds(2, 1)[0], top, 3)


def test_each_tile_is_as_likely_as_any_to_come_first() -> None:
    """F1: chi-square of the first tile over 5,600 fixed seeds, 27 degrees of freedom, below
    its 0.1% critical value (55.5); the first leader's draw likewise (3 d.f., 16.3)."""
    seeds = _seeds(5600)
    deals = [seeded_deal(seed, 6, 4) for seed in seeds]
    firsts = Counter(d.order[0] for d in deals)
    expected = len(seeds) / 28
    chi2 = sum((firsts[t] - expected) ** 2 / expected for t in full_set(6))
    assert chi2 < 55.5, chi2
    leaders = Counter(d.first_leader for d in deals)
    expected = len(seeds) / 4
    assert sum((leaders[s] - expected) ** 2 / expected for s in range(4)) < 16.3


# --- the engine: F1 ---------------------------------------------------------------------------


def _seeded(rules: Rules, seed: bytes = KAT_SEED, salt: bytes = KAT_SALT) -> DealRound:
    dealt = seeded_deal(seed, rules.top, rules.players)
    return DealRound(
        order=dealt.order, first_leader=dealt.first_leader, seed=seed.hex(), salt=salt.hex()
    )


def test_a_seeded_deal_records_its_commitment_and_keeps_its_seed_for_the_log() -> None:
    """F1: RoundStarted holds the public commitment, and the seed and salt in secret."""
    table = Table("express", players=4)
    (started,) = table.send(_seeded(table.rules))
    assert isinstance(started, RoundStarted)
    assert started.commitment == KAT_COMMITMENT
    assert (started.seed, started.salt) == (KAT_SEED.hex(), KAT_SALT.hex())


def test_a_deal_whose_order_its_seed_does_not_give_is_rejected() -> None:
    """F1: two tiles swapped in the order of a seeded deal: bad_deal."""
    table = Table("express", players=4)
    honest = _seeded(table.rules)
    order = list(honest.order)
    order[0], order[27] = order[27], order[0]
    rejection = table.reject(msgspec.structs.replace(honest, order=tuple(order)))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "F1")


def test_a_straight_first_leader_its_seed_does_not_draw_is_rejected() -> None:
    """F1 with S1: the first leader of a Straight match is the seed's draw."""
    table = Table("straight", players=2)
    honest = _seeded(table.rules)
    other = 1 - (honest.first_leader or 0)
    rejection = table.reject(msgspec.structs.replace(honest, first_leader=other))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "F1")
    (started,) = table.send(honest)
    assert isinstance(started, RoundStarted) and started.leader == honest.first_leader


@pytest.mark.parametrize(
    "change",
    [
        {"salt": None},
        {"seed": None},
        {"seed": "zz" * 32},
        {"seed": KAT_SEED.hex().upper()},
        {"salt": "00" * 8},
    ],
)
def test_a_seed_without_its_salt_or_not_of_its_size_is_rejected(change: dict[str, object]) -> None:
    """F1: a seed of 32 bytes and a salt of 16, both lowercase hex, or neither."""
    table = Table("express", players=2)
    rejection = table.reject(msgspec.structs.replace(_seeded(table.rules), **change))
    assert (rejection.reason, rejection.rule) == ("bad_deal", "F1")


def test_a_deal_without_a_seed_is_still_accepted_and_has_no_commitment() -> None:
    """Older logs and scripted tests deal without a seed: nothing to check, nothing revealed."""
    table = Table("express", players=2)
    started = table.deal_canonical()
    assert (started.commitment, started.seed, started.salt) == (None, None, None)
    table.send(Resign(seat=0))
    ended = next(e for e in table.log if isinstance(e, RoundEnded))
    assert (ended.seed, ended.salt) == (None, None)


@pytest.mark.parametrize(
    "stop",
    [
        lambda s: Resign(seat=s.turn),
        lambda s: Abort(seat=s.turn),
        lambda s: CancelMatch(),
    ],
    ids=["resign", "abort", "cancel"],
)
def test_a_round_cut_short_still_reveals_its_seed(
    stop: Callable[[MatchState], AnyCommand],
) -> None:
    """F1: a round ended by a resignation, an abort or a cancel reveals its seed and salt."""
    table = Table("straight", players=3)
    table.send(_seeded(table.rules))
    table.send(stop(table.state))
    ended = next(e for e in table.log if isinstance(e, RoundEnded))
    assert (ended.seed, ended.salt) == (KAT_SEED.hex(), KAT_SALT.hex())
    assert fairness.check(table.log) is None
    assert verify(table.log) is None


def test_redact_hides_the_seed_from_everyone_until_the_round_ends() -> None:
    """C8 and F1: every seat and a spectator see the commitment, never the seed or salt of a
    round being played; the round's end shows them to all."""
    table = Table("express", players=4)
    (started,) = table.send(_seeded(table.rules))
    assert isinstance(started, RoundStarted)
    for seat in (None, 0, 1, 2, 3):
        seen = redact(started, seat)
        assert isinstance(seen, RoundStarted)
        assert seen.commitment == KAT_COMMITMENT
        assert (seen.seed, seen.salt) == (None, None)
    ending = table.send(Resign(seat=table.state.turn))
    ended = next(e for e in ending if isinstance(e, RoundEnded))
    for seat in (None, 0, 1, 2, 3):
        shown = redact(ended, seat)
        assert isinstance(shown, RoundEnded)
        assert (shown.seed, shown.salt) == (KAT_SEED.hex(), KAT_SALT.hex())


# --- the check of a log -----------------------------------------------------------------------


STRAIGHT = Rules.make("straight", players=3, target=150)
EXPRESS = Rules.make("express", players=4, target=60)


def public(log: list[AnyEvent]) -> list[AnyEvent]:
    """The log as a spectator receives it (C8)."""
    return [redact(e, None) for e in log]


@pytest.mark.parametrize("rules", [STRAIGHT, EXPRESS, Rules.make("straight", players=2, top=9)])
def test_every_round_of_an_honest_match_checks_out_whole_and_as_a_spectator_sees_it(
    rules: Rules,
) -> None:
    """F1: each round's revealed seed hashes to its commitment and deals what was played."""
    for seed in range(3):
        log = random_match(rules, seed)
        assert fairness.check(log) is None
        assert fairness.check(public(log)) is None
        assert fairness.check(log, public=True) is None
        checked = fairness.rounds(log)
        assert checked and all(r.revealed and r.problem is None for r in checked)
        assert verify(log) is None


def test_the_round_being_played_is_not_checked_until_it_is_revealed() -> None:
    """F1: a live round's seed is still secret: reported unrevealed, not as a problem."""
    table = Table("express", players=2)
    table.send(deal(table.rules, random.Random(1)))
    (only,) = fairness.rounds(public(table.log))
    assert (only.round, only.revealed, only.problem) == (1, False, None)
    assert only.commitment is not None


def _first(log: list[AnyEvent], kind: type[AnyEvent], round_: int) -> int:
    return next(
        i for i, e in enumerate(log) if isinstance(e, kind) and getattr(e, "round", 0) == round_
    )


def _tamper(log: list[AnyEvent], at: int, **changes: object) -> list[AnyEvent]:
    out = list(log)
    out[at] = msgspec.structs.replace(out[at], **changes)
    return out


def test_two_tiles_swapped_between_hands_are_caught_naming_the_round() -> None:
    """F1: the recorded hands are not the seed's."""
    log = random_match(STRAIGHT, 1)
    at = _first(log, RoundStarted, 2)
    started = log[at]
    assert isinstance(started, RoundStarted) and started.hands[0] and started.hands[1]
    a, b = list(started.hands[0]), list(started.hands[1])
    a[0], b[0] = b[0], a[0]
    hands = (tuple(sorted(a)), tuple(sorted(b)), *started.hands[2:])
    problem = fairness.check(_tamper(log, at, hands=hands))
    assert problem is not None and problem.round == 2
    assert "seat 0 was dealt" in problem.message


def test_a_stock_reordered_is_caught_naming_the_round() -> None:
    """F1: the stock's order is the seed's, front first."""
    log = random_match(STRAIGHT, 2)
    at = _first(log, RoundStarted, 1)
    started = log[at]
    assert isinstance(started, RoundStarted) and started.stock
    stock = (started.stock[-1], *started.stock[1:-1], started.stock[0])
    problem = fairness.check(_tamper(log, at, stock=stock))
    assert problem is not None and problem.round == 1
    assert "stock" in problem.message
    assert verify(_tamper(log, at, stock=stock)) is not None  # the rules check refuses it too


def test_a_changed_salt_in_the_reveal_is_caught_whole_and_in_public() -> None:
    """F1: the revealed seed and salt must hash to the commitment made at the deal."""
    log = random_match(EXPRESS, 0)
    at = _first(log, RoundEnded, 1)
    ended = log[at]
    assert isinstance(ended, RoundEnded) and ended.salt
    salt = ("1" if ended.salt[0] != "1" else "2") + ended.salt[1:]
    tampered = _tamper(log, at, salt=salt)
    for checked in (tampered, public(tampered)):
        problem = fairness.check(checked)
        assert problem is not None and problem.round == 1
        assert "commitment" in problem.message


def test_a_deal_not_from_the_committed_seed_is_caught_by_a_spectator() -> None:
    """F1, public check: a referee that commits to a seed, then deals other hands, shows at
    the round's end hands and plays the seed's deal cannot account for."""
    log = random_match(STRAIGHT, 3)
    at_start, at_end = _first(log, RoundStarted, 1), _first(log, RoundEnded, 1)
    seed, salt = bytes(32), bytes(16)  # a seed whose commitment is honest, but not this deal's
    forged = _tamper(log, at_start, commitment=commitment(seed, salt))
    forged = _tamper(forged, at_end, seed=seed.hex(), salt=salt.hex())
    problem = fairness.check(public(forged))
    assert problem is not None and problem.round == 1
    assert fairness.check(forged) is not None


def test_a_round_dealt_without_a_commitment_is_a_problem_for_the_check() -> None:
    """F1: a deal with nothing to check it against cannot be shown fair."""
    table = Table("express", players=2)
    table.deal_canonical()
    table.send(Resign(seat=0))
    problem = fairness.check(table.log)
    assert problem is not None and problem.round == 1
    assert "without a commitment" in problem.message
