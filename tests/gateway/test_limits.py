"""Limits sized for play and shared by every gateway: a whole match is never throttled, two
gateway processes on one Redis enforce one budget, and every 429 says when to come back.

The limits here are per client address, so each test talks from an address of its own: the
whole 127.0.0.0/8 block is loopback, and a client bound to 127.x.y.z reaches the gateways on
127.0.0.1 as that address.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest

from engine.game import legal_moves
from engine.strategy import GreedyStrategy
from services.cli.bot_commands import StrategyBot
from services.gateway.config import GatewaySettings
from tests.gateway.conftest import OPERATOR, Gateways, free_port, wait_for_version
from tests.service.conftest import fold

pytestmark = [pytest.mark.service, pytest.mark.both_topologies]

LIMITS = {  # next to nothing refills while a test runs: each count is exact
    "DOMINO_GATEWAY_MOVES_PER_S": "0.001",
    "DOMINO_GATEWAY_MOVE_BURST": "12",
    "DOMINO_GATEWAY_REJECTED_MOVES_PER_S": "0.001",
    "DOMINO_GATEWAY_REJECTED_MOVE_BURST": "3",
    "DOMINO_GATEWAY_AUTH_FAILURES_PER_S": "0.001",
    "DOMINO_GATEWAY_AUTH_FAILURE_BURST": "5",
    "DOMINO_GATEWAY_OPERATOR_FAILURES_PER_S": "0.001",
    "DOMINO_GATEWAY_OPERATOR_FAILURE_BURST": "4",
    "DOMINO_GATEWAY_OPEN_MATCHES_PER_CLIENT": "3",
    "DOMINO_GATEWAY_WAITING_SEATS_PER_CLIENT": "4",
    "DOMINO_GATEWAY_LOBBY_PER_S": "100",
    "DOMINO_GATEWAY_LOBBY_BURST": "100",
    "DOMINO_GATEWAY_STREAMS_PER_TOKEN": "2",
    "DOMINO_GATEWAY_STREAMS_PER_CLIENT": "3",
    "DOMINO_GATEWAY_PLAYER_STREAMS_PER_CLIENT": "3",
    "DOMINO_GATEWAY_STREAM_LEASE_S": "2",
    "DOMINO_GATEWAY_KEEPALIVE_S": "1",
    "DOMINO_OPERATOR_TOKEN": OPERATOR,
}
API = "/api/v1"


@dataclass
class Pair:
    """Two gateway processes with the same tight limits, in front of one stack and Redis."""

    g: Gateways
    a: str
    b: str


@pytest.fixture(scope="module")
def pair(gateways: Gateways) -> Iterator[Pair]:
    """Gateways A and B (stopped after the module)."""
    with (
        gateways.spawned("gateway-limits-a", free_port(), LIMITS) as a,
        gateways.spawned("gateway-limits-b", free_port(), LIMITS) as b,
    ):
        yield Pair(gateways, a, b)


def fresh_address() -> str:
    """A loopback address no other test uses (never 127.0.0.1)."""
    r = random.Random()
    return f"127.{r.randint(1, 254)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def client(address: str, **kwargs: Any) -> httpx.Client:
    """A client whose requests come from ``address``."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(transport=transport, timeout=10, **kwargs)


