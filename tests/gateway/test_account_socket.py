"""The account socket (docs/protocol.md, "The account channel"): one WebSocket that carries an
account's feed and every seat it holds down, each frame under its cursor, and its moves up.
Real gateways, a real WebSocket client (websockets); for the client that never reads, a raw
TCP socket that stops reading after the handshake."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from services.gateway.protocol import API
from tests.gateway.account_channel import (
    Frame,
    Reader,
    check_exact,
    socket_session,
)
from tests.gateway.conftest import Gateways, states_by_version
from tests.gateway.test_accounts import auth, register, unique
from tests.gateway.test_leak import check

pytestmark = pytest.mark.service

RULES = {"family": "express", "target": 20}


def challenge_house(url: str, token: str, pools: list[str] | None = None) -> str:
    """A match against the house, started at once; its id."""
    r = httpx.post(
        f"{url}{API}/challenges",
        json={"opponents": pools or ["greedy"], "rules": RULES},
        headers=auth(token),
        timeout=30,
    )
    assert r.status_code == 201, r.text
    match_id: str = r.json()["challenge"]["match_id"]
    return match_id


def never(reader: Reader, frame: Frame, n: int) -> bool:
    return False


def test_an_account_plays_two_matches_over_its_socket_seeing_only_its_seats(
    gateways: Gateways,
) -> None:
    """Two matches against the house, started while the socket is open, played to their end
    over it: every frame has a cursor that grows; each match is followed from its first
    event, its events its log as the seat sees it, and no frame shows a tile the seat may
    not see then (C8); every move is answered accepted under its key."""
    g = gateways
    _, token = register(g.url, unique("sock"))
    reader = Reader()
    matches: list[str] = []

    def done(r: Reader) -> bool:
        return len(matches) == 2 and r.ended() >= set(matches)

    async def run() -> None:
        async def start() -> None:
            await asyncio.sleep(0.3)
            for _ in range(2):
                matches.append(await asyncio.to_thread(challenge_house, g.url, token))

        starter = asyncio.create_task(start())
        await socket_session(g.url, token, reader, never, done)
        await starter

    asyncio.run(asyncio.wait_for(run(), 120))
    assert reader.frames[0]["type"] == "account"
    assert reader.frames[0]["line"]["type"] == "state"
    assert {o["type"] for o in reader.answers} == {"accepted"}, reader.answers
    check_exact(g, token, reader, set(matches))
    for (match_id, seat), lines in reader.seat_lines().items():
        log = g.log(match_id)
        assert [line["id"] for line in lines if line["type"] == "event"] == list(
            range(1, len(log) + 1)
        )
        body = b"\n".join(json.dumps(line).encode() for line in lines)
        assert (
            check(
                f"account socket, seat {seat}", seat, "/stream", body, states_by_version(log), log
            )
            > 10
        )
