"""What accounts may ask of each other, limited and shared by every gateway: challenges per
challenger, per account challenged and per pair.

Two gateway processes with the same tight limits stand in front of one stack; a test's
requests alternate between them, so each count is one budget kept in Redis.
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
from tests.gateway.test_openapi_accounts import Spec

pytestmark = pytest.mark.service

LIMITS = {
    "DOMINO_GATEWAY_CHALLENGES_PER_MINUTE": "6",
    "DOMINO_GATEWAY_CHALLENGES_RECEIVED_PER_MINUTE": "8",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_ACCOUNT": "3",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_TO_ACCOUNT": "4",
    "DOMINO_GATEWAY_OPEN_CHALLENGES_PER_PAIR": "2",
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


PATHS = {"challenges": f"{API}/challenges"}


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
