"""A minimal HTTP/1.1 client over asyncio protocols, cheap enough that the server is what costs.

The gateway bench's cheap players use it: one ``GET /account/play`` per account carries every
seat the account holds (a chunked NDJSON response), and moves go over a few keep-alive
connections, one request at a time on each. It parses only what the gateway sends: a status
line, headers, then a body with ``content-length`` or ``transfer-encoding: chunked``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import cast


class HttpError(Exception):
    """The connection closed, or a stream did not open with 200."""


def request(
    method: str, path: str, token: str, body: bytes = b"", extra: dict[str, str] | None = None
) -> bytes:
    """The bytes of one request, with a bearer token and, for a body, its length."""
    head = [f"{method} {path} HTTP/1.1", "host: bench", f"authorization: Bearer {token}"]
    head += [f"{k}: {v}" for k, v in (extra or {}).items()]
    if body or method == "POST":
        head += ["content-type: application/json", f"content-length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Connection(asyncio.Protocol):
    """One keep-alive connection: a request at a time, each answer read by its length."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        buf = self.buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(buf[:end]).lower()
        at = head.find(b"content-length:")
        stop: int | None = head.find(b"\r\n", at)
        size = 0 if at < 0 else int(head[at + 15 : None if stop == -1 else stop])
        if len(buf) < end + 4 + size:
            return
        status = int(head[9:12])
        body = bytes(buf[end + 4 : end + 4 + size])
        del buf[: end + 4 + size]
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HttpError("the connection closed"))

    async def send(self, data: bytes) -> tuple[int, bytes]:
        """Write one request; its status and body."""
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await self.waiter


class Pool:
    """A few keep-alive connections, each lent to one request at a time."""

    def __init__(self, connections: list[Connection]) -> None:
        self.idle = deque(connections)
        self.waiting: deque[asyncio.Future[Connection]] = deque()

    async def send(self, data: bytes) -> tuple[int, bytes]:
        """Send a request on the next free connection."""
        if self.idle:
            conn = self.idle.popleft()
        else:
            fut: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
            self.waiting.append(fut)
            conn = await fut
        try:
            return await conn.send(data)
        finally:
            self._lend(conn)

    def _lend(self, conn: Connection) -> None:
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_result(conn)
                return
        self.idle.append(conn)


class LineStream(asyncio.Protocol):
    """A streamed response (chunked): each complete line goes to ``on_line``."""

    def __init__(self, on_line: Callable[[bytes], None]) -> None:
        self.on_line = on_line
        self.buffer = bytearray()
        self.pending = b""
        self.opened = False
        self.closed: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        if not self.opened:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if buf[9:12] != b"200":
                self._close(HttpError(bytes(buf[: end + 4]).decode(errors="replace")))
                return
            del buf[: end + 4]
            self.opened = True
        while True:
            nl = buf.find(b"\r\n")
            if nl < 0:
                return
            size = int(buf[:nl], 16)
            if len(buf) < nl + 4 + size:
                return
            chunk = bytes(buf[nl + 2 : nl + 2 + size])
            del buf[: nl + 4 + size]
            if size == 0:
                self._close(None)
                return
            *lines, self.pending = (self.pending + chunk).split(b"\n")
            for line in lines:
                if line:
                    self.on_line(line)

    def connection_lost(self, exc: Exception | None) -> None:
        self._close(HttpError("the stream closed"))

    def _close(self, error: Exception | None) -> None:
        """The stream ended: ``closed`` holds None at its end, or why it ended early."""
        if not self.closed.done():
            self.closed.set_result(error)


async def connect(host: str, port: int) -> Connection:
    """A new keep-alive connection."""
    _, conn = await asyncio.get_running_loop().create_connection(Connection, host, port)
    return conn


async def open_stream(
    host: str, port: int, data: bytes, on_line: Callable[[bytes], None]
) -> tuple[asyncio.Transport, LineStream]:
    """Send a GET for a stream; its lines go to ``on_line`` as they come."""
    transport, stream = await asyncio.get_running_loop().create_connection(
        lambda: LineStream(on_line), host, port
    )
    transport.write(data)
    return transport, stream
