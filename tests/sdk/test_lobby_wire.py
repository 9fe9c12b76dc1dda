"""The SDK reads the lobby's JSON as the server writes it: accounts, seeks and challenges
round-trip through the SDK's structs field for field, and an account event or play line of a
type the SDK does not know is read as unknown (or skipped), not refused."""

from __future__ import annotations

import json

import msgspec
import pytest
from domino_sdk import (
    Account,
    AccountState,
    Challenge,
    MatchFinished,
    Seek,
    UnknownAccountEvent,
    decode_account_event,
    decode_play_line,
)

from engine.rules import Rules
from services.lobby import accounts, challenges, seeks

pytestmark = pytest.mark.service

RULES = Rules.make("straight", players=3, target=150)
ACCOUNT = accounts.Account(id="u-0123456789ab", name="Ada", created=1.5)
SEEK = seeks.Seek(
    id="s-1", kind="express-4p", account=ACCOUNT.id, name="Ada", rating=3.25, since=2.0, expires=9.0
)
CHALLENGE = challenges.Challenge(
    id="c-0123456789ab",
    challenger=ACCOUNT.id,
    opponents=("u-111111111111", "u-222222222222"),
    names=("Ada", "Bob", "Cy"),
    rules=RULES,
    deadline_ms=5000,
    status="open",
    accepted=("u-222222222222",),
    match_id=None,
    created=1.0,
    expires=601.0,
)


@pytest.mark.parametrize(
    ("server", "sdk_type"),
    [(ACCOUNT, Account), (SEEK, Seek), (CHALLENGE, Challenge)],
    ids=["account", "seek", "challenge"],
)
def test_the_lobby_records_round_trip_through_the_sdk_field_for_field(
    server: accounts.Account | seeks.Seek | challenges.Challenge, sdk_type: type
) -> None:
    public = json.dumps(server.public())
    read = msgspec.json.decode(public, type=sdk_type)
    assert json.loads(msgspec.json.encode(read)) == json.loads(public)


def test_a_challenge_names_its_challenger_and_who_has_accepted() -> None:
    read = msgspec.convert(CHALLENGE.public(), Challenge)
    assert (read.challenger.name, read.rules.players) == ("Ada", 3)
    assert [(c.name, c.accepted) for c in read.to] == [("Bob", False), ("Cy", True)]


def test_the_state_line_and_a_finished_match_decode_as_the_stream_sends_them() -> None:
    state = {
        "type": "state",
        "id": 7,
        "live": ["m-1"],
        "challenges": [CHALLENGE.public()],
        "seeks": [SEEK.public()],
    }
    read = decode_account_event(json.dumps(state).encode())
    assert isinstance(read, AccountState) and read.id == 7 and read.live == ("m-1",)
    assert read.challenges[0].id == CHALLENGE.id and read.seeks[0].kind == "express-4p"
    finished = {
        "id": 8,
        "type": "match_finished",
        "ts": 3.0,
        "match_id": "m-1",
        "seats": [0, 2],
        "side": 0,
        "result": "win",
        "winner": 0,
        "scores": [100, 40],
        "reason": "target",
        "players": ["Ada", "greedy", "Ada", "greedy"],
    }
    done = decode_account_event(json.dumps(finished).encode())
    assert isinstance(done, MatchFinished) and done.seats == (0, 2) and done.winner == 0


def test_an_account_event_of_a_newer_type_is_read_as_unknown_and_a_broken_one_refused() -> None:
    newer = decode_account_event(b'{"id": 9, "type": "trophy", "ts": 1.0, "cup": "gold"}')
    assert newer == UnknownAccountEvent(id=9, ts=1.0, name="trophy", fields={"cup": "gold"})
    with pytest.raises(msgspec.ValidationError):
        decode_account_event(b'{"id": 10, "type": "match_finished", "match_id": 3}')


def test_a_play_line_wraps_a_seat_line_and_one_of_a_newer_type_is_skipped() -> None:
    assert decode_play_line(b'{"match_id": "m-1", "seat": 1, "line": {"type": "gossip"}}') is None
    turn = {"type": "turn", "id": 4, "view": None}
    with pytest.raises(msgspec.ValidationError):  # a turn always has a view
        decode_play_line(json.dumps({"match_id": "m-1", "seat": 1, "line": turn}).encode())
