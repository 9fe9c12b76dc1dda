"""A stream ends with the credential it was opened with, on every gateway, within a second
(docs/protocol.md, "When a token ends"): rotating or revoking an account's token, the operator
re-issuing it or banning the account, and a seat's match called off. Two real gateway processes
on one Redis: the change is made through one, the stream is open on the other, whose token
cache (DOMINO_GATEWAY_TOKEN_CACHE_S, 5 s by default) would otherwise have let the old token
answer on.

Before this, a play stream opened with a token stayed open after the owner rotated it, and
went on to send the hand of a match the owner then started with the new token."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from services.gateway.credentials import Credential, Credentials
from services.lobby.revocations import Ended
from services.store.keys import Keys
from tests.gateway.conftest import OPERATOR, PLAY_LIMITS, Gateways, create, free_port, join
from tests.gateway.test_accounts import auth, register, unique
from tests.support.topology import sync_client_for

pytestmark = [pytest.mark.service, pytest.mark.both_topologies]

WITHIN_S = 1.0
"""How soon a stream must end once its token has."""
SWEEP_LEASE_S = 3.0
"""The stream lease of the second gateway: its sweep (a third of it) checks every second."""


@pytest.fixture(scope="module")
def other(gateways: Gateways) -> Iterator[str]:
    """A second gateway with the default token cache, whose sweep runs every second."""
    env = {**PLAY_LIMITS, "DOMINO_GATEWAY_STREAM_LEASE_S": str(SWEEP_LEASE_S)}
    with gateways.spawned("gateway-credentials", free_port(), env) as url:
        yield url


class Opened:
    """A stream being read in the background: its lines as they come, and how it ended."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.ended_at: float | None = None
        self.started = asyncio.Event()


async def _read(
    client: httpx.AsyncClient, path: str, token: str, opened: Opened, params: dict[str, str]
) -> None:
    async with client.stream("GET", path, headers=auth(token), params=params) as r:
        assert r.status_code == 200, await r.aread()
        opened.started.set()
        async for line in r.aiter_lines():
            opened.raw.append(line)
            if line.strip().startswith("{"):
                opened.lines.append(json.loads(line))
            elif line.startswith("data: "):
                opened.lines.append(json.loads(line[len("data: ") :]))
    opened.ended_at = time.monotonic()


async def ends_within(
    client: httpx.AsyncClient,
    streams: list[tuple[str, str, dict[str, str]]],
    trigger: Callable[[], Awaitable[None]],
) -> list[Opened]:
    """Open every (path, token, params) stream, ``trigger`` the end of their token, and check
    each ends within WITHIN_S of it with a closing line; return what each read."""
    opened = [Opened() for _ in streams]
    tasks = [
        asyncio.create_task(_read(client, path, token, o, params))
        for (path, token, params), o in zip(streams, opened, strict=True)
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(o.started.wait() for o in opened)), 15)
        await asyncio.sleep(0.2)  # every stream bound, its first lines sent
        await trigger()
        done = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*tasks), WITHIN_S + 5)
    finally:
        for task in tasks:
            task.cancel()
    for o in opened:
        assert o.ended_at is not None
        assert o.ended_at - done < WITHIN_S, f"ended {o.ended_at - done:.2f} s after its token"
        assert o.lines and o.lines[-1]["type"] == "closed", o.raw[-3:]
    return opened


@contextlib.asynccontextmanager
async def clients(a: str, b: str) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """A client of each gateway: the one a change is made through, the one a stream is on."""
    async with (
        httpx.AsyncClient(base_url=a, timeout=30) as on_a,
        httpx.AsyncClient(base_url=b, timeout=30) as on_b,
    ):
        yield on_a, on_b


def _play(token: str) -> tuple[str, str, dict[str, str]]:
    return ("/api/v1/account/play", token, {})


def _events(token: str, sse: bool = False) -> tuple[str, str, dict[str, str]]:
    return ("/api/v1/account/stream", token, {"format": "sse"} if sse else {})


async def _start_against_greedy(client: httpx.AsyncClient, token: str) -> str:
    r = await client.post("/api/v1/matches", json={"seats": [None, "greedy"]})
    assert r.status_code == 201, r.text
    match_id: str = r.json()["match"]["match_id"]
    r = await client.post(f"/api/v1/matches/{match_id}/join", json={"seat": 0}, headers=auth(token))
    assert r.status_code == 201, r.text
    return match_id


