"""The account socket (docs/protocol.md, "The account channel"): one WebSocket that carries an
account's feed and every seat it holds down, each frame under its cursor, and its moves up.
Real gateways, a real WebSocket client (websockets); for the client that never reads, a raw
TCP socket that stops reading after the handshake."""

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
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from engine.game import legal_moves
from services.gateway.protocol import API
from services.gateway.socket_common import CLOSE_CODES
from tests.gateway.account_channel import (
    Frame,
    Reader,
    check_exact,
    move_up,
    opening,
    recv,
    socket_session,
    socket_url,
)
from tests.gateway.conftest import (
    PLAY_LIMITS,
    Gateways,
    create,
    free_port,
    states_by_version,
    wait_for_version,
)
from tests.gateway.test_accounts import auth, register, unique
from tests.gateway.test_leak import check
from tests.gateway.test_protocol_fixes import body_of
from tests.service.conftest import fold

pytestmark = pytest.mark.service

BUFFER = 4096
"""The send queue of the gateway the client that never reads is cut by."""

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


def test_one_account_plays_both_partner_seats_over_its_socket_each_seeing_only_its_own(
    gateways: Gateways,
) -> None:
    """Seats 0 and 2 of a four-player match held by one account, played over one socket:
    each seat's frames are its own stream's — events 1..n as that seat sees them — and no
    frame of seat 0 shows a tile of seat 2's hand, nor the other way round (C8: one account,
    two views)."""
    g = gateways
    _, token = register(g.url, unique("pair"))
    match_id = create(
        g.url,
        [None, "random", None, "greedy"],
        rules={"family": "express", "players": 4, "target": 20},
    )
    reader = Reader()

    def both_ended(r: Reader) -> bool:
        lines = r.seat_lines()
        return all(
            any(line.get("event", {}).get("type") == "match_ended" for line in lines.get(k, []))
            for k in ((match_id, 0), (match_id, 2))
        )

    async def run() -> None:
        async def take_seats() -> None:
            await asyncio.sleep(0.3)
            for seat in (0, 2):
                r = await asyncio.to_thread(
                    httpx.post,
                    f"{g.url}{API}/matches/{match_id}/join",
                    json={"seat": seat},
                    headers=auth(token),
                    timeout=30,
                )
                assert r.status_code == 201, r.text

        joining = asyncio.create_task(take_seats())
        await socket_session(g.url, token, reader, never, both_ended)
        await joining

    asyncio.run(asyncio.wait_for(run(), 120))
    log = g.log(match_id)
    states = states_by_version(log)
    assert set(reader.seat_lines()) == {(match_id, 0), (match_id, 2)}
    check_exact(g, token, reader, {match_id})
    for (_, seat), lines in reader.seat_lines().items():
        events = [line for line in lines if line["type"] == "event"]
        assert [e["id"] for e in events] == list(range(1, len(log) + 1))
        body = b"\n".join(json.dumps(line).encode() for line in lines)
        assert check(f"account socket, seat {seat}", seat, "/stream", body, states, log) > 5
    assert {o["type"] for o in reader.answers} == {"accepted"}, reader.answers


# -- hostile input -----------------------------------------------------------------------------


def _refused(url: str, token: str | None, **headers: str) -> tuple[int, dict[str, Any]]:
    """The HTTP answer a handshake was refused with."""

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


def _stream_refused(url: str, token: str, cursor: str) -> tuple[int, dict[str, Any]]:
    r = httpx.get(
        f"{url}{API}/account/stream",
        params={"play": "1", "cursor": cursor},
        headers=auth(token),
        timeout=10,
    )
    return r.status_code, r.json()


