"""What a token opens is remembered by each gateway process for DOMINO_GATEWAY_TOKEN_CACHE_S
only: a token revoked, rotated or expired stops working on the gateway that revoked it at once,
and on every other gateway within that time. Two real gateway processes on one Redis."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from services.lobby.tables import token_hash
from services.store.keys import Keys
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, join
from tests.gateway.test_accounts import auth, register, unique
from tests.support.topology import sync_client_for

pytestmark = pytest.mark.service

CACHE_S = 1.0
SLACK_S = 2.0


@pytest.fixture(scope="module")
def pair(gateways: Gateways) -> Iterator[tuple[str, str]]:
    """Two gateways that remember a token's look-up for one second."""
    env = {**PLAY_LIMITS, "DOMINO_GATEWAY_TOKEN_CACHE_S": str(CACHE_S)}
    with (
        gateways.spawned("gateway-cache-a", free_port(), env) as a,
        gateways.spawned("gateway-cache-b", free_port(), env) as b,
    ):
        yield a, b


def stops_within(seconds: float, status: Callable[[], int]) -> float:
    """How long until ``status()`` is 401; fails past ``seconds``."""
    started = time.monotonic()
    while (code := status()) != 401:
        assert code == 200, code
        assert time.monotonic() - started < seconds, f"still {code} after {seconds} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_revoked_account_token_stops_at_once_here_and_within_the_cache_time_elsewhere(
    pair: tuple[str, str],
) -> None:
    a, b = pair
    _, token = register(a, unique("cache"))
    for url in (a, b):  # both look it up, and remember it
        assert httpx.get(f"{url}/api/v1/account", headers=auth(token)).status_code == 200
    assert httpx.delete(f"{a}/api/v1/account/token", headers=auth(token)).status_code == 204
    assert httpx.get(f"{a}/api/v1/account", headers=auth(token)).status_code == 401
    stops_within(
        CACHE_S + SLACK_S,
        lambda: httpx.get(f"{b}/api/v1/account", headers=auth(token)).status_code,
    )


def test_a_rotated_account_token_stops_at_once_on_the_gateway_that_rotated_it(
    pair: tuple[str, str],
) -> None:
    a, b = pair
    _, token = register(a, unique("rot"))
    assert httpx.get(f"{a}/api/v1/account", headers=auth(token)).status_code == 200
    new = httpx.post(f"{a}/api/v1/account/token", headers=auth(token)).json()["token"]
    assert httpx.get(f"{a}/api/v1/account", headers=auth(token)).status_code == 401
    assert httpx.get(f"{b}/api/v1/account", headers=auth(new)).status_code == 200


def test_an_expired_seat_token_stops_working_within_the_cache_time(
    gateways: Gateways, pair: tuple[str, str]
) -> None:
    a, b = pair
    match_id = create(a, [None, None], rules={"players": 2})
    _, token = join(a, match_id)
    for url in (a, b):
        assert httpx.get(f"{url}/api/v1/seat", headers=auth(token)).status_code == 200
    # the token's key ends as its TTL does (DOMINO_GATEWAY_TOKEN_TTL_S, or the archiver)
    key = Keys(gateways.settings.prefix, gateways.settings.partitions).seat_token(token_hash(token))
    with sync_client_for(gateways.redis_url) as r:
        assert r.delete(key) == 1
    for url in (a, b):
        stops_within(
            CACHE_S + SLACK_S,
            lambda url=url: httpx.get(f"{url}/api/v1/seat", headers=auth(token)).status_code,
        )
