"""The gateway's connections: deadlines on what a client sends, and a cap on how many are open.

What uvicorn (0.54, its httptools protocol) does on its own, read in its source: it arms its
keep-alive timer (``timeout_keep_alive``) only once a response is complete, so a connection
that is accepted and never sends a byte stays open for ever; any byte cancels that timer and
nothing re-arms it until a response ends, so a request head sent a byte at a time (slowloris)
or a body that never arrives holds its connection for ever too. Its ``limit_concurrency``
answers 503 to a request once the connections *and* tasks reach it, but only after that
request's head has arrived: the connection itself is accepted and held.

:class:`GuardedHttp` is uvicorn's httptools protocol with what is missing:

- a connection with no request under way (just accepted, or between two requests) is closed
  after ``idle_s`` without a byte (the first case is new; the second is uvicorn's keep-alive);
- a request's head must be complete ``head_s`` after its first byte, whatever trickles in
  meanwhile (a 408, then the connection is closed);
- a request's head may be at most :data:`MAX_HEAD_BYTES` (431, closed): httptools sets no
  bound on a URL or on headers, which would grow in memory as fast as a client sends them;
- a request's body must be complete ``body_s`` after its head (the connection is closed);
- past ``max_connections`` open at once, a new connection is answered 503 (``Retry-After``)
  as soon as it speaks, and closed; one that does not speak is closed after a second;
- so is a new connection from a client address that has ``per_address`` open already, so
  that a few hosts cannot take every place: an IPv4 address counts alone, an IPv6 address
  with its whole /64 (the block one host or one site is given, which it may roam freely).

The address is the connection's peer: the connection is accepted before any request names a
client. A trusted reverse proxy (``DOMINO_GATEWAY_TRUSTED_PROXIES``) is the peer of all its
clients' connections, pooled and reused across them, so it is not counted per address: the
proxy caps its clients' connections itself (``deploy/nginx/``: ``limit_conn``).

None of these deadlines runs while a response is being written: a stream (NDJSON, SSE) that
has started lives as long as its match, however long its silences.
A connection upgraded to a WebSocket (the seat's socket, services/gateway/sockets.py) leaves
the request's deadlines behind and keeps its place under both caps until it is closed; its
kernel send buffer is held to :data:`SOCKET_SEND_BUFFER`, so a client that stops reading is
found by the socket's own queue, not hidden behind megabytes of the kernel's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import resource
from collections.abc import Callable
from dataclasses import dataclass
from socket import SO_SNDBUF, SOL_SOCKET
from typing import Any, ClassVar, cast

import structlog
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from services.gateway.versions import STATED
from services.metrics import GATEWAY_CONNECTIONS, GATEWAY_CONNECTIONS_CLOSED

log = structlog.get_logger()

REFUSED_GRACE_S = 1.0
"""How long a connection over the cap may take to send its request before it is closed."""
MAX_HEAD_BYTES = 32 * 1024
"""The most a request's line and headers may take, counted by the reads that carry them."""
SOCKET_LINE = 8192
"""The longest line of a WebSocket's handshake (its request line, each header line, with their
CRLF), and SOCKET_HEADERS the most headers: the limits of the WebSocket library that reads the
handshake once it is upgraded (websockets' MAX_LINE_LENGTH and MAX_NUM_HEADERS), which drops a
handshake past them without an answer, so the gateway refuses it first."""
SOCKET_HEADERS = 128
SPARE_FILES = 512
SOCKET_SEND_BUFFER = 64 * 1024
"""The kernel's send buffer of a WebSocket's connection (Linux doubles it for its own books).
Left to itself Linux grows a connection's buffer to megabytes (tcp_wmem) for a client that
does not read, and the socket's own queue (DOMINO_GATEWAY_STREAM_BUFFER_BYTES) would fill
only after them: bounded, a client that stops reading is found a few hundred KB behind."""
"""Files the gateway process needs besides its clients' connections: Redis, logs, modules."""