def async_client(address: str) -> httpx.AsyncClient:
    """An asyncio client whose requests come from ``address``."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(transport=transport, timeout=10)


def limited(r: httpx.Response, limit: str, most: int) -> dict[str, Any]:
    """Check a 429 names ``limit`` (at most ``most`` at once) and that its headers agree with
    its body; return the body."""
    assert r.status_code == 429, r.text
    body: dict[str, Any] = r.json()
    assert body["error"] == "rate_limited" and body["limit"] == limit, body
    assert body["retry_after"] > 0
    retry = int(r.headers["retry-after"])
    assert retry == math.ceil(body["retry_after"])  # whole seconds, rounded up
    assert int(r.headers["ratelimit-limit"]) == most
    assert int(r.headers["ratelimit-remaining"]) == 0
    assert int(r.headers["ratelimit-reset"]) >= retry
    return body


def create(http: httpx.Client, url: str, seats: list[str | None], **body: Any) -> httpx.Response:
    return http.post(f"{url}{API}/matches", json={"seats": seats, "rules": {"players": 2}, **body})


def join(http: httpx.Client, url: str, match_id: str) -> httpx.Response:
    return http.post(f"{url}{API}/matches/{match_id}/join", json={})


def started_table(p: Pair, http: httpx.Client) -> tuple[str, dict[int, str]]:
    """A two-seat match whose seats the test holds, dealt and waiting for its first move; its
    turns are long (120 s), so that no turn times out under a test on a loaded machine."""
    r = create(http, p.a, [None, None], deadline_ms=120_000)
    assert r.status_code == 201, r.text
    match_id = r.json()["match"]["match_id"]
    tokens: dict[int, str] = {}
    for url in (p.a, p.b):
        joined = join(http, url, match_id)
        assert joined.status_code == 201, joined.text
        tokens[joined.json()["seat"]] = joined.json()["token"]
    wait_for_version(p.g, match_id, 2)
    return match_id, tokens


def first_legal(g: Gateways, match_id: str) -> tuple[int, dict[str, Any]]:
    """The seat to move and the first of its legal moves, as a request body."""
    state = fold(g.log(match_id))
    return state.turn, msgspec.to_builtins(legal_moves(state)[0])


def move(
    http: httpx.Client, url: str, match_id: str, seat: int, token: str, body: Any, key: str
) -> httpx.Response:
    return http.post(
        f"{url}{API}/matches/{match_id}/seats/{seat}/moves",
        json=body,
        headers={"authorization": f"Bearer {token}", "idempotency-key": key},
    )


@pytest.mark.parametrize("family", ["express", "straight"])
def test_a_whole_match_against_house_bots_is_never_throttled(
    gateways: Gateways, family: str
) -> None:
    """The default move budget is far above what play needs: an SDK bot against a house bot,
    as fast as loopback allows, gets no 429 and stays under half the budget in every second."""
    url = gateways.url
    r = httpx.post(
        f"{url}{API}/matches", json={"seats": ["random", None], "rules": {"family": family}}
    )
    assert r.status_code == 201, r.text
    match_id = r.json()["match"]["match_id"]
    token = httpx.post(f"{url}{API}/matches/{match_id}/join", json={}).json()["token"]
    posted: list[float] = []
    statuses: list[int] = []

    async def hook(response: httpx.Response) -> None:
        if response.request.method == "POST":
            posted.append(time.monotonic())
            statuses.append(response.status_code)

    async def play() -> Any:
        async with httpx.AsyncClient(event_hooks={"response": [hook]}, timeout=10) as http:
            bot = StrategyBot(GreedyStrategy(3))
            return await bot.play(url, token, client=http, transport="http")  # its posts

    result = asyncio.run(asyncio.wait_for(play(), 60))
    assert result is not None and result.reason != "forfeit"
    assert posted and set(statuses) == {200}, statuses
    peak = max(sum(1 for u in posted if t <= u < t + 1.0) for t in posted)
    assert peak < GatewaySettings().moves_per_s / 2


def test_a_burst_spread_over_two_gateways_is_cut_at_the_one_budget(pair: Pair) -> None:
    """Twelve requests at once for a token, then 429 — however they are shared between the
    two gateway processes, and sent all at once."""
    address = fresh_address()
    with client(address) as http:
        match_id, tokens = started_table(pair, http)
    path = f"{API}/matches/{match_id}/seats/0/moves"
    auth = {"authorization": f"Bearer {tokens[0]}"}

    async def burst() -> list[httpx.Response]:
        async with async_client(address) as http:
            return await asyncio.gather(
                *(
                    http.post(
                        f"{(pair.a, pair.b)[i % 2]}{path}",
                        content=b"{",  # counted, then refused as bad JSON: the log stays
                        headers={**auth, "idempotency-key": f"k{i}"},
                    )
                    for i in range(30)
                )
            )

    answers = asyncio.run(burst())
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [400] * 12 + [429] * 18
    for r in answers:
        if r.status_code == 429:
            body = limited(r, "moves_per_second", 12)
            assert body["retry_after"] > 100  # a thousandth of a move a second
    assert len(pair.g.log(match_id)) == 2


def test_a_move_answer_carries_the_ratelimit_headers(pair: Pair) -> None:
    """Accepted or rejected, a move's answer tells how many are left."""
    with client(fresh_address()) as http:
        match_id, tokens = started_table(pair, http)
        seat, body = first_legal(pair.g, match_id)
        r = move(http, pair.b, match_id, seat, tokens[seat], body, "first")
        assert r.status_code == 200, r.text
        assert int(r.headers["ratelimit-limit"]) == 12
        assert int(r.headers["ratelimit-remaining"]) == 11
        assert int(r.headers["ratelimit-reset"]) >= 1
        # the same seat again, now out of turn (C4)
        r = move(http, pair.a, match_id, seat, tokens[seat], {"type": "pass_turn"}, "again")
        assert r.status_code == 409 and r.json()["reason"] == "not_your_turn", r.text
        assert int(r.headers["ratelimit-limit"]) == 12
        assert int(r.headers["ratelimit-remaining"]) == 10


