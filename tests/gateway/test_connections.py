"""The gateway's connections on a real gateway process: silent ones are closed, a request's head
or body that trickles in is cut at its deadline, a cap on connections answers 503 past it, so
does a cap per client address, and none of this cuts a stream, however long it is silent.

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

from services.gateway.config import GatewaySettings
from services.gateway.connections import Proxies, address_group
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port

pytestmark = [pytest.mark.service]

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


PER_ADDRESS = 4
"""The cap per client address of the gateway below; its cap on all connections is three times
as many."""
PROXY = "127.0.0.4"
"""The trusted proxy of the gateway below."""


@pytest.fixture(scope="module")
def per_address(gateways: Gateways) -> Iterator[str]:
    """A gateway that keeps at most four connections open per client address and twelve in
    all, whose silent connections stay open 30 s (as long as any test here holds them), and
    that trusts a proxy at 127.0.0.4."""
    env = edge_env(
        DOMINO_GATEWAY_IDLE_S="30",
        DOMINO_GATEWAY_MAX_CONNECTIONS=str(3 * PER_ADDRESS),
        DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS=str(PER_ADDRESS),
        DOMINO_GATEWAY_TRUSTED_PROXIES=PROXY,
    )
    with gateways.spawned("gateway-per-address", free_port(), env) as url:
        yield url


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


@contextlib.contextmanager
def sockets(url: str, n: int, source: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    """``n`` connections to the gateway at ``url``, from the loopback address ``source``."""
    opened = [
        socket.create_connection(address(url), timeout=5.0, source_address=(source, 0))
        for _ in range(n)
    ]
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


def health(url: str, source: str) -> httpx.Response:
    """GET /healthz from the loopback address ``source``, on a connection of its own."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as http:
        return http.get(f"{url}/healthz")


def ask(opened: list[socket.socket]) -> None:
    """Send GET /healthz on each connection (one the gateway closed already takes it too)."""
    for s in opened:
        with contextlib.suppress(OSError):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")


def answers(opened: list[socket.socket]) -> list[bytes]:
    """What each connection answered, read until it closed or went quiet for half a second
    (b"" from one the gateway had closed before it was asked)."""
    got = []
    for s in opened:
        try:
            got.append(closed_within(s, 0.5)[1])
        except OSError:
            got.append(b"")
    return got


def test_one_host_holding_idle_connections_past_its_cap_leaves_room_for_others(
    per_address: str,
) -> None:
    """Twenty silent connections from 127.0.0.2 (the whole gateway's cap is twelve): four are
    kept, the rest refused, and another host is still answered."""
    with sockets(per_address, 20, source="127.0.0.2") as held:
        ask(held)  # at once: a refused connection is closed after a second of silence
        for _ in range(3):
            assert health(per_address, "127.0.0.3").status_code == 200
        got = answers(held)
        served = [a for a in got if a.startswith(b"HTTP/1.1 200")]
        refused = [a for a in got if not a.startswith(b"HTTP/1.1 200")]
        assert len(served) == PER_ADDRESS, [a[:40] for a in got]
        # a refused connection that speaks within its second of grace is told why
        for answer in refused:
            if answer:
                assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
                assert b"too_many_connections_from_address" in answer
                assert b"retry-after: 1" in answer.lower()
        assert any(refused), "no refused connection was answered 503"
        r = health(per_address, "127.0.0.2")
        assert r.status_code == 503
        assert r.json()["error"] == "too_many_connections_from_address"
        assert r.headers["retry-after"] == "1"
        assert health(per_address, "127.0.0.3").status_code == 200
    # the address's connections closed, it has its places back
    deadline = time.monotonic() + SLACK_S
    while health(per_address, "127.0.0.2").status_code != 200:
        assert time.monotonic() < deadline, "closed connections did not free their address's places"
        time.sleep(0.1)


def test_the_cap_per_address_counts_connections_open_at_once_not_connections_made(
    per_address: str,
) -> None:
    """Many short requests from one address, one connection after another, are all answered."""
    for _ in range(3 * PER_ADDRESS):
        assert health(per_address, "127.0.0.5").status_code == 200


def test_a_trusted_proxy_is_not_held_to_the_cap_per_address(per_address: str) -> None:
    """The proxy's connections carry many clients: it caps them itself."""
    with sockets(per_address, 2 * PER_ADDRESS, source=PROXY) as through_proxy:
        ask(through_proxy)
        got = answers(through_proxy)
    assert all(a.startswith(b"HTTP/1.1 200") for a in got), [a[:40] for a in got]


@pytest.mark.parametrize(
    ("peer", "counted_as"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_an_ipv6_peer_counts_with_its_whole_64_and_an_ipv4_peer_alone(
    peer: str, counted_as: str
) -> None:
    assert address_group(peer) == counted_as


def test_trusted_proxies_are_matched_by_address_or_network() -> None:
    proxies = Proxies.of("10.0.0.0/8, 192.0.2.1,2001:db8::/32, unix:/run/proxy.sock")
    assert "10.1.2.3" in proxies
    assert "192.0.2.1" in proxies and "192.0.2.2" not in proxies
    assert "::ffff:10.1.2.3" in proxies
    assert "2001:db8:ffff::1" in proxies and "2001:db9::1" not in proxies
    assert "unix:/run/proxy.sock" not in proxies  # a peer with an address is matched by it
    assert "203.0.113.7" in Proxies.of("*")
    assert "127.0.0.1" not in Proxies.of("")


@pytest.fixture(scope="module")
def default_caps(gateways: Gateways) -> Iterator[str]:
    """A gateway with the default caps on connections (in all and per address), whose silent
    connections are kept for a minute: as long as a host holding them wants."""
    defaults = GatewaySettings()
    env = edge_env(
        DOMINO_GATEWAY_IDLE_S="60",
        DOMINO_GATEWAY_HEAD_S="60",
        DOMINO_GATEWAY_MAX_CONNECTIONS=str(defaults.max_connections),
        DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS=str(defaults.max_connections_per_address),
    )
    with gateways.spawned("gateway-default-caps", free_port(), env) as url:
        yield url


def test_two_hosts_holding_thousands_of_idle_sockets_leave_a_third_answered(
    default_caps: str,
) -> None:
    """The hostile finding as it was made: 2 x 2,500 silent sockets from two addresses, more
    than the gateway's whole cap (4,096). Each address is held to its own cap (256), so a
    third host is answered all along, and each flooding host is told why it is refused."""
    defaults = GatewaySettings()
    assert defaults.max_connections < 2 * 2_500
    with (
        sockets(default_caps, 2_500, source="127.0.0.2"),
        sockets(default_caps, 2_500, source="127.0.0.3"),
    ):
        for _ in range(3):
            assert health(default_caps, "127.0.0.5").status_code == 200
        for flooder in ("127.0.0.2", "127.0.0.3"):
            r = health(default_caps, flooder)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "too_many_connections_from_address"
