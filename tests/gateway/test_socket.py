"""The seat's socket (docs/protocol.md, "Socket"): one WebSocket per seat that carries down
exactly what the seat's NDJSON stream sends, one frame a line, and takes its moves up, each
answered under its key with the outcome POST /moves would answer. Real gateways, a real
WebSocket client (websockets), and for the client that never reads a raw TCP socket that
stops reading after the handshake."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from engine.game import legal_moves
from services.gateway.protocol import API
from services.gateway.sockets import CLOSE_CODES, HELLO_S
from tests.gateway.conftest import (
    OPERATOR,
    PLAY_LIMITS,
    Gateways,
    create,
    free_port,
    join,
    states_by_version,
)
from tests.gateway.test_accounts import auth, register, unique
from tests.gateway.test_leak import check
from tests.gateway.test_protocol_fixes import Table, body_of
from tests.service.conftest import fold

pytestmark = pytest.mark.service

BUFFER = 4096
"""The send queue of the gateway the client that never reads is cut by."""
PER_ADDRESS = 8
"""The connections that gateway takes from one address."""


def ws(url: str, match_id: str, seat: int, after: int | None = None) -> str:
    """The socket's address on the gateway at ``url``."""
    query = "" if after is None else f"?after={after}"
    return f"ws{url.removeprefix('http')}{API}/matches/{match_id}/seats/{seat}/socket{query}"


def opening(url: str, token: str | None, **headers: str) -> Any:
    """A connection to the socket at ``url`` (an async context manager)."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return connect(url, additional_headers=headers, proxy=None, open_timeout=10)


async def frame(sock: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    """The socket's next frame."""
    got: dict[str, Any] = json.loads(await asyncio.wait_for(sock.recv(), timeout))
    return got