def test_rejected_moves_have_a_strict_budget_of_their_own(pair: Pair) -> None:
    """Moves the referee rejects cost a decision each: after three, the token's moves are
    refused (429) before they reach the referee, even legal ones; the other seat plays on."""
    with client(fresh_address()) as http:
        match_id, tokens = started_table(pair, http)
        turn, body = first_legal(pair.g, match_id)
        waiting = 1 - turn
        for i in range(3):  # out of turn (C4)
            url = (pair.a, pair.b)[i % 2]
            r = move(http, url, match_id, waiting, tokens[waiting], {"type": "pass_turn"}, f"r{i}")
            assert r.status_code == 409 and r.json()["reason"] == "not_your_turn", r.text
        r = move(http, pair.a, match_id, waiting, tokens[waiting], {"type": "pass_turn"}, "r3")
        limited(r, "rejected_moves", 3)
        before = pair.g.log(match_id)
        # the seat to move plays as usual, until the throttled seat has a move of its own to
        # make (a seat that can only pass is passed for by the referee, and the turn comes back)
        seat = turn
        for i in range(8):
            r = move(http, pair.b, match_id, seat, tokens[seat], body, f"ok{i}")
            assert r.status_code == 200, r.text
            played = pair.g.log(match_id)  # the move, and any passes or draws it led to
            assert len(played) > len(before)
            seat, body = first_legal(pair.g, match_id)
            if seat == waiting:
                break
        assert seat == waiting, "the throttled seat never had a move to make"
        # now it is the throttled seat's turn: its legal move waits all the same
        limited(
            move(http, pair.b, match_id, seat, tokens[seat], body, "legal"), "rejected_moves", 3
        )
        assert pair.g.log(match_id) == played


def test_a_burst_of_bad_tokens_from_one_address_gets_429(pair: Pair) -> None:
    """Five unknown tokens from an address (across both gateways), then 429 — even for a good
    token the gateway has not seen; another address is still answered 401."""
    with client(fresh_address()) as owner:
        match_id, tokens = started_table(pair, owner)
    seat_url = f"{API}/matches/{match_id}/seats/0/stream"
    with client(fresh_address()) as guesser:
        for i in range(5):
            url = (pair.a, pair.b)[i % 2]
            r = guesser.get(f"{url}{API}/seat", headers={"authorization": f"Bearer guess-{i}"})
            assert r.status_code == 401, r.text
        r = guesser.get(f"{pair.b}{API}/seat", headers={"authorization": "Bearer guess-5"})
        limited(r, "auth_failures", 5)
        # a real token, not yet remembered by gateway B, waits too: guessing is what is slowed
        r = guesser.get(f"{pair.b}{seat_url}", headers={"authorization": f"Bearer {tokens[0]}"})
        limited(r, "auth_failures", 5)
    with client(fresh_address()) as other:
        r = other.get(f"{pair.a}{API}/seat", headers={"authorization": "Bearer guess-6"})
        assert r.status_code == 401