def test_a_cursor_malformed_too_long_foreign_or_ahead_is_refused_400_bad_cursor(
    gateways: Gateways,
) -> None:
    """On the socket's handshake and on the account stream with play=1 alike: a cursor that is
    no cursor, longer than its seats take or naming more than twice the seats an account may
    hold at once (160 by default), naming a seat twice, a feed id beyond the feed,
    another account's seat, a seat of its own match it does not hold, or a version beyond
    the match's: each 400 bad_cursor, nothing opened. An unknown token is 401, another
    version of the protocol 400, a GET without the upgrade 426."""
    g = gateways
    _, token = register(g.url, unique("curs"))
    _, other = register(g.url, unique("othr"))
    mine = challenge_house(g.url, token)
    theirs = challenge_house(g.url, other)
    wait_for_version(g, mine, 2)
    most = 2 * 20 * 4  # twice every seat of the most live matches an account may play (20)
    many = ",".join(f"m-{i:010x}:0:1" for i in range(most + 1))
    for cursor in (
        "abc",
        "1,",
        f"1,{mine}:0",
        f"1,{mine}:x:1",
        "-1",
        "1," + "m" * 5000 + ":0:1",
        f"1,{many}",
        f"1,{mine}:0:1,{mine}:0:1",
        "99",
        f"1,{theirs}:0:1",
        f"1,{mine}:1:1",
        f"1,{mine}:0:99999",
    ):
        status, body = _refused(socket_url(g.url, cursor), token)
        assert (status, body["error"]) == (400, "bad_cursor"), (cursor[:60], body)
        assert body["message"]
        status, body = _stream_refused(g.url, token, cursor)
        assert (status, body["error"]) == (400, "bad_cursor"), (cursor[:60], body)
    # longer than its seats may take: 400 on the stream; on the socket the handshake's line is
    # over what the WebSocket's reader takes (8,192 bytes), 431 at once (it was held unanswered)
    longest = "1," + "m" * 13000 + ":0:1"
    status, body = _stream_refused(g.url, token, longest)
    assert (status, body["error"]) == (400, "bad_cursor"), body
    status, body = _refused(socket_url(g.url, longest), token)
    assert (status, body["error"]) == (431, "head_too_large"), body
    status, body = _refused(socket_url(g.url), "dab_not-a-token")
    assert (status, body["error"]) == (401, "unauthorized")
    status, body = _refused(socket_url(g.url), token, **{"Domino-Protocol": "2"})
    assert (status, body["error"]) == (400, "unsupported_protocol")
    status, body = _refused(socket_url(g.url, events="some"), token)
    assert (status, body["error"]) == (422, "invalid_query")
    r = httpx.get(f"{g.url}{API}/account/socket", headers=auth(token), timeout=10)
    assert (r.status_code, r.json()["error"]) == (426, "upgrade_required")
    r = httpx.get(f"{g.url}{API}/account/stream", params={"play": "2"}, headers=auth(token))
    assert (r.status_code, r.json()["error"]) == (422, "invalid_query")


def test_bad_frames_each_get_their_error_frame_and_the_socket_plays_on(
    gateways: Gateways,
) -> None:
    """Not JSON, not an object, an unknown type, a frame over the body limit, a move naming
    no match or a seat that is no whole number, a move for a seat of its match it does not
    hold, for another account's match, with a bad key or no move: each its typed error frame
    (under its key when it had one), nothing played; then a move of its seat is accepted."""
    g = gateways
    _, token = register(g.url, unique("junk"))
    _, other = register(g.url, unique("othr"))
    theirs = challenge_house(g.url, other)

    async def run() -> tuple[list[Frame], Frame, str]:
        async with opening(socket_url(g.url), token) as sock:
            assert (await recv(sock))["line"]["type"] == "state"
            match_id = await asyncio.to_thread(challenge_house, g.url, token)
            turn: Frame = {}
            while move_up(turn) is None:
                turn = await recv(sock)
            up = move_up(turn)
            assert up is not None
            legal = up["move"]
            sent = [
                "{not json",
                "[1, 2]",
                json.dumps({"type": "castle", "key": "k1"}),
                json.dumps({**up, "key": "big", "x": "y" * 5000}),
                json.dumps({"type": "move", "key": "k2", "seat": 0, "move": legal}),
                json.dumps({**up, "key": "k3", "seat": False}),
                json.dumps({**up, "key": "k4", "seat": 1}),
                json.dumps({**up, "key": "k5", "match_id": theirs}),
                json.dumps({**up, "key": "no spaces"}),
                json.dumps({"type": "move", "key": "k6", "match_id": match_id, "seat": 0}),
                json.dumps({**up, "key": "k7", "move": {"type": "castle"}}),
            ]
            errors = []
            for text in sent:
                await sock.send(text)
                while "cursor" in (got := await recv(sock)):
                    pass
                errors.append(got)
            await sock.send(json.dumps({**up, "key": "k8"}))
            while "cursor" in (played := await recv(sock)):
                pass
            return errors, played, match_id

    errors, played, match_id = asyncio.run(asyncio.wait_for(run(), 60))
    assert [e["type"] for e in errors] == ["error"] * len(errors), errors
    assert [(e["error"], e["key"]) for e in errors] == [
        ("bad_json", None),
        ("bad_frame", None),
        ("unknown_type", "k1"),
        ("frame_too_large", None),
        ("invalid_frame", "k2"),
        ("invalid_frame", "k3"),
        ("not_your_seat", "k4"),
        ("not_your_seat", "k5"),
        ("bad_idempotency_key", "no spaces"),
        ("invalid_frame", "k6"),
        ("invalid_move", "k7"),
    ]
    assert all(e["message"] for e in errors)
    assert (played["type"], played["key"], played["match_id"]) == ("accepted", "k8", match_id)
    commands = [env.command_id for env in g.log(match_id) if env.command_id.startswith("gw:0:")]
    assert commands == ["gw:0:k8"]
    assert not [env for env in g.log(theirs) if env.command_id.startswith("gw:0:k")]