def _head(status: bytes, *headers: bytes) -> bytes:
    """The head of an answer made before any request is read (so in the gateway's own version
    of the protocol), its Content-Length left as ``%d``."""
    lines = [b"HTTP/1.1 " + status, b"content-type: application/json", b"%s: %s" % STATED]
    lines += [*headers, b"connection: close", b"content-length: %d"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


_REFUSED = _head(b"503 Service Unavailable", b"retry-after: 1")
_REFUSED_BODY = (
    b'{"error":"too_many_connections","message":"the gateway has as many connections open as '
    b'it takes; retry"}'
)
_REFUSED_ADDRESS_BODY = (
    b'{"error":"too_many_connections_from_address","message":"this client address has as many '
    b'connections open as the gateway takes from one; close one, or retry"}'
)
_TIMED_OUT = _head(b"408 Request Timeout")
_TIMED_OUT_BODY = (
    b'{"error":"request_timeout","message":"the request\'s head did not arrive in time"}'
)
_TOO_LARGE = _head(b"431 Request Header Fields Too Large")
_TOO_LARGE_BODY = (
    b'{"error":"head_too_large","message":"the request line and headers are over %d bytes"}'
)
_SOCKET_HEAD_BODY = (
    b'{"error":"head_too_large","message":"a WebSocket\'s request line and each of its header '
    b'lines are at most %d bytes, and its headers at most %d"}' % (SOCKET_LINE, SOCKET_HEADERS)
)
_CLOSED = {
    reason: GATEWAY_CONNECTIONS_CLOSED.labels(reason)
    for reason in (
        "idle",
        "head_timeout",
        "head_too_large",
        "body_timeout",
        "over_cap",
        "over_address_cap",
    )
}
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def address_group(host: str) -> str:
    """What a peer's address counts as: an IPv4 address itself (an IPv4-mapped IPv6 address
    too), an IPv6 address its /64 (``2001:db8:1:2::/64``); anything else as it is."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])  # without an IPv6 zone
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(frozen=True, slots=True)
class Proxies:
    """The peers named in ``DOMINO_GATEWAY_TRUSTED_PROXIES``: every one (``*``), or these
    addresses and networks (a name that is neither, such as a Unix socket's, matches none)."""

    every: bool = False
    networks: tuple[_Network, ...] = ()

    @classmethod
    def of(cls, listed: str) -> Proxies:
        """The proxies of a comma-separated list, as the setting holds them."""
        items = [item.strip() for item in listed.split(",") if item.strip()]
        networks = []
        for item in items:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                continue
        return cls(every="*" in items, networks=tuple(networks))

    def __contains__(self, host: str) -> bool:
        if self.every:
            return True
        try:
            ip = ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.networks)


class Limits:
    """The deadlines and the caps every connection of one gateway process is held to."""

    __slots__ = ("body_s", "head_s", "idle_s", "max_connections", "per_address", "proxies")

    def __init__(
        self,
        idle_s: float,
        head_s: float,
        body_s: float,
        max_connections: int,
        per_address: int,
        proxies: Proxies,
    ):
        self.idle_s = idle_s
        self.head_s = head_s
        self.body_s = body_s
        self.max_connections = max_connections
        self.per_address = per_address  # connections open at once from one client address
        self.proxies = proxies  # peers not counted per address


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the deadlines and the cap of :class:`Limits` (the
    module's docstring says what each adds to uvicorn's own)."""

    limits = Limits(
        idle_s=20.0,
        head_s=10.0,
        body_s=10.0,
        max_connections=4096,
        per_address=256,
        proxies=Proxies(),
    )
    """Set on a subclass made by :func:`protocol_with`: one per server."""
    by_address: ClassVar[dict[str, int]] = {}
    """The connections open from each client address (:func:`address_group`), none at 0: one
    per server, set on the subclass as :attr:`limits` is."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # uvicorn's keep-alive, between two requests, is the idle deadline (it takes a float:
        # it only hands it to call_later)
        self.timeout_keep_alive = self.limits.idle_s  # type: ignore[assignment]
        self._deadline: asyncio.TimerHandle | None = None
        self._refused: bytes | None = None  # the 503's body, for a connection over a cap
        self._address: str | None = None  # what it counts against, once taken
        self._head_bytes: int | None = None  # read of the head under way; None: no head

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take a new connection, or refuse it past its address's cap or the process's; either
        way it must speak soon."""
        address = self._counted_as(transport.get_extra_info("peername"))
        if address is not None and self.by_address.get(address, 0) >= self.limits.per_address:
            self._refuse(transport, "over_address_cap", _REFUSED_ADDRESS_BODY)
            return
        if len(self.connections) >= self.limits.max_connections:
            self._refuse(transport, "over_cap", _REFUSED_BODY)
            return
        super().connection_made(transport)
        GATEWAY_CONNECTIONS.inc()
        if address is not None:
            self._address = address
            self.by_address[address] = self.by_address.get(address, 0) + 1
        # uvicorn arms its keep-alive timer only after a response: a silent new connection
        # would never be closed
        self.timeout_keep_alive_task = self.loop.call_later(
            self.limits.idle_s, self.timeout_keep_alive_handler
        )

    def _counted_as(self, peer: Any) -> str | None:
        """The client address a connection from ``peer`` counts against; None for a trusted
        proxy or a peer with no address (a Unix socket)."""
        if not isinstance(peer, tuple) or not peer:
            return None
        host = str(peer[0])
        return None if host in self.limits.proxies else address_group(host)

    def _refuse(self, transport: asyncio.Transport, reason: str, body: bytes) -> None:
        self._refused = body
        self.transport = transport
        _CLOSED[reason].inc()
        self._deadline = self.loop.call_later(REFUSED_GRACE_S, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: no deadline of it is left to fire, and its place is free."""
        self._cancel_deadline()
        if self._refused is not None:
            return
        self._release()
        super().connection_lost(exc)

    def _release(self) -> None:
        """The connection's place is free: under the process's count and its address's."""
        GATEWAY_CONNECTIONS.dec()
        if self._address is not None:
            left = self.by_address.pop(self._address) - 1
            if left:
                self.by_address[self._address] = left
            self._address = None

    def handle_websocket_upgrade(self) -> None:
        """The connection becomes a WebSocket (services/gateway/sockets.py): the request's
        deadlines stop (its body's would cut the socket), and it keeps its place under the caps
        until the socket's connection is lost — asyncio tells only the protocol that has it
        then, uvicorn's WebSocket protocol, so that one is wrapped to free it."""
        self._cancel_deadline()
        self._head_bytes = None
        if not _fits_socket(self.scope["method"], self.url, self.headers):
            _CLOSED["head_too_large"].inc()
            log.info("socket handshake too large: connection closed", client=_client(self.client))
            self.transport.write(_TOO_LARGE % len(_SOCKET_HEAD_BODY) + _SOCKET_HEAD_BODY)
            self.transport.close()
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:  # what a client that stops reading leaves in the kernel
            with contextlib.suppress(OSError):
                sock.setsockopt(SOL_SOCKET, SO_SNDBUF, SOCKET_SEND_BUFFER)
        super().handle_websocket_upgrade()
        socket = self.transport.get_protocol()
        if socket is not self:
            self.transport.set_protocol(_Upgraded(socket, self._release))

    def data_received(self, data: bytes) -> None:
        """Bytes from the client; one over a cap is answered 503 and closed."""
        if self._refused is not None:
            self._cancel_deadline()
            if not self.transport.is_closing():
                self.transport.write(_REFUSED % len(self._refused) + self._refused)
                self.transport.close()
            return
        super().data_received(data)
        if self._head_bytes is not None and not self.transport.is_closing():
            # a read that begins a head counts whole: at worst a few bytes early
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._head_too_large()

    def timeout_keep_alive_handler(self) -> None:
        """Nothing arrived for ``idle_s`` with no request under way: close."""
        if not self.transport.is_closing():
            _CLOSED["idle"].inc()
        super().timeout_keep_alive_handler()

    # the parser's callbacks, each called from data_received

    def on_message_begin(self) -> None:
        """A request's first byte: its head is due within ``head_s``."""
        super().on_message_begin()
        self._head_bytes = 0
        self._arm(self.limits.head_s, self._head_too_slow)

    def on_headers_complete(self) -> None:
        """The head is in: its body is due within ``body_s`` (one without a body completes
        in the same call, and the deadline goes with it)."""
        self._cancel_deadline()
        self._head_bytes = None
        super().on_headers_complete()
        self._arm(self.limits.body_s, self._body_too_slow)

    def on_message_complete(self) -> None:
        """The whole request is in: no deadline runs while it is answered."""
        self._cancel_deadline()
        super().on_message_complete()

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(seconds, then)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        _CLOSED["head_timeout"].inc()
        log.info("request head too slow: connection closed", client=_client(self.client))
        self.transport.write(_TIMED_OUT % len(_TIMED_OUT_BODY) + _TIMED_OUT_BODY)
        self.transport.close()

    def _head_too_large(self) -> None:
        self._cancel_deadline()
        self._head_bytes = None
        _CLOSED["head_too_large"].inc()
        log.info("request head too large: connection closed", client=_client(self.client))
        body = _TOO_LARGE_BODY % MAX_HEAD_BYTES
        self.transport.write(_TOO_LARGE % len(body) + body)
        self.transport.close()  # nothing more is read from it

    def _body_too_slow(self) -> None:
        """The handler waiting for the body is told the client went away (it answers nothing
        more); the connection is closed."""
        self._deadline = None
        if self.transport.is_closing():
            return
        _CLOSED["body_timeout"].inc()
        log.info("request body too slow: connection closed", client=_client(self.client))
        self.transport.close()


class _Upgraded(asyncio.Protocol):
    """A WebSocket protocol that, when its connection is lost, frees the place its HTTP
    connection took (``on_lost``); everything else passes to it as it is."""

    def __init__(self, inner: asyncio.BaseProtocol, on_lost: Callable[[], None]) -> None:
        self.inner = cast(asyncio.Protocol, inner)
        self.on_lost = on_lost

    def data_received(self, data: bytes) -> None:
        """Bytes for the socket."""
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        """The client will send no more."""
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        """The transport's buffer is full: the socket waits."""
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        """The transport's buffer has room again."""
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """The socket's connection is gone: so is its place."""
        try:
            self.inner.connection_lost(exc)
        finally:
            self.on_lost()


def _fits_socket(method: str, url: bytes, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a handshake is within what the WebSocket library reads (SOCKET_LINE,
    SOCKET_HEADERS), as uvicorn hands it on: its request line and its headers, one a line."""
    if len(method) + len(url) + len(b"  HTTP/1.1\r\n") > SOCKET_LINE:
        return False
    if len(headers) > SOCKET_HEADERS:
        return False
    return all(len(name) + len(value) + 4 <= SOCKET_LINE for name, value in headers)


def _client(client: tuple[str, int] | None) -> str:
    return "-" if client is None else f"{client[0]}:{client[1]}"


def protocol_with(limits: Limits) -> type[GuardedHttp]:
    """The protocol class for a server whose connections are held to ``limits``, counting
    its connections per address afresh."""
    return type("GatewayHttp", (GuardedHttp,), {"limits": limits, "by_address": {}})


def ensure_files(max_connections: int) -> None:
    """Raise the process's open files limit (its soft limit, up to the hard one) so that
    ``max_connections`` clients fit beside what the gateway opens itself; log a warning when
    the hard limit is too low for it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < wanted:
            log.warning(
                "open files limit below DOMINO_GATEWAY_MAX_CONNECTIONS",
                max_connections=max_connections,
                files=target,
                needed=wanted,
            )