async def answer(sock: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    """The next frame that is not a line of the stream (an outcome, an error, a limit)."""
    while True:
        got = await frame(sock, timeout)
        if got["type"] != "line":
            return got


async def lines_until(sock: ClientConnection, version: int) -> list[dict[str, Any]]:
    """The stream's lines the socket sends until one is at ``version``."""
    out: list[dict[str, Any]] = []
    while not out or out[-1]["id"] < version:
        got = await frame(sock)
        if got["type"] == "line":
            out.append(got["line"])
    return out


def ndjson(url: str, match_id: str, seat: int, token: str, after: int) -> list[dict[str, Any]]:
    """The seat's NDJSON stream resumed after ``after``, read to its end (a match over)."""
    r = httpx.get(
        f"{url}{API}/matches/{match_id}/seats/{seat}/stream",
        params={"after": str(after)},
        headers=auth(token),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return [json.loads(x) for x in r.text.splitlines() if x.strip()]


# -- a whole match -----------------------------------------------------------------------------


def test_a_bot_plays_a_whole_match_over_its_socket_against_a_house_bot_seeing_only_its_seat(
    gateways: Gateways,
) -> None:
    """Every turn answered over the socket with its first legal move, under the key v<id>,
    each accepted; the match's end closes the socket with 1000 after its last lines; every
    frame names the match and seat; the events are the seat's NDJSON stream's, line for line,
    and no frame shows a tile the seat may not see then (C8)."""
    g = gateways
    match_id = create(g.url, [None, "greedy"], rules={"family": "express", "target": 30})
    seat, token = join(g.url, match_id)
    frames: list[dict[str, Any]] = []
    ended_at: list[float] = []

    async def play() -> int | None:
        async with opening(ws(g.url, match_id, seat), token) as sock:
            try:
                while True:
                    got = await frame(sock, 30)
                    frames.append(got)
                    line = got.get("line", {})
                    if line.get("event", {}).get("type") == "match_ended":
                        ended_at.append(time.monotonic())
                    if line.get("type") == "turn":
                        move = line["view"]["legal"][0]
                        up = {"type": "move", "key": f"v{line['id']}", "move": move}
                        await sock.send(json.dumps(up))
            except ConnectionClosed as e:
                closed_at = time.monotonic()
                # the close follows the last lines at once, not a keep-alive interval later
                assert ended_at and closed_at - ended_at[0] < 0.5, (ended_at, closed_at)
                return None if e.rcvd is None else e.rcvd.code

    code = asyncio.run(asyncio.wait_for(play(), 90))
    assert code == 1000
    log = g.log(match_id)
    assert fold(log).result is not None
    assert all(f["match_id"] == match_id and f["seat"] == seat for f in frames)
    lines = [f["line"] for f in frames if f["type"] == "line"]
    outcomes = [f for f in frames if f["type"] != "line"]
    turns = [line for line in lines if line["type"] == "turn"]
    assert turns and lines[0]["type"] == "snapshot"
    assert {o["type"] for o in outcomes} == {"accepted"}, outcomes
    assert sorted(o["key"] for o in outcomes) == sorted(f"v{t['id']}" for t in turns)
    assert all(not o["replayed"] for o in outcomes)
    events = [line for line in lines if line["type"] == "event"]
    first = lines[0]["id"]
    assert events == ndjson(g.url, match_id, seat, token, first)
    assert [e["id"] for e in events] == list(range(first + 1, len(log) + 1))
    body = b"\n".join(json.dumps(line).encode() for line in lines)
    states = states_by_version(log)
    assert check(f"socket of seat {seat}", seat, "/stream", body, states, log) > 20


# -- resuming ----------------------------------------------------------------------------------


def _move(t: Table, http: httpx.Client, key: str) -> int:
    """Play the first legal move of whoever is to move, through POST /moves; the new version."""
    state = fold(t.g.log(t.match_id))
    mover = state.turn
    assert mover is not None
    move = body_of(legal_moves(state)[0])
    r = http.post(
        f"{t.g.url}{t.path(mover, 'moves')}",
        json=move,
        headers={**t.auth(mover), "idempotency-key": key},
    )
    assert r.status_code == 200, r.text
    version: int = r.json()["version"]
    return version


def test_a_socket_cut_and_opened_again_with_after_misses_nothing_and_repeats_nothing(
    gateways: Gateways,
) -> None:
    """Lines read up to version k, the socket cut, the match moved on meanwhile: the socket
    opened with ?after=k sends k+1.. once each, as the NDJSON stream resumed there does."""
    t = Table(gateways)
    g = t.g
    url = ws(g.url, t.match_id, 0)

    async def run() -> tuple[int, list[dict[str, Any]], int]:
        with httpx.Client(timeout=10) as http:
            async with opening(url, t.tokens[0]) as sock:
                first = await lines_until(sock, 2)
                assert first[0]["type"] == "snapshot"
                for i in range(3):
                    await asyncio.to_thread(_move, t, http, f"a{i}")
                seen = await lines_until(sock, 5)
            k = seen[-1]["id"]  # cut after the line at version k
            for i in range(3):
                await asyncio.to_thread(_move, t, http, f"b{i}")
            last = len(await t.log())  # a move may make more than one event
            async with opening(f"{url}?after={k}", t.tokens[0]) as sock:
                again = await lines_until(sock, last)
                with contextlib.suppress(TimeoutError):  # nothing more but a turn: no repeat
                    while True:
                        again.append((await frame(sock, 0.5))["line"])
        return k, again, last

    k, again, last = asyncio.run(run())
    events = [line for line in again if line["type"] == "event"]
    assert [e["id"] for e in events] == list(range(k + 1, last + 1))
    assert all(line["type"] in ("event", "turn") for line in again), again
    assert events == [
        line for line in asyncio.run(_resumed(g.url, t, k, last)) if line["type"] == "event"
    ]


async def _resumed(url: str, t: Table, after: int, upto: int) -> list[dict[str, Any]]:
    """The seat 0 NDJSON stream resumed after ``after``, up to version ``upto``."""
    got: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream(
            "GET", f"{url}{t.path(0, 'stream')}", params={"after": after}, headers=t.auth(0)
        ) as r,
    ):
        async for raw in r.aiter_lines():
            if raw.strip():
                got.append(json.loads(raw))
                if got[-1]["id"] >= upto and got[-1]["type"] == "event":
                    return got
    return got


# -- outcomes and errors -----------------------------------------------------------------------


def test_a_moves_outcome_frames_accepted_rejected_with_reason_and_rule_and_replayed(
    gateways: Gateways,
) -> None:
    """Out of turn is rejected not_your_turn (C4), a draw in Express draw_in_express (E1); a
    legal move accepted, the same key again its replay at the same version, and the same key
    for another move idempotency_key_reused; each frame under the key it answers."""
    t = Table(gateways, rules={"family": "express"})
    g = t.g
    state = fold(g.log(t.match_id))
    mover = state.turn
    assert mover is not None
    other = 1 - mover
    legal = body_of(legal_moves(state)[0])

    async def run() -> list[dict[str, Any]]:
        out = []
        async with (
            opening(ws(g.url, t.match_id, mover), t.tokens[mover]) as mine,
            opening(ws(g.url, t.match_id, other), t.tokens[other]) as theirs,
        ):
            await theirs.send(json.dumps({"type": "move", "key": "c4", "move": legal}))
            out.append(await answer(theirs))
            for key, move in (("e1", {"type": "draw_tile"}), ("ok", legal), ("ok", legal)):
                await mine.send(json.dumps({"type": "move", "key": key, "move": move}))
                out.append(await answer(mine))
            await mine.send(json.dumps({"type": "move", "key": "ok", "move": {"type": "resign"}}))
            out.append(await answer(mine))
        return out

    c4, e1, accepted, replayed, reused = asyncio.run(run())
    assert c4["type"] == "rejected" and (c4["reason"], c4["rule"]) == ("not_your_turn", "C4")
    assert (c4["key"], c4["seat"], c4["match_id"]) == ("c4", other, t.match_id)
    assert e1["type"] == "rejected" and (e1["reason"], e1["rule"]) == ("draw_in_express", "E1")
    assert e1["message"] and e1["key"] == "e1"
    assert accepted == {**accepted, "type": "accepted", "key": "ok", "replayed": False}
    assert replayed == {**accepted, "replayed": True}
    assert reused["type"] == "error" and reused["error"] == "idempotency_key_reused"
    assert reused["key"] == "ok"
    assert len(g.log(t.match_id)) == accepted["version"]  # applied once, the resign never


def test_bad_frames_each_get_their_error_frame_and_the_socket_plays_on(
    gateways: Gateways,
) -> None:
    """Not JSON, not an object, an unknown type, a frame over the body limit, a move for the
    other seat, a bad key: each gets its typed error frame (with its key when it had one), and
    a move sent after them is accepted."""
    t = Table(gateways)
    g = t.g
    state = fold(g.log(t.match_id))
    mover = state.turn
    assert mover is not None
    legal = body_of(legal_moves(state)[0])
    big = json.dumps({"type": "move", "key": "big", "move": {"type": "pass_turn"}, "x": "y" * 5000})
    sent = [
        "{not json",
        "[1, 2]",
        json.dumps({"type": "castle", "key": "k1"}),
        big,
        json.dumps({"type": "move", "key": "k2", "seat": 1 - mover, "move": legal}),
        json.dumps({"type": "move", "key": "no spaces", "move": legal}),
        json.dumps({"type": "move", "key": "k3", "move": {"type": "castle"}}),
    ]

    async def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with opening(ws(g.url, t.match_id, mover), t.tokens[mover]) as sock:
            errors = []
            for text in sent:
                await sock.send(text)
                errors.append(await answer(sock))
            await sock.send(json.dumps({"type": "move", "key": "k4", "move": legal}))
            return errors, await answer(sock)

    errors, played = asyncio.run(run())
    assert [e["type"] for e in errors] == ["error"] * len(sent), errors
    assert [(e["error"], e["key"]) for e in errors] == [
        ("bad_json", None),
        ("bad_frame", None),
        ("unknown_type", "k1"),
        ("frame_too_large", None),
        ("wrong_seat", "k2"),
        ("bad_idempotency_key", "no spaces"),
        ("invalid_move", "k3"),
    ]
    assert all(e["message"] for e in errors)
    assert played["type"] == "accepted" and played["key"] == "k4"


def test_a_flood_of_frames_is_answered_with_limit_frames_one_answer_a_frame(
    gateways: Gateways,
) -> None:
    """Forty moves sent at once to the gateway of tight limits (6 at once, 4 a second): every
    frame is answered, the first few by the referee, the rest limited (moves_per_second) with
    a retry_after, and nothing is queued beyond the frames sent."""
    g = gateways
    t = Table(g)
    state = fold(g.log(t.match_id))
    mover = state.turn
    assert mover is not None
    strict = ws(g.strict_url, t.match_id, mover)

    async def run() -> list[dict[str, Any]]:
        async with opening(strict, t.tokens[mover]) as sock:
            for i in range(40):
                up = {"type": "move", "key": f"f{i}", "move": {"type": "draw_tile"}}
                await sock.send(json.dumps(up))
            return [await answer(sock, 20) for _ in range(40)]

    answers = asyncio.run(run())
    assert sorted(a["key"] for a in answers) == sorted(f"f{i}" for i in range(40))
    limited = [a for a in answers if a["type"] == "limited"]
    assert len(limited) >= 30, answers
    assert {a["limit"] for a in limited} <= {"moves_per_second", "rejected_moves"}
    assert all(a["retry_after"] > 0 and a["message"] for a in limited)
    assert {a["type"] for a in answers} == {"rejected", "limited"}


# -- refusals ----------------------------------------------------------------------------------


def _refused(url: str, token: str | None, **headers: str) -> tuple[int, dict[str, Any]]:
    async def run() -> tuple[int, dict[str, Any]]:
        try:
            async with opening(url, token, **headers):
                pass
        except InvalidStatus as e:
            r = e.response
            assert r.headers["Domino-Protocol"] == "1"
            return r.status_code, json.loads(r.body)
        raise AssertionError("the socket was accepted")

    return asyncio.run(run())


def test_bad_auth_a_version_not_spoken_and_a_limit_are_refused_before_the_upgrade(
    gateways: Gateways,
) -> None:
    """An unknown token, another seat's, Domino-Protocol 2, a resume point not reached yet, and
    a third socket of a seat on the gateway of two streams a token: each refused with the HTTP
    answer the seat's stream would get; a GET without the upgrade is 426. (No token at all is
    a browser's socket: see the hello test.)"""
    g = gateways
    t = Table(g)
    url = ws(g.url, t.match_id, 0)
    for token, status, error in (
        ("not-a-token", 401, "unauthorized"),
        (t.tokens[1], 403, "wrong_seat"),
    ):
        got, body = _refused(url, token)
        assert (got, body["error"]) == (status, error), body
    status, body = _refused(url, t.tokens[0], **{"Domino-Protocol": "2"})
    assert (status, body["error"], body["supported"]) == (400, "unsupported_protocol", [1])
    status, body = _refused(f"{url}?after=999", t.tokens[0])
    assert (status, body["error"]) == (400, "bad_resume")
    r = httpx.get(f"{g.url}{t.path(0, 'socket')}", headers=t.auth(0))
    assert (r.status_code, r.json()["error"]) == (426, "upgrade_required")
    strict = ws(g.strict_url, t.match_id, 0)

    async def third() -> None:
        async with opening(strict, t.tokens[0]), opening(strict, t.tokens[0]):
            status, body = await asyncio.to_thread(_refused, strict, t.tokens[0])
            assert (status, body["error"], body["limit"]) == (
                429,
                "rate_limited",
                "streams_per_token",
            )

    asyncio.run(third())


def test_a_socket_opened_without_a_header_is_opened_by_its_hello_frame_or_closed_4000_plus(
    gateways: Gateways,
) -> None:
    """A handshake with no Authorization (a browser's) is accepted; a hello with the seat's
    token opens the seat (its snapshot, then a move answered); a hello with an unknown token
    is closed 4401 after its error frame, another seat's 4403, a first frame that is no hello
    4400, and no frame at all 4408 once HELLO_S has passed."""
    g = gateways
    t = Table(g)
    state = fold(g.log(t.match_id))
    mover = state.turn
    assert mover is not None
    url = ws(g.url, t.match_id, mover)
    legal = body_of(legal_moves(state)[0])

    async def opened() -> tuple[dict[str, Any], dict[str, Any]]:
        async with opening(url, None) as sock:
            await sock.send(json.dumps({"type": "hello", "token": t.tokens[mover]}))
            first = await frame(sock)
            await sock.send(json.dumps({"type": "move", "key": "h1", "move": legal}))
            return first, await answer(sock)

    async def refused(first: str | None) -> tuple[list[dict[str, Any]], int | None]:
        got: list[dict[str, Any]] = []
        async with opening(url, None) as sock:
            if first is not None:
                await sock.send(first)
            try:
                while True:
                    got.append(await frame(sock, HELLO_S + 5))
            except ConnectionClosed as e:
                return got, None if e.rcvd is None else e.rcvd.code

    first, played = asyncio.run(opened())
    assert first["line"]["type"] == "snapshot" and first["seat"] == mover
    assert (played["type"], played["key"]) == ("accepted", "h1")
    for sent, code, error in (
        (json.dumps({"type": "hello", "token": "not-a-token"}), 4401, "unauthorized"),
        (json.dumps({"type": "hello", "token": t.tokens[1 - mover]}), 4403, "wrong_seat"),
        (json.dumps({"type": "move", "key": "h2", "move": legal}), 4400, "hello_expected"),
        (None, 4408, "hello_timeout"),
    ):
        got, closed = asyncio.run(refused(sent))
        assert closed == code, (sent, got)
        assert [f["error"] for f in got] == [error], got
    assert len(g.log(t.match_id)) == played["version"]  # the refused move was never sent


# -- how a socket ends -------------------------------------------------------------------------


def test_rotating_the_account_token_closes_its_socket_with_the_closing_line_and_its_code(
    gateways: Gateways,
) -> None:
    """A seat taken with an account token, its socket opened with that token: the token
    rotated, the socket gets the stream's closing line (token_rotated) and is closed with
    4001 within a second."""
    g = gateways
    _, token = register(g.url, unique("sock"))
    match_id = create(g.url, [None, "greedy"], deadline_ms=60000)
    r = httpx.post(f"{g.url}{API}/matches/{match_id}/join", json={"seat": 0}, headers=auth(token))
    assert r.status_code == 201, r.text

    async def run() -> tuple[float, list[dict[str, Any]], int | None]:
        got: list[dict[str, Any]] = []
        async with opening(ws(g.url, match_id, 0), token) as sock:
            got.append(await frame(sock))  # open: its snapshot came
            await asyncio.sleep(0.2)
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.post(f"{g.url}{API}/account/token", headers=auth(token))
                assert r.status_code == 200, r.text
            rotated = time.monotonic()
            try:
                while True:
                    got.append(await frame(sock, 5))
            except ConnectionClosed as e:
                return time.monotonic() - rotated, got, None if e.rcvd is None else e.rcvd.code
        raise AssertionError("unreachable")

    took, got, code = asyncio.run(run())
    assert took < 1.0, took
    assert got[-1]["type"] == "closed" and got[-1]["reason"] == "token_rotated", got[-1]
    assert code == CLOSE_CODES["token_rotated"] == 4001


def test_a_socket_opened_before_its_match_starts_waits_and_closes_4005_when_it_is_called_off(
    gateways: Gateways,
) -> None:
    """A seat's socket on a lobby match still waiting: its snapshot at id 0 with no view;
    the operator calls the match off, and the socket gets the closing line (seat_ended) and
    is closed with 4005."""
    g = gateways
    match_id = create(g.url, [None, None], rules={"players": 2})
    seat, token = join(g.url, match_id)

    async def run() -> tuple[list[dict[str, Any]], int | None]:
        got: list[dict[str, Any]] = []
        async with opening(ws(g.url, match_id, seat), token) as sock:
            got.append(await frame(sock))
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.delete(f"{g.url}{API}/matches/{match_id}", headers=auth(OPERATOR))
                assert r.status_code == 200, r.text
            try:
                while True:
                    got.append(await frame(sock, 5))
            except ConnectionClosed as e:
                return got, None if e.rcvd is None else e.rcvd.code

    got, code = asyncio.run(run())
    assert got[0]["line"] == {
        "type": "snapshot",
        "id": 0,
        "match_id": match_id,
        "seat": seat,
        "view": None,
        "deadline": None,
        "remaining_ms": None,
    }
    assert got[-1]["type"] == "closed" and got[-1]["reason"] == "seat_ended", got
    assert code == CLOSE_CODES["seat_ended"] == 4005


@pytest.fixture(scope="module")
def small_buffer(gateways: Gateways) -> Iterator[str]:
    """A gateway whose streams' send queues hold BUFFER bytes, one stream a seat, and
    PER_ADDRESS connections from one address."""
    env = {
        **PLAY_LIMITS,
        "DOMINO_GATEWAY_STREAM_BUFFER_BYTES": str(BUFFER),
        "DOMINO_GATEWAY_STREAMS_PER_TOKEN": "1",
        "DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
    }
    with gateways.spawned("gateway-socket-buffer", free_port(), env) as url:
        yield url


def test_a_client_that_never_reads_is_cut_with_its_close_code(
    gateways: Gateways, small_buffer: str
) -> None:
    """A socket whose client stops reading after the handshake (a TCP receive buffer of 1 KiB,
    never read) while the match goes on: once its lines are over the send queue the gateway
    frees its place (a stream of the seat opens again) and, when the client reads at last,
    the socket was closed with 4008 (too_slow)."""
    g = gateways
    t = Table(g, rules={"family": "straight", "target": 1000})
    uri = parse_uri(ws(small_buffer, t.match_id, 0))
    client = ClientProtocol(uri, max_size=None)
    request = client.connect()
    request.headers["Authorization"] = f"Bearer {t.tokens[0]}"
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    raw.connect((uri.host, uri.port))
    raw.settimeout(10)
    client.send_request(request)
    raw.sendall(b"".join(client.data_to_send()))
    answered: list[Response] = []
    while not answered:
        client.receive_data(raw.recv(4096))
        answered += [e for e in client.events_received() if isinstance(e, Response)]
    assert answered[0].status_code == 101, answered[0]
    stream = f"{small_buffer}{t.path(0, 'stream')}"

    def opens() -> bool:
        with httpx.stream("GET", stream, headers=t.auth(0), params={"after": "0"}) as r:
            return r.status_code == 200

    try:
        with httpx.Client(timeout=10) as http:
            assert not opens()  # the socket holds the seat's one place
            for i in range(400):
                _move(t, http, f"m{i}")
                if i % 10 == 9 and opens():
                    break
            else:
                pytest.fail("the socket of a client that never read was never cut")
        code = None
        deadline = time.monotonic() + 15
        while code is None and time.monotonic() < deadline:
            data = raw.recv(65536)
            client.receive_data(data)
            for event in client.events_received():
                if getattr(event, "opcode", None) is Opcode.CLOSE:
                    code = client.close_rcvd.code if client.close_rcvd else None
            if not data:
                break
        assert code == CLOSE_CODES["too_slow"] == 4008
    finally:
        raw.close()


def test_a_socket_holds_its_connections_place_while_open_and_gives_it_back_when_closed(
    gateways: Gateways, small_buffer: str
) -> None:
    """Sockets opened and closed one after another, three times the cap per address: the
    gateway still answers; PER_ADDRESS sockets open at once (one a seat, of four matches of
    two seats): the next connection from the address is refused 503 until one closes."""
    g = gateways
    tables = [Table(g) for _ in range(PER_ADDRESS // 2)]
    seats = [(t, seat) for t in tables for seat in (0, 1)]

    async def run() -> None:
        for i in range(3 * PER_ADDRESS):
            t, seat = seats[i % len(seats)]
            async with opening(ws(small_buffer, t.match_id, seat), t.tokens[seat]) as sock:
                await frame(sock)
            await asyncio.sleep(0.05)  # its place in Redis is given back as it closes
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{small_buffer}/healthz")).status_code == 200
        async with contextlib.AsyncExitStack() as stack:
            for t, seat in seats:
                url = ws(small_buffer, t.match_id, seat)
                sock = await stack.enter_async_context(opening(url, t.tokens[seat]))
                assert sock.response.headers["Domino-Protocol"] == "1"
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.get(f"{small_buffer}/healthz")
                assert (r.status_code, r.json()["error"]) == (
                    503,
                    "too_many_connections_from_address",
                )
        deadline = time.monotonic() + 5
        async with httpx.AsyncClient(timeout=10) as http:
            while (await http.get(f"{small_buffer}/healthz")).status_code != 200:
                assert time.monotonic() < deadline, "the sockets' places were not given back"
                await asyncio.sleep(0.1)

    asyncio.run(run())