def test_a_rotated_token_ends_its_play_and_account_streams_on_another_gateway_at_once(
    gateways: Gateways, other: str
) -> None:
    a = gateways.url
    _, old = register(a, unique("rot"))
    new: list[str] = []

    async def run() -> None:
        async with clients(a, other) as (on_a, on_b):

            async def rotate() -> None:
                r = await on_a.post("/api/v1/account/token", headers=auth(old))
                assert r.status_code == 200, r.text
                new.append(r.json()["token"])

            opened = await ends_within(on_b, [_play(old), _events(old)], rotate)
            for o in opened:
                assert o.lines[-1]["reason"] == "token_rotated"
            # the old token is refused there at once, though that gateway had it cached
            assert (await on_b.get("/api/v1/account", headers=auth(old))).status_code == 401
            # a stream opened with the new token is not ended by the old one's end, and sees
            # the match the owner starts with it
            fresh = Opened()
            task = asyncio.create_task(_read(on_b, "/api/v1/account/play", new[0], fresh, {}))
            try:
                await asyncio.wait_for(fresh.started.wait(), 15)
                match_id = await _start_against_greedy(on_a, new[0])
                deadline = time.monotonic() + 15
                while not any(line.get("match_id") == match_id for line in fresh.lines):
                    assert time.monotonic() < deadline, fresh.raw[-5:]
                    assert fresh.ended_at is None, fresh.raw[-3:]
                    await asyncio.sleep(0.05)
            finally:
                task.cancel()

    asyncio.run(run())


def test_a_revoked_token_ends_its_streams_ndjson_and_sse_with_a_closing_line(
    gateways: Gateways, other: str
) -> None:
    a = gateways.url
    _, token = register(a, unique("rev"))

    async def run() -> None:
        async with clients(a, other) as (on_a, on_b):

            async def revoke() -> None:
                r = await on_a.delete("/api/v1/account/token", headers=auth(token))
                assert r.status_code == 204, r.text

            play, events, sse = await ends_within(
                on_b, [_play(token), _events(token), _events(token, sse=True)], revoke
            )
            for o in (play, events, sse):
                assert o.lines[-1]["reason"] == "token_revoked"
                assert o.lines[-1]["message"]
            assert "event: closed" in sse.raw
            assert (await on_b.get("/api/v1/account", headers=auth(token))).status_code == 401

    asyncio.run(run())


def test_a_ban_ends_every_stream_of_the_account_including_a_seat_stream_opened_with_its_token(
    gateways: Gateways, other: str
) -> None:
    a = gateways.url
    name = unique("ban")
    _, token = register(a, name)
    operator = auth(OPERATOR)

    async def run() -> None:
        async with clients(a, other) as (on_a, on_b):
            match_id = await _start_against_greedy(on_a, token)
            seat = (f"/api/v1/matches/{match_id}/seats/0/stream", token, {})

            async def ban() -> None:
                r = await on_a.post(f"/api/v1/accounts/{name}/ban", headers=operator)
                assert r.status_code == 200, r.text

            opened = await ends_within(on_b, [_play(token), _events(token), seat], ban)
            for o in opened:
                assert o.lines[-1]["reason"] == "account_banned"
            r = await on_b.get("/api/v1/account", headers=auth(token))
            assert r.status_code == 403, r.text
            # lifted, the same token opens streams again there, at once
            r = await on_a.post(f"/api/v1/accounts/{name}/unban", headers=operator)
            assert r.status_code == 200, r.text
            assert (await on_b.get("/api/v1/account", headers=auth(token))).status_code == 200

    asyncio.run(run())


def test_the_operators_reissue_ends_the_streams_of_the_old_token(
    gateways: Gateways, other: str
) -> None:
    a = gateways.url
    name = unique("iss")
    _, token = register(a, name)

    async def run() -> None:
        async with clients(a, other) as (on_a, on_b):

            async def issue() -> None:
                r = await on_a.post(f"/api/v1/accounts/{name}/token", headers=auth(OPERATOR))
                assert r.status_code == 200, r.text

            for o in await ends_within(on_b, [_play(token), _events(token)], issue):
                assert o.lines[-1]["reason"] == "token_reissued"
            # and the old token is refused there at once, though that gateway had it cached
            assert (await on_b.get("/api/v1/account", headers=auth(token))).status_code == 401

    asyncio.run(run())


