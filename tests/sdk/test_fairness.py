"""The SDK checks fair deals on its own (F1, docs/fairness.md): its shuffle, written apart from
the server's, deals exactly what engine.fairness deals from every seed, and its public check
over a spectator's stream — as parsed JSON or as the SDK's structs — agrees with the server's,
catching what the server's check catches."""

from __future__ import annotations

import hashlib
import json

import domino_sdk
import msgspec
import pytest
from domino_sdk.fairness import check_public, commitment, seeded_deal

from engine import fairness
from engine.rules import Rules
from engine.views import redact
from events.codec import JSON
from events.model import AnyEvent, RoundEnded, RoundStarted
from tests.support.matches import random_match

pytestmark = pytest.mark.service

KAT_SEED = bytes(range(32))
KAT_SALT = bytes(range(16))


def test_the_sdk_passes_the_known_answer_vector_of_the_docs() -> None:
    """F1: docs/fairness.md's vector."""
    assert commitment(KAT_SEED, KAT_SALT) == (
        "95e66ce408bcb45134e08d159c51e1f4f3432cba4204228e3473e5648bb4408e"
    )
    dealt = seeded_deal(KAT_SEED, 6, 4)
    assert " ".join(f"{a}-{b}" for a, b in dealt.order) == (
        "2-3 5-6 2-2 3-6 1-5 4-5 2-4 1-4 0-4 2-5 5-5 1-1 6-6 0-3 "
        "0-2 4-4 1-3 3-3 0-6 3-5 0-0 2-6 1-6 0-5 4-6 0-1 3-4 1-2"
    )
    assert dealt.first_leader == 2


@pytest.mark.parametrize("top", [6, 9, 12])
def test_the_sdk_and_the_server_deal_the_same_from_every_seed(top: int) -> None:
    """F1: two implementations, one algorithm: 1,000 seeds per set, 2 to 4 players."""
    for i in range(1000):
        seed = hashlib.sha256(f"agree {top} {i}".encode()).digest()
        salt = seed[:16]
        players = 2 + i % 3
        mine, theirs = seeded_deal(seed, top, players), fairness.seeded_deal(seed, top, players)
        assert tuple(mine.order) == theirs.order
        assert mine.first_leader == theirs.first_leader
        assert commitment(seed, salt) == fairness.commitment(seed, salt)


def _stream(log: list[AnyEvent], seat: int | None = None) -> list[bytes]:
    """The event lines a stream sends ``seat`` (None: a spectator), as JSON (C8)."""
    return [
        b'{"type":"event","id":%d,"event":%s}' % (i, JSON.encode(redact(e, seat)))
        for i, e in enumerate(log, 1)
    ]


RULE_SETS = [
    Rules.make("straight", players=2, target=150),
    Rules.make("straight", players=3, top=9, target=150, reveal_stock=True),
    Rules.make("express", players=4, target=60),
    Rules.make("express", players=3, target=60),
]


@pytest.mark.parametrize("rules", RULE_SETS)
def test_a_spectators_stream_of_an_honest_match_checks_out_as_dicts_and_as_sdk_types(
    rules: Rules,
) -> None:
    """F1: every revealed round checks out; a seat's own stream does too."""
    for seed in range(3):
        log = random_match(rules, seed)
        lines = _stream(log)
        assert check_public([json.loads(line) for line in lines]) is None
        assert check_public([domino_sdk.decode_line(line) for line in lines]) is None
        events = [json.loads(line)["event"] for line in _stream(log, seat=1)]
        assert check_public(events) is None
        assert fairness.check([redact(e, None) for e in log]) is None


def _tampered(log: list[AnyEvent], kind: str, round_: int) -> list[AnyEvent]:
    out = list(log)
    end = next(i for i, e in enumerate(out) if isinstance(e, RoundEnded) and e.round == round_)
    start = next(i for i, e in enumerate(out) if isinstance(e, RoundStarted) and e.round == round_)
    ended = out[end]
    assert isinstance(ended, RoundEnded) and ended.salt is not None
    if kind == "salt":
        salt = ("1" if ended.salt[0] != "1" else "2") + ended.salt[1:]
        out[end] = msgspec.structs.replace(ended, salt=salt)
    else:  # another seed, honestly committed to, that did not deal this round
        seed, salt = bytes(32), bytes(16)
        out[start] = msgspec.structs.replace(out[start], commitment=commitment(seed, salt))
        out[end] = msgspec.structs.replace(ended, seed=seed.hex(), salt=salt.hex())
    return out


@pytest.mark.parametrize("kind", ["salt", "seed"])
def test_the_sdk_names_the_round_the_server_names_in_a_tampered_stream(kind: str) -> None:
    """F1: a changed salt, or a seed that did not deal the round, fails both checks there."""
    log = random_match(RULE_SETS[0], 5)
    tampered = _tampered(log, kind, 2)
    server = fairness.check([redact(e, None) for e in tampered])
    sdk = check_public([json.loads(line) for line in _stream(tampered)])
    assert server is not None and sdk is not None
    assert sdk.round == server.round == 2
