"""The SDK and the protocol's version: it names version 1 on every request it makes, reads an
answer only once the answer states that version (or none: a gateway from before versions were
stated), and raises ProtocolMismatch — both versions in its message, never a misread body or
line — for any other.

A tiny HTTP server in the test stands in for gateways of other versions (one of the future, one
stating nothing); the session's real gateways show the header is read there and a whole match
is played in version 1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pytest
from domino_sdk import (
    PROTOCOL,
    Bot,
    GatewayError,
    LobbyClient,
    MoveResult,
    PlayTile,
    ProtocolMismatch,
    SeatClient,
    Snapshot,
    View,
)
from domino_sdk import transport as sdk_transport
from domino_sdk.account import AccountClient, register
from domino_sdk.model import Move

from tests.gateway.conftest import Gateways, create, join

pytestmark = [pytest.mark.service, pytest.mark.anyio]

HEADER = "Domino-Protocol"
MATCH = "m-0123456789"
SNAPSHOT = {"type": "snapshot", "id": 0, "match_id": MATCH, "seat": 1, "view": None}
ACCOUNT = {"id": "u-0123456789ab", "name": "Ada", "created": 1.5}
ANSWERS: dict[tuple[str, str], tuple[int, Any]] = {
    # what a version 1 gateway answers each call the tests make, by method and path
    ("GET", "/api/v1/matches"): (200, {"status": "open", "matches": [], "next": None}),
    ("POST", "/api/v1/matches"): (201, {"match": {"match_id": MATCH}}),
    ("POST", f"/api/v1/matches/{MATCH}/join"): (201, {"match_id": MATCH, "seat": 1, "token": "t"}),
    ("GET", "/api/v1/seat"): (200, {"match_id": MATCH, "seat": 1}),
    ("GET", f"/api/v1/matches/{MATCH}/seats/1/stream"): (200, SNAPSHOT),
    ("POST", f"/api/v1/matches/{MATCH}/seats/1/moves"): (
        200,
        {"accepted": True, "version": 3, "replayed": False},
    ),
    ("POST", "/api/v1/accounts"): (201, {"account": ACCOUNT, "token": "dab_x"}),
    ("GET", "/api/v1/account"): (200, {"account": ACCOUNT}),
    ("GET", "/api/v1/seeks"): (200, {"seeks": []}),
}


@dataclass
class Stand:
    """A gateway stand-in: answers ``ANSWERS`` (or ``status`` and ``body`` for every call),
    stating ``stated`` in the version header (None: no header), and keeps each request's
    method, path and headers."""

    url: str = ""
    stated: str | None = "1"
    status: int | None = None
    body: Any = None
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def answer(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
        path = target.split("?", 1)[0]
        self.requests.append((method, path, headers))
        status, body = ANSWERS.get((method, path), (404, {"error": "not_found", "message": ""}))
        if self.status is not None:
            status, body = self.status, self.body
        return status, json.dumps(body).encode() + (b"\n" if path.endswith("/stream") else b"")


@pytest.fixture
def stand() -> Iterator[Stand]:
    """A :class:`Stand` listening on a loopback port of its own, in a thread."""
    stand = Stand()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # as a gateway answers (a socket's handshake needs it)

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            status, body = stand.answer(self.command, self.path, dict(self.headers.items()))
            self.send_response(status)
            stream = self.path.split("?", 1)[0].endswith("/stream") and status == 200
            self.send_header(
                "content-type", "application/x-ndjson" if stream else "application/json"
            )
            if stand.stated is not None:
                self.send_header(HEADER, stand.stated)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand
    finally:
        server.shutdown()
        server.server_close()


async def every_call(url: str) -> list[Any]:
    """One of each kind of call the SDK makes, through each of its clients; what each read."""
    got: list[Any] = []
    lobby = LobbyClient(url, retries=0)
    seat = SeatClient(url, "t", retries=0)  # its lines over the socket, or HTTP (404 here)
    account = AccountClient(url, "dab_x", retries=0)
    try:
        got.append(await lobby.matches())
        got.append(await lobby.create([None, "random"]))
        got.append(await lobby.join(MATCH))
        got.append(await seat.whoami())
        async for line in seat.lines():
            got.append(line)
            break
        got.append(await seat.move(PlayTile(seat=1, tile=(6, 6)), key="v1"))
        got.append(await register(url, "Ada", retries=0))
        got.append(await account.me())
        got.append(await account.seeks())
    finally:
        for client in (lobby, seat, account):
            await client.aclose()
    return got


# -- the SDK names its version -------------------------------------------------------------------


async def test_every_request_the_sdk_makes_names_version_1(stand: Stand) -> None:
    """Reads, writes, a socket's handshake, a stream, a move, registering: all named."""
    got = await every_call(stand.url)
    assert len(got) == 9 and isinstance(got[4], Snapshot) and isinstance(got[5], MoveResult)
    assert len(stand.requests) == 10
    assert [p for _, p, _ in stand.requests if p.endswith("/socket")] == [
        f"/api/v1/matches/{MATCH}/seats/1/socket"
    ]
    for method, path, headers in stand.requests:
        assert headers.get(HEADER) == "1", (method, path, headers)
    assert PROTOCOL == 1