def test_a_seat_stream_ends_when_its_match_is_called_off_before_it_starts(
    gateways: Gateways, other: str
) -> None:
    a = gateways.url
    match_id = create(a, [None, None], rules={"players": 2})
    seat, token = join(a, match_id)

    async def run() -> None:
        async with clients(a, other) as (on_a, on_b):

            async def cancel() -> None:
                r = await on_a.delete(f"/api/v1/matches/{match_id}", headers=auth(OPERATOR))
                assert r.status_code == 200, r.text

            stream = (f"/api/v1/matches/{match_id}/seats/{seat}/stream", token, {})
            (o,) = await ends_within(on_b, [stream], cancel)
            assert o.lines[-1]["reason"] == "seat_ended"

    asyncio.run(run())


def test_a_token_ended_without_a_word_on_the_revocation_stream_is_still_found_by_the_sweep(
    gateways: Gateways, other: str
) -> None:
    """What the revocation stream tells is checked without it too: a token changed in Redis
    with nothing appended (an entry lost to a failover, say) ends its streams within the
    sweep's period, a third of the stream lease."""
    a = gateways.url
    account_id, token = register(a, unique("swp"))
    keys = Keys(gateways.settings.prefix, gateways.settings.partitions)

    async def run() -> None:
        async with httpx.AsyncClient(base_url=other, timeout=30) as on_b:
            opened = Opened()
            task = asyncio.create_task(_read(on_b, "/api/v1/account/stream", token, opened, {}))
            try:
                await asyncio.wait_for(opened.started.wait(), 15)
                with sync_client_for(gateways.redis_url) as r:
                    r.hset(keys.account(account_id), "token", "")
                done = time.monotonic()
                await asyncio.wait_for(task, SWEEP_LEASE_S + 5)
            finally:
                task.cancel()
            assert opened.ended_at is not None
            assert opened.ended_at - done < SWEEP_LEASE_S / 3 + 1.5
            assert opened.lines[-1] == {
                "type": "closed",
                "reason": "token_revoked",
                "message": opened.lines[-1]["message"],
            }

    asyncio.run(run())


# -- the registry itself ---------------------------------------------------------------------


def _registry() -> tuple[Credentials, list[Ended]]:
    forgotten: list[Ended] = []
    return Credentials(Keys("t", 4), forgotten.append), forgotten


def test_an_end_closes_only_the_streams_of_that_token_and_is_forgotten_by_the_caches() -> None:
    credentials, forgotten = _registry()
    closed: list[tuple[str, str]] = []
    old = credentials.bind(Credential("account", "t1", "u-1"), lambda r: closed.append(("old", r)))
    credentials.bind(Credential("account", "t2", "u-1"), lambda r: closed.append(("new", r)))
    credentials.bind(Credential("account", "t1", "u-2"), lambda r: closed.append(("other", r)))
    ended = Ended(kind="account", reason="token_rotated", account="u-1", token="t1")
    assert credentials.end(ended) == 1
    assert closed == [("old", "token_rotated")]
    assert forgotten == [ended]
    credentials.unbind(old)
    assert credentials.bound == 2


def test_a_ban_closes_every_stream_of_the_account_and_its_lift_lets_new_ones_stay() -> None:
    credentials, _ = _registry()
    closed: list[str] = []
    for token in ("t1", "t2"):
        credentials.bind(Credential("account", token, "u-1"), closed.append)
    credentials.end(Ended(kind="account", reason="account_banned", account="u-1"))
    assert closed == ["account_banned", "account_banned"]
    # a stream bound just after the ban (its look-up raced it) is closed at once
    credentials.bind(Credential("account", "t1", "u-1"), closed.append)
    assert closed[-1] == "account_banned" and len(closed) == 3
    credentials.end(Ended(kind="account", reason="account_unbanned", account="u-1"))
    credentials.bind(Credential("account", "t1", "u-1"), closed.append)
    assert len(closed) == 3


def test_a_stream_bound_after_its_seat_token_ended_is_closed_at_once() -> None:
    credentials, _ = _registry()
    closed: list[str] = []
    credentials.end(Ended(kind="seat", reason="seat_ended", token="s1"))
    credentials.bind(Credential("seat", "s1"), closed.append)
    credentials.bind(Credential("seat", "s2"), closed.append)
    assert closed == ["seat_ended"]
