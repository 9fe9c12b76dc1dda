"""The gateway's connections on a real gateway process: silent ones are closed, a request's head
or body that trickles in is cut at its deadline, a cap on connections answers 503 past it, and
none of this cuts a stream, however long it is silent.

uvicorn alone closes none of these (services/gateway/connections.py says what it does and does
not do); each test here fails against it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port

pytestmark = [pytest.mark.service, pytest.mark.one_topology]

DEADLINE_S = 1.0
"""Every deadline of the gateways below: idle, head and body."""
SLACK_S = 4.0
"""What a loaded machine may add to a deadline before the test calls it missed."""
SILENT_STREAM_S = 3.0
"""The keep-alive of the gateways below: a stream is silent this long, three deadlines."""


def edge_env(**more: str) -> dict[str, str]:
    return {
        **PLAY_LIMITS,
        "DOMINO_GATEWAY_IDLE_S": str(DEADLINE_S),
        "DOMINO_GATEWAY_HEAD_S": str(DEADLINE_S),
        "DOMINO_GATEWAY_BODY_S": str(DEADLINE_S),
        "DOMINO_GATEWAY_KEEPALIVE_S": str(SILENT_STREAM_S),
        **more,
    }


@pytest.fixture(scope="module")
def edged(gateways: Gateways) -> Iterator[str]:
    """A gateway whose deadlines are all one second."""
    with gateways.spawned("gateway-edges", free_port(), edge_env()) as url:
        yield url


@pytest.fixture(scope="module")
def capped(gateways: Gateways) -> Iterator[str]:
    """A gateway that keeps at most three connections open, with a one second keep-alive."""
    env = edge_env(DOMINO_GATEWAY_MAX_CONNECTIONS="3", DOMINO_GATEWAY_KEEPALIVE_S="1")
    with gateways.spawned("gateway-capped", free_port(), env) as url:
        yield url


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


@contextlib.contextmanager
def sockets(url: str, n: int) -> Iterator[list[socket.socket]]:
    opened = [socket.create_connection(address(url), timeout=5.0) for _ in range(n)]
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


def closed_within(s: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the peer closes or ``seconds`` pass: (whether it closed, what it sent)."""
    got = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([s], [], [], left)
        if not readable:
            break
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return True, got
        if not chunk:
            return True, got
        got += chunk
    return False, got


def spectate_request(match_id: str) -> bytes:
    return (f"GET /api/v1/matches/{match_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").encode()


def test_connections_that_never_send_a_byte_are_closed_after_the_idle_time(edged: str) -> None:
    with sockets(edged, 200) as silent:
        started = time.monotonic()
        still_open = [s for s in silent if not closed_within(s, DEADLINE_S + SLACK_S)[0]]
        took = time.monotonic() - started
        assert not still_open, f"{len(still_open)} of 200 silent connections are still open"
        assert took >= DEADLINE_S * 0.8 - 0.05
    assert httpx.get(f"{edged}/healthz").status_code == 200


def test_a_connection_idle_between_two_requests_is_closed(edged: str) -> None:
    with sockets(edged, 1) as (s,):
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        closed, got = closed_within(s, DEADLINE_S + SLACK_S)
        assert got.startswith(b"HTTP/1.1 200"), got[:100]
        assert closed


def test_a_request_head_sent_a_byte_at_a_time_is_cut_at_its_deadline(edged: str) -> None:
    with sockets(edged, 1) as (s,):
        s.setblocking(False)
        started = time.monotonic()
        s.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        got, closed = b"", False
        # a header line every 0.2 s: each byte would restart an idle timer, never the deadline
        while not closed and time.monotonic() - started < DEADLINE_S + SLACK_S:
            with contextlib.suppress(BlockingIOError):
                try:
                    s.send(b"X-Slow: 1\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
            time.sleep(0.2)
            with contextlib.suppress(BlockingIOError):
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    closed = True
                    break
                got += chunk
                closed = not chunk
        took = time.monotonic() - started
    assert closed, f"a head still trickling in after {took:.1f} s was not cut"
    assert took >= DEADLINE_S * 0.8
    if got:  # the 408 may be lost to a reset while we were still writing
        assert got.startswith(b"HTTP/1.1 408"), got[:200]
        assert b"request_timeout" in got


def test_a_request_body_that_does_not_arrive_is_cut_at_its_deadline(edged: str) -> None:
    with sockets(edged, 1) as (s,):
        s.sendall(
            b"POST /api/v1/matches HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"seats": '
        )
        started = time.monotonic()
        closed, _ = closed_within(s, DEADLINE_S + SLACK_S)
        took = time.monotonic() - started
    assert closed, "a body 90 bytes short still holds its connection"
    assert took >= DEADLINE_S * 0.8


def test_a_silent_stream_outlives_every_deadline(edged: str) -> None:
    match_id = create(edged, [None, None], rules={"players": 2})
    with sockets(edged, 1) as (s,):
        s.sendall(spectate_request(match_id))
        started = time.monotonic()
        closed, got = closed_within(s, SILENT_STREAM_S + 1.5)
        assert not closed, f"the stream was cut after {time.monotonic() - started:.1f} s"
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
        head, _, body = got.partition(b"\r\n\r\n")
        assert b"application/x-ndjson" in head
        # silent for longer than every deadline, and then its keep-alive came through
        assert body.endswith(b"\n")


def test_past_the_cap_new_connections_get_503_while_open_streams_go_on(capped: str) -> None:
    match_id = create(capped, [None, None], rules={"players": 2})
    with sockets(capped, 3) as streams:
        for s in streams:
            s.sendall(spectate_request(match_id))
        for s in streams:
            closed, got = closed_within(s, 0.5)
            assert not closed and got.startswith(b"HTTP/1.1 200"), got[:200]
        refused = httpx.get(f"{capped}/healthz")
        assert refused.status_code == 503
        assert refused.json()["error"] == "too_many_connections"
        assert refused.headers["retry-after"] == "1"
        # the streams over which the cap was reached are untouched: keep-alives keep coming
        for s in streams:
            closed, got = closed_within(s, 2.5)
            assert not closed and got, "a stream stopped when the cap was reached"
        # a connection over the cap that says nothing is closed too
        with sockets(capped, 1) as (quiet,):
            assert closed_within(quiet, 1.0 + SLACK_S)[0]
        streams[0].close()
        deadline = time.monotonic() + SLACK_S
        while httpx.get(f"{capped}/healthz").status_code != 200:
            assert time.monotonic() < deadline, "a closed stream did not free its place"
            time.sleep(0.1)


def test_a_request_head_over_its_size_is_refused_431_and_closed(edged: str) -> None:
    with sockets(edged, 1) as (s,):
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(200):  # 200 KB of headers, sent at once: no deadline helps
                s.sendall(b"X-Padding: " + b"x" * 1000 + b"\r\n")
        closed, got = closed_within(s, SLACK_S)
    assert closed, "a head of 200 KB is still being read"
    if got:  # the answer may be lost to a reset while we were still writing
        assert got.startswith(b"HTTP/1.1 431"), got[:200]
        assert b"head_too_large" in got


def test_a_long_url_within_the_head_size_is_answered(edged: str) -> None:
    r = httpx.get(f"{edged}/api/v1/matches/{'m' * 20_000}")
    assert r.status_code == 404  # not 431: a head of 20 KB is allowed