async def test_the_sdk_takes_an_answer_without_the_header_as_version_1(stand: Stand) -> None:
    """A gateway from before versions were stated sends none, and spoke version 1: every call
    reads its answers as usual."""
    stand.stated = None
    got = await every_call(stand.url)
    assert got[3] == (MATCH, 1)
    assert got[4] == Snapshot(id=0, match_id=MATCH, seat=1, view=None)
    assert got[5] == MoveResult(version=3, replayed=False)
    assert got[6].token == "dab_x"


# -- another version: ProtocolMismatch, nothing read -----------------------------------------------


def mismatch(error: pytest.ExceptionInfo[ProtocolMismatch], stated: str, status: int) -> None:
    """The typed error: a GatewayError with both versions in its message and attributes."""
    e = error.value
    assert isinstance(e, GatewayError)
    assert (e.status, e.code, e.sdk, e.gateway) == (status, "unsupported_protocol", 1, stated)
    assert f"version {stated!r}" in str(e) and "this SDK version 1" in str(e)


@pytest.mark.parametrize("stated", ["2", "0", "abc", "1.0", "01"])
async def test_an_answer_in_another_version_raises_before_its_body_is_read(
    stand: Stand, stated: str
) -> None:
    """Answers a version 1 client would read as its own — a list, a seat, an accepted move —
    raise instead when the gateway states another version."""
    stand.stated = stated
    lobby = LobbyClient(stand.url, retries=0)
    seat = SeatClient(stand.url, "t", retries=0)
    try:
        with pytest.raises(ProtocolMismatch) as error:
            await lobby.matches()
        mismatch(error, stated, 200)
        with pytest.raises(ProtocolMismatch) as error:
            await seat.whoami()
        mismatch(error, stated, 200)
        seat.match_id, seat.seat = MATCH, 1
        with pytest.raises(ProtocolMismatch) as error:
            await seat.move(PlayTile(seat=1, tile=(6, 6)), key="v1")
        mismatch(error, stated, 200)
        with pytest.raises(ProtocolMismatch) as error:
            await register(stand.url, "Ada", retries=0)
        mismatch(error, stated, 201)
    finally:
        await lobby.aclose()
        await seat.aclose()
    if stated == "2":
        assert "upgrade domino-sdk to one that speaks version 2" in str(error.value)
    if stated == "0":
        assert "the gateway is older than this SDK" in str(error.value)


@pytest.mark.parametrize("stated", ["2", "abc"])
async def test_a_stream_in_another_version_raises_before_its_first_line(
    stand: Stand, stated: str
) -> None:
    """A seat's stream stating another version: not one line is handed to the bot, and the
    stream is not opened again and again as a dropped one would be."""
    stand.stated = stated
    seat = SeatClient(stand.url, "t", retries=0, transport="http")
    seat.match_id, seat.seat = MATCH, 1
    lines: list[Any] = []
    try:
        with pytest.raises(ProtocolMismatch) as error:
            async for line in seat.lines():
                lines.append(line)
    finally:
        await seat.aclose()
    mismatch(error, stated, 200)
    assert lines == []
    assert len(stand.requests) == 1


