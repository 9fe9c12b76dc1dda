"""What accounts may ask of each other and of the house, limited and shared by every gateway:
challenges per challenger, per account challenged and per pair; seeks per account; matches
with house bots per account and per client address, freed when they end.

Two gateway processes with the same tight limits stand in front of one stack; a test's
requests alternate between them, so each count is one budget kept in Redis. Per-address caps
are tested from a loopback address of the test's own (tests/gateway/test_limits.py).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.gateway.conftest import Gateways, free_port
from tests.gateway.test_limits import client, fresh_address
from tests.gateway.test_openapi_accounts import Spec

pytestmark = [pytest.mark.service, pytest.mark.both_topologies]

LIMITS = {
    "DOMINO_GATEWAY_CHALLENGES_PER_MINUTE": "6",
    "DOMINO_GATEWAY_CHALLENGES_RECEIVED_PER_MINUTE": "8",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_ACCOUNT": "3",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_TO_ACCOUNT": "4",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_PAIR": "2",
    "DOMINO_GATEWAY_SEEKS_PER_ACCOUNT": "2",
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_ACCOUNT": "2",  # the default: a seek test depends on it
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_CLIENT": "3",
    "DOMINO_GATEWAY_LOBBY_PER_S": "100",
    "DOMINO_GATEWAY_LOBBY_BURST": "100",
    "DOMINO_GATEWAY_KEEPALIVE_S": "1",
}
API = "/api/v1"
STRAIGHT_2P = {"family": "straight", "players": 2}


@dataclass
class Pair:
    """Two gateways with the same limits in front of one stack; ``next`` alternates them."""

    g: Gateways
    a: str
    b: str

    def __post_init__(self) -> None:
        self._turns = itertools.cycle([self.a, self.b])
        self.spec = Spec(self.a)

    def next(self) -> str:
        """One gateway, then the other."""
        return next(self._turns)


@pytest.fixture(scope="module")
def pair(gateways: Gateways) -> Iterator[Pair]:
    with (
        gateways.spawned("gateway-lobby-limits-a", free_port(), LIMITS) as a,
        gateways.spawned("gateway-lobby-limits-b", free_port(), LIMITS) as b,
    ):
        yield Pair(gateways, a, b)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def account(url: str, stem: str) -> tuple[str, str]:
    """A new account: its name and token."""
    name = f"{stem}{uuid.uuid4().hex[:6]}"
    r = httpx.post(f"{url}{API}/accounts", json={"name": name})
    assert r.status_code == 201, r.text
    return name, r.json()["token"]


def challenge(p: Pair, token: str, opponent: str) -> httpx.Response:
    return httpx.post(
        f"{p.next()}{API}/challenges",
        json={"opponents": [opponent], "rules": STRAIGHT_2P},
        headers=auth(token),
    )


def made(r: httpx.Response) -> str:
    assert r.status_code == 201, r.text
    challenge_id: str = r.json()["challenge"]["id"]
    return challenge_id


PATHS = {"challenges": f"{API}/challenges", "seeks": f"{API}/seeks", "matches": f"{API}/matches"}


def refused(p: Pair, r: httpx.Response, limit: str) -> dict[str, Any]:
    """A 429 naming ``limit``, as the OpenAPI document lists it for the path, with a
    Retry-After that agrees with its body."""
    path = PATHS[r.request.url.path.rsplit("/", 1)[1]]
    body: dict[str, Any] = p.spec.check(path, "post", r, 429, "rate_limited")
    assert body["limit"] == limit, body
    assert int(r.headers["retry-after"]) >= 1
    assert int(r.headers["retry-after"]) >= body["retry_after"] > 0
    assert r.headers["ratelimit-remaining"] == "0"
    return body


def answer(p: Pair, token: str, challenge_id: str, what: str) -> None:
    r = httpx.post(f"{p.next()}{API}/challenges/{challenge_id}/{what}", headers=auth(token))
    assert r.status_code == 200, r.text


def test_open_challenges_are_limited_per_pair_and_per_challenger_and_freed_when_closed(
    pair: Pair,
) -> None:
    (_, me), (one, one_token), (two, _), (three, _) = (
        account(pair.a, s) for s in ("chal", "one", "two", "three")
    )
    first = made(challenge(pair, me, one))
    made(challenge(pair, me, one))
    refused(pair, challenge(pair, me, one), "open_challenges_per_pair")
    made(challenge(pair, me, two))
    refused(pair, challenge(pair, me, three), "open_challenges_per_account")
    answer(pair, one_token, first, "decline")  # a closed challenge frees its places
    last = made(challenge(pair, me, three))
    answer(pair, me, last, "cancel")
    made(challenge(pair, me, one))


def test_a_flood_from_many_accounts_is_capped_and_the_real_challenge_stays_listed(
    pair: Pair,
) -> None:
    target, target_token = account(pair.a, "target")
    _, friend = account(pair.a, "friend")
    real = made(challenge(pair, friend, target))
    pests = [account(pair.a, "pest")[1] for _ in range(3)]
    made(challenge(pair, pests[0], target))
    made(challenge(pair, pests[0], target))
    made(challenge(pair, pests[1], target))  # four open now: the most one account may have
    for pest in pests:
        refused(pair, challenge(pair, pest, target), "open_challenges_to_account")
    r = httpx.get(f"{pair.next()}{API}/challenges", headers=auth(target_token))
    listed = [c["id"] for c in r.json()["challenges"] if c["status"] == "open"]
    assert real in listed and len(listed) == 4


def until_refused(p: Pair, make: Any, close: Any) -> tuple[httpx.Response, int, float]:
    """Make challenges (``make(n)``), each closed at once (``close(n, id)``), until one is
    refused; the refusal, how many were made, and in how many seconds."""
    start = time.monotonic()
    n = 0
    while (r := make(n)).status_code == 201:
        close(n, r.json()["challenge"]["id"])
        n += 1
        assert n <= 30, "never refused"
    return r, n, time.monotonic() - start


def test_challenges_made_and_received_a_minute_are_limited_even_when_each_is_closed(
    pair: Pair,
) -> None:
    (_, maker), (busy, busy_token) = account(pair.a, "maker"), account(pair.a, "busy")
    others = [account(pair.a, "other")[0] for _ in range(6)]
    r, n, took = until_refused(
        pair,
        lambda n: challenge(pair, maker, others[n % 6]),
        lambda n, c: answer(pair, maker, c, "cancel"),
    )
    body = refused(pair, r, "challenges_per_minute")
    assert 0 < body["retry_after"] <= 10  # 6 a minute: one more every 10 s
    assert 6 <= n <= 6 + took / 10 + 1  # six at once, and what refilled meanwhile
    senders = [account(pair.a, "sender")[1] for _ in range(4)]
    r, n, took = until_refused(
        pair,
        lambda n: challenge(pair, senders[n % 4], busy),
        lambda n, c: answer(pair, busy_token, c, "decline"),
    )
    refused(pair, r, "challenges_received_per_minute")
    assert 8 <= n <= 8 + took / 7.5 + 1


def seek(p: Pair, token: str, kind: str) -> httpx.Response:
    return httpx.post(f"{p.next()}{API}/seeks", json={"kind": kind}, headers=auth(token))


def test_an_account_waits_for_at_most_two_kinds_of_game_at_once(pair: Pair) -> None:
    _, token = account(pair.a, "seeker")
    with client(fresh_address()) as http:  # at its most house matches: no seek is filled
        held = [house_match(pair, http, token) for _ in range(2)]
    first = seek(pair, token, "express-3p")
    assert first.status_code == 201, first.text
    assert seek(pair, token, "straight-3p").status_code == 201
    assert seek(pair, token, "express-3p").status_code == 200  # the same seek back
    refused(pair, seek(pair, token, "express-4p"), "seeks_per_account")
    seek_id = first.json()["seek"]["id"]
    r = httpx.delete(f"{pair.next()}{API}/seeks/{seek_id}", headers=auth(token))
    assert r.status_code == 200, r.text
    assert seek(pair, token, "express-4p").status_code == 201
    r = httpx.get(f"{pair.next()}{API}/seeks", headers=auth(token))
    assert sorted(s["kind"] for s in r.json()["seeks"]) == ["express-4p", "straight-3p"]
    assert all("client" not in s for s in r.json()["seeks"])  # the address is not shown
    for s in r.json()["seeks"]:
        httpx.delete(f"{pair.next()}{API}/seeks/{s['id']}", headers=auth(token))
    for r in held:
        cancel(pair, r, token)


def house_match(p: Pair, http: httpx.Client, token: str | None = None) -> httpx.Response:
    """A match with a house bot and an open seat: it waits, counted, until cancelled."""
    return http.post(
        f"{p.next()}{API}/matches",
        json={"seats": [None, "random"]},
        headers=auth(token) if token else {},
    )


def cancel(p: Pair, r: httpx.Response, token: str | None = None) -> None:
    data = r.json()
    match_id = data["match"]["match_id"]
    who = token or data["owner_token"]
    gone = httpx.delete(f"{p.next()}{API}/matches/{match_id}", headers=auth(who))
    assert gone.status_code == 200, gone.text


def until_created(p: Pair, make: Any, timeout: float = 30.0) -> httpx.Response:
    """``make()`` again until it is created: a freed place counts as free once the match has
    been over a few seconds."""
    deadline = time.monotonic() + timeout
    while True:
        r = make()
        if r.status_code == 201 or time.monotonic() > deadline:
            assert r.status_code == 201, r.text
            return r
        time.sleep(0.5)


def test_matches_with_house_bots_are_limited_per_client_address_until_they_are_over(
    pair: Pair,
) -> None:
    with client(fresh_address()) as http:
        waiting = [house_match(pair, http) for _ in range(3)]
        assert all(r.status_code == 201 for r in waiting), [r.text for r in waiting]
        refused(pair, house_match(pair, http), "house_matches_per_client")
        # a match of open seats only costs the house nothing: not counted
        r = http.post(f"{pair.next()}{API}/matches", json={"seats": [None, None]})
        assert r.status_code == 201, r.text
        cancel(pair, waiting[0])
        again = until_created(pair, lambda: house_match(pair, http))
        for r in [*waiting[1:], again]:
            cancel(pair, r)


def test_an_accounts_house_matches_are_counted_until_they_end_from_any_address(
    pair: Pair,
) -> None:
    _, token = account(pair.a, "visitor")
    with client(fresh_address()) as http, client(fresh_address()) as elsewhere:
        first, second = house_match(pair, http, token), house_match(pair, http, token)
        assert (first.status_code, second.status_code) == (201, 201), (first.text, second.text)
        refused(pair, house_match(pair, elsewhere, token), "house_matches_per_account")
        # one ends: the account takes the seat it left open and resigns
        match_id = first.json()["match"]["match_id"]
        r = httpx.post(f"{pair.next()}{API}/matches/{match_id}/join", headers=auth(token))
        assert r.status_code == 201, r.text
        seat = r.json()["seat"]
        r = httpx.post(
            f"{pair.next()}{API}/matches/{match_id}/seats/{seat}/moves",
            json={"type": "resign"},
            headers={**auth(token), "Idempotency-Key": "resign"},
        )
        assert r.status_code == 200, r.text
        third = until_created(pair, lambda: house_match(pair, elsewhere, token))
    for r in (second, third):
        cancel(pair, r, token)


def test_a_challenge_of_the_house_counts_as_a_house_match_of_the_account(pair: Pair) -> None:
    """The house accepts at once, so its challenges are not counted as open challenges but as
    house matches: two of them, and the third is refused until one is over."""
    _, token = account(pair.a, "challenger")
    with client(fresh_address()) as http, client(fresh_address()) as elsewhere:

        def house(http: httpx.Client) -> httpx.Response:
            return http.post(
                f"{pair.next()}{API}/challenges",
                json={"opponents": ["random"], "rules": STRAIGHT_2P},
                headers=auth(token),
            )

        started = [house(http), house(http)]
        for r in started:
            assert r.status_code == 201 and r.json()["challenge"]["status"] == "started", r.text
        refused(pair, house(elsewhere), "house_matches_per_account")
        for r in started:  # the account resigns its seat (0): the matches are over
            match_id = r.json()["challenge"]["match_id"]
            gone = http.post(
                f"{pair.next()}{API}/matches/{match_id}/seats/0/moves",
                json={"type": "resign"},
                headers={**auth(token), "Idempotency-Key": "resign"},
            )
            assert gone.status_code == 200, gone.text
        assert until_created(pair, lambda: house(elsewhere)).status_code == 201


def test_a_seek_waits_unfilled_while_its_account_has_its_most_house_matches(
    pair: Pair,
) -> None:
    """The stack's matchmaker fills a seek after 2 s (whichever gateway runs it, the limit of
    house matches per account is 2 on all of them); no other test seeks straight-4p."""
    _, token = account(pair.a, "patient")
    with client(fresh_address()) as http:
        held = [house_match(pair, http, token) for _ in range(2)]
        assert all(r.status_code == 201 for r in held), [r.text for r in held]
        r = http.post(
            f"{pair.next()}{API}/seeks", json={"kind": "straight-4p"}, headers=auth(token)
        )
        assert r.status_code == 201, r.text
    time.sleep(5)  # well past the fill time
    me = httpx.get(f"{pair.next()}{API}/account", headers=auth(token)).json()
    assert me["live"] == [] and [s["kind"] for s in me["seeks"]] == ["straight-4p"]
    cancel(pair, held[0], token)
    deadline = time.monotonic() + 30
    while not me["live"]:
        assert time.monotonic() < deadline, "the seek was never filled"
        time.sleep(0.5)
        me = httpx.get(f"{pair.next()}{API}/account", headers=auth(token)).json()
    assert me["seeks"] == []
    cancel(pair, held[1], token)