def test_an_address_may_have_three_open_matches_and_a_started_one_frees_its_place(
    pair: Pair,
) -> None:
    """The open-match cap is counted in Redis across both gateways and released when a match
    starts."""
    with client(fresh_address()) as maker, client(fresh_address()) as player:
        made = []
        for i in range(3):
            r = create(maker, (pair.a, pair.b)[i % 2], [None, None])
            assert r.status_code == 201, r.text
            made.append(r.json()["match"]["match_id"])
        limited(create(maker, pair.b, [None, None]), "open_matches_per_client", 3)
        limited(create(maker, pair.a, ["random", None]), "open_matches_per_client", 3)
        # a match with no open seat starts at once: it is never open
        assert create(maker, pair.a, ["random", "greedy"]).status_code == 201
        for url in (pair.a, pair.b):  # another address fills one: it starts
            assert join(player, url, made[0]).status_code == 201
        assert create(maker, pair.b, [None, None]).status_code == 201


def test_an_address_may_hold_four_seats_in_matches_not_started(pair: Pair) -> None:
    """Seats taken in matches still waiting for players count against the address that took
    them until those matches start."""
    matches = []
    for _ in range(5):
        with client(fresh_address()) as maker:
            r = create(maker, pair.a, [None, None])
            assert r.status_code == 201, r.text
            matches.append(r.json()["match"]["match_id"])
    with client(fresh_address()) as joiner:
        for i, match_id in enumerate(matches[:4]):
            assert join(joiner, (pair.a, pair.b)[i % 2], match_id).status_code == 201
        limited(join(joiner, pair.b, matches[4]), "waiting_seats_per_client", 4)
        with client(fresh_address()) as other:
            assert join(other, pair.a, matches[0]).status_code == 201  # it starts
        r = join(joiner, pair.b, matches[4])
        assert r.status_code == 201, r.text
        # a refused join holds nothing: the seat it asked for is still open
        info = joiner.get(f"{pair.a}{API}/matches/{matches[4]}").json()
        assert [s["kind"] for s in info["seats"]].count("open") == 1


def test_stream_places_are_shared_and_a_closed_one_frees_its_place_on_the_other_gateway(
    pair: Pair,
) -> None:
    """Two streams per seat token, wherever they are open."""
    with client(fresh_address()) as http:
        match_id, tokens = started_table(pair, http)
    url = f"{API}/matches/{match_id}/seats/0/stream"
    auth = {"authorization": f"Bearer {tokens[0]}"}

    async def scenario() -> None:
        # from an address of its own: another test's streams from 127.0.0.1 (held, or a killed
        # gateway's until their lease ends) must not count against this one's address
        async with async_client(fresh_address()) as http:
            async with (
                http.stream("GET", f"{pair.a}{url}", headers=auth) as first,
                http.stream("GET", f"{pair.a}{url}", headers=auth) as second,
            ):
                assert first.status_code == second.status_code == 200
                limited(await http.get(f"{pair.b}{url}", headers=auth), "streams_per_token", 2)
            for _ in range(50):
                async with http.stream("GET", f"{pair.b}{url}", headers=auth) as third:
                    if third.status_code == 200:
                        return
                await asyncio.sleep(0.05)
            pytest.fail("closed streams were never released")

    asyncio.run(scenario())


def test_the_streams_of_a_gateway_that_crashed_free_their_places_when_their_lease_ends(
    pair: Pair,
) -> None:
    """A killed gateway renews nothing: its streams stop counting after the lease (2 s)."""
    g = pair.g
    crashing = g.spawn_gateway("gateway-limits-crash", free_port(), LIMITS)
    with client(fresh_address()) as http:
        match_id, tokens = started_table(pair, http)
    url = f"{API}/matches/{match_id}/seats/1/stream"
    auth = {"authorization": f"Bearer {tokens[1]}"}
    with contextlib.ExitStack() as open_streams, client(fresh_address()) as own:
        for _ in range(2):  # from an address of its own, as above
            r = open_streams.enter_context(own.stream("GET", f"{crashing}{url}", headers=auth))
            assert r.status_code == 200
        g.stack.kill("gateway-limits-crash")
        killed = time.monotonic()
        limited(own.get(f"{pair.a}{url}", headers=auth), "streams_per_token", 2)
        while time.monotonic() - killed < 10:
            with own.stream("GET", f"{pair.a}{url}", headers=auth) as r:
                if r.status_code == 200:
                    break
            time.sleep(0.1)
        waited = time.monotonic() - killed
        assert 0.5 < waited < 5, waited


