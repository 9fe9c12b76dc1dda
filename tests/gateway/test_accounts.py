"""Bots as players, over real HTTP: accounts, the account and play streams, challenges, seeks,
and every way a match ends (resign, abort, cancel, forfeit).

The bot here speaks raw HTTP (httpx, no SDK): it follows ``/account/play`` — every seat its
account holds on one connection — and answers each ``turn`` line with the first legal move.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from events.model import MatchCreated, MatchEnded
from tests.gateway.conftest import OPERATOR, Gateways, create, wait_for_version

pytestmark = [pytest.mark.service, pytest.mark.anyio, pytest.mark.both_topologies]


def unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:8]}"


def register(url: str, name: str) -> tuple[str, str]:
    """A new account; its id and token."""
    r = httpx.post(f"{url}/api/v1/accounts", json={"name": name})
    assert r.status_code == 201, r.text
    return r.json()["account"]["id"], r.json()["token"]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def lines(
    client: httpx.AsyncClient, path: str, token: str, **params: Any
) -> AsyncIterator[dict[str, Any]]:
    """The JSON lines of a stream (keep-alives skipped)."""
    async with client.stream("GET", path, headers=auth(token), params=params) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.strip():
                yield json.loads(line)


async def next_event(
    client: httpx.AsyncClient, token: str, kind: str, after: int = 0, timeout: float = 15.0
) -> dict[str, Any]:
    """The first account event of type ``kind`` after id ``after``."""

    async def find() -> dict[str, Any]:
        async for event in lines(client, "/api/v1/account/stream", token, after=after):
            if event["type"] == kind:
                return event
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(find(), timeout)


async def play_account(
    client: httpx.AsyncClient,
    token: str,
    matches: int,
    timeout: float = 60.0,
    seen: set[str] | None = None,
    **params: Any,
) -> list[str]:
    """Play every seat of the account until ``matches`` matches have ended; return their
    ids. Moves are the first legal one, posted with the account token; ``seen`` collects the
    types of the events that came."""
    ended: list[str] = []

    async def run() -> None:
        async for wrapped in lines(client, "/api/v1/account/play", token, **params):
            line = wrapped["line"]
            match_id, seat = wrapped["match_id"], wrapped["seat"]
            if line["type"] == "event" and seen is not None:
                seen.add(line["event"]["type"])
            over = (line.get("view") or {}).get("phase") == "over"  # an end seen afresh
            if over or (line["type"] == "event" and line["event"]["type"] == "match_ended"):
                if match_id not in ended:
                    ended.append(match_id)
                if len(ended) >= matches:
                    return
            if line["type"] == "turn":
                move = line["view"]["legal"][0]
                r = await client.post(
                    f"/api/v1/matches/{match_id}/seats/{seat}/moves",
                    json=move,
                    headers={**auth(token), "Idempotency-Key": f"v{line['id']}-s{seat}"},
                )
                assert r.status_code in (200, 409), r.text

    await asyncio.wait_for(run(), timeout)
    return ended


def ended_of(g: Gateways, match_id: str) -> MatchEnded:
    event = g.log(match_id)[-1].event
    assert isinstance(event, MatchEnded), event
    return event


def first_of(g: Gateways, match_id: str) -> MatchCreated:
    event = g.log(match_id)[0].event
    assert isinstance(event, MatchCreated), event
    return event


def test_names_are_checked_unique_and_reserved(gateways: Gateways) -> None:
    url = gateways.url
    name = unique("Alice")
    register(url, name)
    for taken in (name.upper(), name.replace("i", "1")):
        r = httpx.post(f"{url}/api/v1/accounts", json={"name": taken})
        assert (r.status_code, r.json()["error"]) == (409, "name_taken")
    for reserved in ("greedy", "Gr33dy", "random", "house_bot"):
        r = httpx.post(f"{url}/api/v1/accounts", json={"name": reserved})
        assert (r.status_code, r.json()["error"]) == (422, "reserved_name")
    for bad in ("[/]", "a\x1b[31mb", "x", "é" * 5, "a" * 21, "name\u202e"):
        r = httpx.post(f"{url}/api/v1/accounts", json={"name": bad})
        assert (r.status_code, r.json()["error"]) == (422, "bad_name"), bad


def test_tokens_rotate_revoke_and_the_operator_bans_and_issues(gateways: Gateways) -> None:
    url = gateways.url
    name = unique("rot")
    _, token = register(url, name)
    assert httpx.get(f"{url}/api/v1/account", headers=auth(token)).status_code == 200
    new = httpx.post(f"{url}/api/v1/account/token", headers=auth(token)).json()["token"]
    # each change is answered once every gateway's memory of the token is told: at once
    assert httpx.get(f"{url}/api/v1/account", headers=auth(token)).status_code == 401
    assert httpx.get(f"{url}/api/v1/account", headers=auth(new)).status_code == 200
    assert httpx.delete(f"{url}/api/v1/account/token", headers=auth(new)).status_code == 204
    r = httpx.post(f"{url}/api/v1/accounts/{name}/token", headers=auth(new))
    assert (r.status_code, r.json()["error"]) == (403, "not_operator")
    issued = httpx.post(f"{url}/api/v1/accounts/{name}/token", headers=auth(OPERATOR))
    assert issued.status_code == 200
    again = issued.json()["token"]
    assert httpx.get(f"{url}/api/v1/account", headers=auth(again)).status_code == 200  # kept
    assert httpx.post(f"{url}/api/v1/accounts/{name}/ban", headers=auth(OPERATOR)).json()[
        "account"
    ]["banned"]
    r = httpx.get(f"{url}/api/v1/account", headers=auth(again))
    assert (r.status_code, r.json()["error"]) == (403, "account_banned")


async def test_an_account_joins_plays_and_is_told_when_its_match_starts_and_ends(
    gateways: Gateways,
) -> None:
    url = gateways.url
    account, token = register(url, unique("joiner"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post(
            "/api/v1/matches",
            json={"seats": [None, "greedy"], "rules": {"family": "express", "target": 20}},
        )
        match_id = r.json()["match"]["match_id"]
        r = await client.post(f"/api/v1/matches/{match_id}/join", json={}, headers=auth(token))
        assert r.status_code == 201, r.text
        started = await next_event(client, token, "match_started")
        assert started["match_id"] == match_id and started["seats"] == [0]
        assert started["links"]["seats"]["0"]["moves"].endswith("/seats/0/moves")
        assert await play_account(client, token, 1) == [match_id]
        finished = await next_event(client, token, "match_finished", after=started["id"])
        assert finished["match_id"] == match_id and finished["result"] in ("win", "loss")
        me = (await client.get("/api/v1/account", headers=auth(token))).json()
        assert me["live"] == []
    created = await asyncio.to_thread(first_of, gateways, match_id)
    assert created.accounts == (account, None) and created.players[1] == "greedy"


async def test_an_account_challenges_the_house_and_its_match_starts_at_once(
    gateways: Gateways,
) -> None:
    """One call: a challenge naming a house pool is started as it is made, with its match,
    and the account plays it to the end."""
    url = gateways.url
    account, token = register(url, unique("visitor"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post(
            "/api/v1/challenges",
            json={"opponents": ["greedy"], "rules": {"family": "express", "target": 20}},
            headers=auth(token),
        )
        assert r.status_code == 201, r.text
        challenge = r.json()["challenge"]
        assert challenge["status"] == "started" and challenge["match_id"]
        assert challenge["from"] == {"id": account, "name": challenge["from"]["name"]}
        assert challenge["to"] == [{"id": "house:greedy", "name": "greedy", "accepted": True}]
        match_id = challenge["match_id"]
        started = await next_event(client, token, "match_started")
        assert started["match_id"] == match_id and started["seats"] == [0]
        assert await play_account(client, token, 1) == [match_id]
        for opponents in (["greedy", "nobody-of-that-name"], ["no-such-pool"]):
            r = await client.post(
                "/api/v1/challenges", json={"opponents": opponents}, headers=auth(token)
            )
            assert r.status_code == 404 and r.json()["error"] == "no_account", r.text
    created = await asyncio.to_thread(first_of, gateways, match_id)
    assert created.accounts == (account, None) and created.bots == (None, "greedy")


async def test_two_accounts_challenge_each_other_and_play_over_one_connection_each(
    gateways: Gateways,
) -> None:
    url = gateways.url
    a_name, b_name = unique("chal"), unique("resp")
    a, a_token = register(url, a_name)
    b, b_token = register(url, b_name)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post(
            "/api/v1/challenges",
            json={"opponents": [b_name], "rules": {"family": "straight", "target": 30}},
            headers=auth(a_token),
        )
        assert r.status_code == 201, r.text
        challenge_id = r.json()["challenge"]["id"]
        fresh = lines(client, "/api/v1/account/stream", b_token)
        state = await asyncio.wait_for(fresh.__anext__(), 10)
        await fresh.aclose()
        assert state["type"] == "state"  # a fresh stream says where things stand
        assert [c["id"] for c in state["challenges"]] == [challenge_id]
        received = await next_event(client, b_token, "challenge")
        assert received["challenge"]["id"] == challenge_id
        assert received["challenge"]["from"]["name"] == a_name
        r = await client.post(f"/api/v1/challenges/{challenge_id}/accept", headers=auth(a_token))
        assert r.status_code == 403  # only the challenged accept
        r = await client.post(f"/api/v1/challenges/{challenge_id}/accept", headers=auth(b_token))
        assert r.status_code == 200, r.text
        match_id = r.json()["challenge"]["match_id"]
        assert r.json()["challenge"]["status"] == "started" and match_id
        played = await asyncio.gather(
            play_account(client, a_token, 1), play_account(client, b_token, 1)
        )
        assert played == [[match_id], [match_id]]
    created = await asyncio.to_thread(first_of, gateways, match_id)
    assert created.accounts == (a, b)
    assert created.players == (a_name, b_name)


async def test_one_account_plays_both_partner_seats_over_one_stream(gateways: Gateways) -> None:
    url = gateways.url
    _, token = register(url, unique("pair"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post(
            "/api/v1/matches",
            json={
                "seats": [None, "random", None, "greedy"],
                "rules": {"family": "express", "players": 4, "target": 20},
            },
        )
        match_id = r.json()["match"]["match_id"]
        for seat in (0, 2):
            r = await client.post(
                f"/api/v1/matches/{match_id}/join", json={"seat": seat}, headers=auth(token)
            )
            assert r.status_code == 201, r.text
        seen: set[str] = set()
        assert await play_account(client, token, 1, seen=seen, events="minimal") == [match_id]
    assert "match_ended" in seen and "tile_played" not in seen  # minimal: no one's plays


async def test_seeks_pair_accounts_and_house_bots_fill_after_the_wait(gateways: Gateways) -> None:
    url = gateways.url
    _, a_token = register(url, unique("seeka"))
    _, b_token = register(url, unique("seekb"))
    _, c_token = register(url, unique("seekc"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/api/v1/seeks", json={"kind": "express-9p"}, headers=auth(a_token))
        assert (r.status_code, r.json()["error"]) == (422, "unknown_kind")
        for token in (a_token, b_token):
            r = await client.post(
                "/api/v1/seeks", json={"kind": "straight-2p"}, headers=auth(token)
            )
            assert r.status_code in (200, 201), r.text
        a_start, b_start = await asyncio.gather(
            next_event(client, a_token, "match_started"),
            next_event(client, b_token, "match_started"),
        )
        assert a_start["match_id"] == b_start["match_id"]
        r = await client.post("/api/v1/seeks", json={"kind": "express-4p"}, headers=auth(c_token))
        assert r.status_code == 201
        c_start = await next_event(client, c_token, "match_started", timeout=20)
        assert c_start["seats"] == [0]
        assert c_start["players"][1:] == ["greedy"] * 3  # filled after the wait
        done = await asyncio.gather(
            play_account(client, a_token, 1),
            play_account(client, b_token, 1),
            play_account(client, c_token, 1, timeout=120),
        )
        assert done[0] == done[1] == [a_start["match_id"]]


async def test_resign_and_abort_over_http_end_the_match(gateways: Gateways) -> None:
    url = gateways.url
    _, token = register(url, unique("quit"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        ids = []
        for _ in range(2):
            r = await client.post("/api/v1/matches", json={"seats": [None, "greedy"]})
            match_id = r.json()["match"]["match_id"]
            r = await client.post(
                f"/api/v1/matches/{match_id}/join", json={"seat": 0}, headers=auth(token)
            )
            assert r.status_code == 201
            ids.append(match_id)
        for match_id in ids:
            await asyncio.to_thread(wait_for_version, gateways, match_id, 2)
        for match_id, kind in zip(ids, ("abort", "resign"), strict=True):
            r = await client.post(
                f"/api/v1/matches/{match_id}/seats/0/moves",
                json={"type": kind},
                headers={**auth(token), "Idempotency-Key": kind},
            )
            assert r.status_code == 200, r.text
    aborted = await asyncio.to_thread(ended_of, gateways, ids[0])
    resigned = await asyncio.to_thread(ended_of, gateways, ids[1])
    assert (aborted.reason, aborted.winner) == ("aborted", None)
    assert (resigned.reason, resigned.winner, resigned.resigned) == ("resigned", 1, 0)


async def test_the_play_stream_sees_a_match_that_started_and_ended_between_its_looks(
    gateways: Gateways,
) -> None:
    """A match that starts and ends while the account's play stream is quiet (joined and
    resigned at once; in an arena, a deal that plays itself to its end) still reaches the
    stream: its seat sees it over."""
    url = gateways.url
    _, token = register(url, unique("brief"))
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as client,
        client.stream("GET", "/api/v1/account/play", headers=auth(token)) as play,
    ):
        assert play.status_code == 200
        r = await client.post("/api/v1/matches", json={"seats": [None, "greedy"]})
        match_id = r.json()["match"]["match_id"]
        r = await client.post(
            f"/api/v1/matches/{match_id}/join", json={"seat": 0}, headers=auth(token)
        )
        assert r.status_code == 201, r.text
        await asyncio.to_thread(wait_for_version, gateways, match_id, 2)
        r = await client.post(
            f"/api/v1/matches/{match_id}/seats/0/moves",
            json={"type": "resign"},
            headers={**auth(token), "Idempotency-Key": "resign"},
        )
        assert r.status_code == 200, r.text

        async def its_end() -> None:
            async for line in play.aiter_lines():
                if not line.strip():
                    continue
                wrapped = json.loads(line)
                assert (wrapped["match_id"], wrapped["seat"]) == (match_id, 0)
                inner = wrapped["line"]
                if (inner.get("view") or {}).get("phase") == "over":
                    return
                if inner["type"] == "event" and inner["event"]["type"] == "match_ended":
                    return

        await asyncio.wait_for(its_end(), 15)


async def test_a_squatter_forfeits_after_timeouts_in_a_row(gateways: Gateways) -> None:
    url = gateways.url
    _, token = register(url, unique("squat"))
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post(
            "/api/v1/matches", json={"seats": [None, "greedy"], "deadline_ms": 300}
        )
        assert r.json()["match"]["forfeit_after"] == 3
        match_id = r.json()["match"]["match_id"]
        r = await client.post(f"/api/v1/matches/{match_id}/join", json={}, headers=auth(token))
        assert r.status_code == 201
    deadline = time.monotonic() + 20
    while not isinstance((await asyncio.to_thread(gateways.log, match_id))[-1].event, MatchEnded):
        assert time.monotonic() < deadline, "the squatted match never ended"
        await asyncio.sleep(0.2)
    ended = await asyncio.to_thread(ended_of, gateways, match_id)
    assert (ended.reason, ended.winner) == ("forfeit", 1)


def test_the_creator_or_the_operator_cancels_and_nobody_else(gateways: Gateways) -> None:
    url = gateways.url
    r = httpx.post(f"{url}/api/v1/matches", json={"seats": [None, None]})
    match_id, owner = r.json()["match"]["match_id"], r.json()["owner_token"]
    _, stranger = register(url, unique("strange"))
    r = httpx.delete(f"{url}/api/v1/matches/{match_id}", headers=auth(stranger))
    assert (r.status_code, r.json()["error"]) == (403, "not_creator")
    r = httpx.delete(f"{url}/api/v1/matches/{match_id}", headers=auth(owner))
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = httpx.post(f"{url}/api/v1/matches/{match_id}/join", json={})
    assert r.status_code in (404, 409)
    assert match_id not in {
        m["match_id"] for m in httpx.get(f"{url}/api/v1/matches").json()["matches"]
    }
    live = create(url, ["random", "greedy"], rules={"family": "straight", "target": 1000})
    wait_for_version(gateways, live, 3)
    r = httpx.delete(f"{url}/api/v1/matches/{live}", headers=auth(OPERATOR))
    assert r.status_code == 200, r.text
    ended = ended_of(gateways, live)
    assert (ended.reason, ended.winner) == ("cancelled", None)


def test_creation_mistakes_are_refused_before_anything_is_stored(gateways: Gateways) -> None:
    url = gateways.url
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"seats": [None, "nosuchpool"]}, 422, "unknown_pool"),
        ({"seats": [None, "search"]}, 409, "pool_unavailable"),  # no search worker runs here
        ({"seats": ["greedy", "random"], "rules": {"target": 1_000_000}}, 422, "rejected"),
        ({"seats": [None, "greedy"], "names": ["a"]}, 422, "invalid_match"),  # was a 500
        ({"seats": ["random", "greedy"], "names": ["greedy", "random"]}, 422, "invalid_name"),
        ({"seats": [None, "greedy"], "deadline_ms": 0}, 422, "invalid_match"),
        ({"seats": [None, "greedy"], "max_rounds": 100_000}, 422, "invalid_match"),
        ({"seats": [None, "greedy"], "names": ["greedy", "greedy"]}, 422, "invalid_name"),
    ]
    for body, status, code in cases:
        r = httpx.post(f"{url}/api/v1/matches", json=body)
        assert (r.status_code, r.json()["error"]) == (status, code), (body, r.text)


def test_a_guest_cannot_take_a_house_pool_or_an_account_name(gateways: Gateways) -> None:
    url = gateways.url
    taken = unique("owned")
    register(url, taken)
    for name in ("greedy", "Random", taken.upper(), "[/]"):
        match_id = create(url, [None, "greedy"])
        r = httpx.post(f"{url}/api/v1/matches/{match_id}/join", json={"name": name})
        assert (r.status_code, r.json()["error"]) == (422, "invalid_name"), name


async def open_arena(client: httpx.AsyncClient, body: dict[str, Any], tokens: list[str]) -> str:
    """The operator creates an arena (``body``), these accounts and the house pool ``greedy``
    enter it, and it starts; its id."""
    r = await client.post("/api/v1/arenas", json=body, headers=auth(OPERATOR))
    assert r.status_code == 201, r.text
    arena_id: str = r.json()["arena"]["id"]
    for token in tokens:
        r = await client.post(f"/api/v1/arenas/{arena_id}/join", headers=auth(token))
        assert r.status_code == 200, r.text
    r = await client.post(
        f"/api/v1/arenas/{arena_id}/join", json={"pool": "greedy"}, headers=auth(OPERATOR)
    )
    assert r.status_code == 200, r.text
    r = await client.post(f"/api/v1/arenas/{arena_id}/start", headers=auth(OPERATOR))
    assert r.status_code == 200, r.text
    return arena_id


async def final_standings(
    client: httpx.AsyncClient, arena_id: str, token: str, timeout: float = 30.0
) -> dict[str, Any]:
    """The arena stream's final standings line (waiting for it)."""

    async def final() -> dict[str, Any]:
        async for line in lines(client, f"/api/v1/arenas/{arena_id}/stream", token):
            if line["type"] == "standings" and line.get("final"):
                return line
        raise AssertionError("the arena stream ended without final standings")

    return await asyncio.wait_for(final(), timeout)