def test_a_flood_of_frames_is_answered_with_limit_frames_one_answer_a_frame(
    gateways: Gateways,
) -> None:
    """Forty frames that play nothing and forty moves of its seat sent at once to the gateway
    of tight limits (6 at once, 4 a second): every frame is answered, most of each flood
    ``limited`` with a retry_after (moves_per_second), the junk counted against the account,
    the moves against their seat; nothing is queued beyond the frames sent."""
    g = gateways
    _, token = register(g.strict_url, unique("fld"))

    async def run() -> tuple[list[Frame], list[Frame]]:
        async with opening(socket_url(g.strict_url), token) as sock:
            assert (await recv(sock))["line"]["type"] == "state"
            match_id = await asyncio.to_thread(challenge_house, g.strict_url, token)
            for i in range(40):
                await sock.send(json.dumps({"type": "nothing", "key": f"j{i}"}))
            junk = [await _answer(sock) for _ in range(40)]
            await asyncio.sleep(2.0)
            for i in range(40):
                up = {"type": "move", "key": f"f{i}", "match_id": match_id, "seat": 0}
                await sock.send(json.dumps({**up, "move": {"type": "draw_tile"}}))
            moves = [await _answer(sock) for _ in range(40)]
            return junk, moves

    junk, moves = asyncio.run(asyncio.wait_for(run(), 90))
    for answers, stem in ((junk, "j"), (moves, "f")):
        assert sorted(a["key"] for a in answers) == sorted(f"{stem}{i}" for i in range(40))
        limited = [a for a in answers if a["type"] == "limited"]
        assert len(limited) >= 30, answers
        assert {a["limit"] for a in limited} <= {"moves_per_second", "rejected_moves"}
        assert all(a["retry_after"] > 0 and a["message"] for a in limited)
    assert {a["type"] for a in junk} == {"error", "limited"}
    assert {a["type"] for a in moves} <= {"rejected", "limited", "accepted"}
    assert all(a["match_id"] is None for a in junk if a["type"] == "limited")


async def _answer(sock: Any, timeout: float = 20.0) -> Frame:
    """The next frame without a cursor: an answer."""
    while "cursor" in (got := await recv(sock, timeout)):
        pass
    return got


def test_rotating_the_account_token_closes_its_socket_with_the_closing_frame_and_4001(
    gateways: Gateways,
) -> None:
    """The account's token rotated while its socket is open: the socket gets the closing
    frame (token_rotated) and is closed with 4001 within a second."""
    g = gateways
    _, token = register(g.url, unique("rot"))

    async def run() -> tuple[float, list[Frame], int | None]:
        got: list[Frame] = []
        async with opening(socket_url(g.url), token) as sock:
            got.append(await recv(sock))
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.post(f"{g.url}{API}/account/token", headers=auth(token))
                assert r.status_code == 200, r.text
            rotated = time.monotonic()
            try:
                while True:
                    got.append(await recv(sock, 5))
            except ConnectionClosed as e:
                return time.monotonic() - rotated, got, None if e.rcvd is None else e.rcvd.code
        raise AssertionError("unreachable")

    took, got, code = asyncio.run(run())
    assert took < 1.0, took
    assert got[-1]["type"] == "closed" and got[-1]["reason"] == "token_rotated", got[-1]
    assert code == CLOSE_CODES["token_rotated"] == 4001