@pytest.mark.parametrize("stated", ["2", "abc"])
async def test_a_sockets_handshake_in_another_version_raises_and_is_not_taken_for_no_socket(
    stand: Stand, stated: str
) -> None:
    """The socket's handshake answered 404 stating another version: ProtocolMismatch with the
    handshake's status, not a quiet fall back to a stream of that version."""
    stand.stated = stated
    seat = SeatClient(stand.url, "t", retries=0)
    seat.match_id, seat.seat = MATCH, 1
    try:
        with pytest.raises(ProtocolMismatch) as error:
            async for _ in seat.lines():
                pytest.fail("a line was read from a gateway of another version")
    finally:
        await seat.aclose()
    mismatch(error, stated, 404)
    assert [p for _, p, _ in stand.requests] == [f"/api/v1/matches/{MATCH}/seats/1/socket"]


async def test_a_refusal_or_a_retryable_answer_in_another_version_is_raised_at_once(
    stand: Stand,
) -> None:
    """The gateway's own refusal of the SDK's version (400 unsupported_protocol), and a 503 or
    a 429 that would otherwise be tried again: each raises on the first answer."""
    stand.stated = "2"
    refusal = {"error": "unsupported_protocol", "supported": [2], "message": "upgrade"}
    for status, body in [(400, refusal), (503, {"error": "unavailable", "message": ""})]:
        stand.status, stand.body = status, body
        stand.requests.clear()
        lobby = LobbyClient(stand.url, retries=5)
        try:
            with pytest.raises(ProtocolMismatch) as error:
                await lobby.matches()
        finally:
            await lobby.aclose()
        mismatch(error, "2", status)
        assert len(stand.requests) == 1


def test_a_bot_run_against_a_gateway_of_another_version_raises_protocol_mismatch(
    stand: Stand,
) -> None:
    """What a bot's author sees: Bot.run stops with the typed error naming both versions."""

    class First(Bot):
        def choose(self, view: View) -> Move:
            return view.legal[0]

    stand.stated = "2"
    with pytest.raises(ProtocolMismatch) as error:
        First().run(stand.url, "t")
    mismatch(error, "2", 200)


# -- against the session's real gateways ---------------------------------------------------------


async def test_the_real_gateway_refuses_an_sdk_of_another_version_and_it_raises(
    gateways: Gateways, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK of version 2 (its version patched in) against the real gateway: the gateway reads
    the header the SDK sends and refuses it (400, not a 200 it would answer a request without
    the header), stating 1; the SDK raises on that answer — a read, a stream, registering."""
    monkeypatch.setattr(sdk_transport, "PROTOCOL", 2)
    monkeypatch.setitem(sdk_transport._SPOKEN, HEADER, "2")  # the one dict every request reads
    match_id = create(gateways.url, ["random", None], deadline_ms=60_000)
    seat_no, token = join(gateways.url, match_id)
    lobby = LobbyClient(gateways.url, retries=0)
    seat = SeatClient(gateways.url, token, retries=0)
    try:
        with pytest.raises(ProtocolMismatch) as error:
            await lobby.matches()
        assert (error.value.status, error.value.gateway, error.value.sdk) == (400, "1", 2)
        assert "the gateway is older than this SDK" in str(error.value)
        seat.match_id, seat.seat = match_id, seat_no
        with pytest.raises(ProtocolMismatch) as error:
            async for _ in seat.lines():
                pytest.fail("a line was read from a stream of another version")
        assert (error.value.status, error.value.gateway) == (400, "1")
        with pytest.raises(ProtocolMismatch) as error:
            await register(gateways.url, "NeverMade", retries=0)
        assert (error.value.status, error.value.gateway) == (400, "1")
    finally:
        await lobby.aclose()
        await seat.aclose()
    r = httpx.get(f"{gateways.url}/api/v1/accounts/NeverMade")
    assert r.status_code == 404, r.text  # the refused registration made nothing


async def test_the_sdk_of_version_1_plays_a_whole_match_on_the_real_gateway(
    gateways: Gateways,
) -> None:
    """The header the SDK sends is the one the gateway speaks: a bot plays a match through."""

    class First(Bot):
        def choose(self, view: View) -> Move:
            return view.legal[0]

    match_id = create(
        gateways.url,
        ["random", None],
        rules={"family": "express", "players": 2, "target": 30},
        deadline_ms=10_000,
    )
    _, token = join(gateways.url, match_id)
    with anyio.fail_after(120):
        ended = await First().play(gateways.url, token)
    assert ended is not None and ended.scores
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{gateways.url}/api/v1/matches/{match_id}")
    assert r.headers[HEADER] == "1"