async def opened(http: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET a stream: its answer, read whole unless the stream opened (then closed at once)."""
    async with http.stream("GET", url) as r:
        if r.status_code != 200:
            await r.aread()
        return r


def test_an_address_may_hold_three_public_streams_arenas_and_matches_alike(pair: Pair) -> None:
    """An arena's stream counts with the address's spectator streams, across both gateways;
    another address is still served, and a closed stream frees its place."""
    r = httpx.post(
        f"{pair.a}{API}/arenas",
        json={"name": "limits arena"},
        headers={"authorization": f"Bearer {OPERATOR}"},
    )
    assert r.status_code == 201, r.text
    arena = f"{API}/arenas/{r.json()['arena']['id']}/stream"
    with client(fresh_address()) as maker:
        r = create(maker, pair.a, [None, None])
        assert r.status_code == 201, r.text
    match = f"{API}/matches/{r.json()['match']['match_id']}/stream"
    watcher, other = fresh_address(), fresh_address()

    async def scenario() -> None:
        async with (
            async_client(watcher) as http,
            async_client(other) as elsewhere,
            http.stream("GET", f"{pair.a}{arena}") as first,
            http.stream("GET", f"{pair.b}{arena}") as second,
        ):
            assert first.status_code == second.status_code == 200
            async with http.stream("GET", f"{pair.a}{arena}") as third:
                assert third.status_code == 200
                limited(await opened(http, f"{pair.b}{arena}"), "streams_per_client", 3)
                limited(await opened(http, f"{pair.a}{match}"), "streams_per_client", 3)
                async with elsewhere.stream("GET", f"{pair.b}{arena}") as theirs:
                    assert theirs.status_code == 200
            for _ in range(50):  # the third closed: its place is free again
                async with http.stream("GET", f"{pair.b}{arena}") as again:
                    if again.status_code == 200:
                        return
                await asyncio.sleep(0.05)
            pytest.fail("a closed arena stream never freed its place")

    asyncio.run(scenario())


def test_an_address_may_hold_three_player_streams_seats_and_accounts_alike(pair: Pair) -> None:
    """Seat and account streams count against their client address as well as their token,
    across both gateways, whatever accounts or seats they were opened with: however many
    accounts one host registers, it holds at most the address's share."""
    host, other = fresh_address(), fresh_address()
    with client(host) as http:
        tokens = []
        for n in range(2):
            r = http.post(f"{pair.a}{API}/accounts", json={"name": f"ps{n}{fresh_suffix()}"})
            assert r.status_code == 201, r.text
            tokens.append(r.json()["token"])
        match_id, seats = started_table(pair, http)
    seat, seat_token = next(iter(seats.items()))

    def bearer(token: str) -> dict[str, str]:
        return {"authorization": f"Bearer {token}"}

    async def scenario() -> None:
        async with (
            async_client(host) as http,
            async_client(other) as elsewhere,
            http.stream("GET", f"{pair.a}{API}/account/stream", headers=bearer(tokens[0])) as one,
            http.stream("GET", f"{pair.b}{API}/account/play", headers=bearer(tokens[1])) as two,
            http.stream(
                "GET",
                f"{pair.a}{API}/matches/{match_id}/seats/{seat}/stream",
                headers=bearer(seat_token),
            ) as three,
        ):
            assert one.status_code == two.status_code == three.status_code == 200
            fourth = await http.get(
                f"{pair.b}{API}/account/stream", headers=bearer(tokens[0]), timeout=10
            )
            limited(fourth, "player_streams_per_client", 3)
            async with elsewhere.stream(
                "GET", f"{pair.b}{API}/account/stream", headers=bearer(tokens[0])
            ) as theirs:
                assert theirs.status_code == 200

    asyncio.run(scenario())


def fresh_suffix() -> str:
    """A few random letters for a name no other test takes."""
    return "".join(random.choices("abcdefghijkmnpqrstuvwxyz", k=8))


def test_wrong_operator_tokens_from_one_address_get_429_before_the_token_is_compared(
    pair: Pair,
) -> None:
    """Four wrong operator tokens from an address, on any operator call and either gateway,
    then 429 — even with the right token; the operator elsewhere is served, and another
    address's wrong token is still a 403."""
    with client(fresh_address()) as maker:
        r = create(maker, pair.a, [None, None])
        assert r.status_code == 201, r.text
    waiting = r.json()["match"]["match_id"]
    calls = [
        ("POST", f"{pair.a}{API}/arenas", {"name": "guessed"}),
        ("GET", f"{pair.b}/metrics", None),
        ("POST", f"{pair.a}{API}/accounts/nobody/ban", None),
        ("DELETE", f"{pair.b}{API}/matches/{waiting}", None),  # the creator's or the operator's
    ]
    with client(fresh_address()) as guesser:
        for i, (method, url, body) in enumerate(calls):
            auth = {"authorization": f"Bearer guess-{i}"}
            r = guesser.request(method, url, json=body, headers=auth)
            assert r.status_code == 403, r.text
            assert r.json()["error"] in ("not_operator", "not_creator"), r.text
        for method, url, body in calls:
            r = guesser.request(method, url, json=body, headers={"authorization": "Bearer guess"})
            limited(r, "operator_failures", 4)
        right = {"authorization": f"Bearer {OPERATOR}"}
        limited(guesser.get(f"{pair.a}/metrics", headers=right), "operator_failures", 4)
    with client(fresh_address()) as operator:
        assert operator.get(f"{pair.b}/metrics", headers=right).status_code == 200
        wrong = operator.get(f"{pair.b}/metrics", headers={"authorization": "Bearer guess"})
        assert wrong.status_code == 403


def test_rejected_moves_in_one_match_never_hold_up_a_legal_move_of_the_account_elsewhere(
    pair: Pair,
) -> None:
    """A buggy match does not lock its account out: the rejected moves' budget is the seat's
    own. Its seat in one match sends moves the referee rejects until it is throttled; the same
    account's legal move in its other match goes through."""
    with client(fresh_address()) as http:
        r = http.post(f"{pair.a}{API}/accounts", json={"name": f"buggy{uuid.uuid4().hex[:8]}"})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        tables = []
        for _ in range(2):
            express = {"players": 2, "family": "express"}
            r = create(http, pair.a, [None, None], deadline_ms=120_000, rules=express)
            assert r.status_code == 201, r.text
            match_id = r.json()["match"]["match_id"]
            mine = http.post(
                f"{pair.a}{API}/matches/{match_id}/join",
                json={},
                headers={"authorization": f"Bearer {token}"},
            )
            assert mine.status_code == 201, mine.text
            other = join(http, pair.b, match_id)
            assert other.status_code == 201, other.text
            wait_for_version(pair.g, match_id, 2)
            tables.append((match_id, mine.json()["seat"], other.json()["token"]))
        (buggy, buggy_seat, _), (fine, seat, guest) = tables
        draw = {"type": "draw_tile"}  # never allowed in Express (E1), whoever's turn it is
        for i in range(3):
            r = move(http, pair.a, buggy, buggy_seat, token, draw, f"bad{i}")
            assert r.status_code == 409, r.text
        limited(move(http, pair.a, buggy, buggy_seat, token, draw, "bad3"), "rejected_moves", 3)
        for i in range(8):  # the guest plays until the account's seat has a move to make
            turn, body = first_legal(pair.g, fine)
            if turn == seat:
                break
            r = move(http, pair.b, fine, turn, guest, body, f"guest{i}")
            assert r.status_code == 200, r.text
        assert turn == seat, "the account's seat never had a move to make"
        r = move(http, pair.a, fine, seat, token, body, "legal")
        assert r.status_code == 200, r.text
        limited(move(http, pair.a, buggy, buggy_seat, token, draw, "bad4"), "rejected_moves", 3)