async def test_an_arena_of_two_accounts_and_a_house_pool_plays_out_with_standings(
    gateways: Gateways,
) -> None:
    url = gateways.url
    a_name, b_name = unique("arna"), unique("arnb")
    a, a_token = register(url, a_name)
    b, b_token = register(url, b_name)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {
            "name": "test arena",
            "rules": {"family": "express", "target": 20},
            "format": "round_robin",
            "games_per_pairing": 2,
        }
        r = await client.post("/api/v1/arenas", json=body, headers=auth(a_token))
        assert (r.status_code, r.json()["error"]) == (403, "not_operator")
        arena_id = await open_arena(client, body, [a_token, b_token])
        await asyncio.gather(
            play_account(client, a_token, 4, timeout=120),
            play_account(client, b_token, 4, timeout=120),
        )
        standings = await final_standings(client, arena_id, a_token)
        arena = (await client.get(f"/api/v1/arenas/{arena_id}")).json()["arena"]
        whole = [line async for line in lines(client, f"/api/v1/arenas/{arena_id}/stream", a_token)]
        assert whole[-1]["type"] == "finished"  # a finished arena's stream ends, cleanly
    assert arena["status"] == "finished"
    keys = {row["key"] for row in arena["standings"]}
    assert keys == {a, b, "house:greedy"}
    assert all("interval" in row or "low" in row for row in arena["standings"]), arena
    assert standings["final"]