def test_a_socket_opened_without_a_header_is_opened_by_its_hello_or_closed_4000_plus(
    gateways: Gateways,
) -> None:
    """No Authorization header (a browser's): a hello frame with the account token opens the
    channel (its state frame); another first frame is an error frame and 4400; a hello with a
    token that opens nothing is 4401."""
    g = gateways
    _, token = register(g.url, unique("helo"))

    async def run(first: str) -> list[Any]:
        got: list[Any] = []
        async with opening(socket_url(g.url), None) as sock:
            await sock.send(first)
            try:
                got.append(await recv(sock))
                got.append(await recv(sock, 1.5))
            except TimeoutError:
                pass
            except ConnectionClosed as e:
                got.append(None if e.rcvd is None else e.rcvd.code)
        return got

    opened = asyncio.run(run(json.dumps({"type": "hello", "token": token})))
    assert opened[0]["type"] == "account" and opened[0]["line"]["type"] == "state"
    refused = asyncio.run(run(json.dumps({"type": "move"})))
    assert refused[0]["error"] == "hello_expected" and refused[1] == 4400, refused
    unknown = asyncio.run(run(json.dumps({"type": "hello", "token": "dab_nothing"})))
    assert unknown[0]["error"] == "unauthorized" and unknown[1] == 4401, unknown


@pytest.fixture(scope="module")
def small_buffer(gateways: Gateways) -> Iterator[str]:
    """A gateway whose streams' send queues hold BUFFER bytes."""
    env = {**PLAY_LIMITS, "DOMINO_GATEWAY_STREAM_BUFFER_BYTES": str(BUFFER)}
    with gateways.spawned("gateway-account-buffer", free_port(), env) as url:
        yield url


def test_a_client_that_never_reads_is_cut_with_4008_and_its_place_given_back(
    gateways: Gateways, small_buffer: str
) -> None:
    """An account socket whose client stops reading after the handshake (a TCP receive buffer
    of 1 KiB, never read) while its match goes on (moves posted over HTTP): once its lines
    are over the send queue the gateway cuts it; when the client reads at last, the socket
    was closed with 4008 (too_slow), and the account's stream places are all free again."""
    g = gateways
    _, token = register(small_buffer, unique("slow"))
    uri = parse_uri(socket_url(small_buffer))
    client = ClientProtocol(uri, max_size=None)
    request = client.connect()
    request.headers["Authorization"] = f"Bearer {token}"
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
    try:
        r = httpx.post(
            f"{small_buffer}{API}/challenges",
            json={"opponents": ["greedy"], "rules": {"family": "straight", "target": 1000}},
            headers=auth(token),
            timeout=30,
        )
        assert r.status_code == 201, r.text
        match_id = r.json()["challenge"]["match_id"]
        with httpx.Client(timeout=10) as http:
            for i in range(400):
                if not _move_as(g, http, small_buffer, token, match_id, f"m{i}"):
                    break
                if i % 10 == 9 and _all_places_free(http, small_buffer, token):
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


def _move_as(
    g: Gateways, http: httpx.Client, url: str, token: str, match_id: str, key: str
) -> bool:
    """Play seat 0's first legal move over HTTP when it is its turn; False once it is over."""
    for _ in range(100):
        state = fold(g.log(match_id))
        if state.phase == "over":
            return False
        if state.turn == 0:
            break
        time.sleep(0.02)
    move = body_of(legal_moves(state)[0])
    r = http.post(
        f"{url}{API}/matches/{match_id}/seats/0/moves",
        json=move,
        headers={**auth(token), "Idempotency-Key": key},
    )
    assert r.status_code in (200, 409), r.text
    return True


def _all_places_free(http: httpx.Client, url: str, token: str) -> bool:
    """Whether the account's every stream place (4) opens: the cut socket gave its back."""
    with contextlib.ExitStack() as stack:
        for _ in range(4):
            r = stack.enter_context(
                http.stream("GET", f"{url}{API}/account/stream", headers=auth(token))
            )
            if r.status_code != 200:
                return False
    return True
