"""The long-lived responses of the lobby's streams (the account's, the play stream and an
arena's): an async iterator's lines, with keep-alives, until the client goes away or the
credential it was opened with ends; and the lines they share (a gap, a server-sent event).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from starlette.types import Receive, Scope, Send

from services.gateway.credentials import Binding, Credential, Credentials, closed_line
from services.gateway.protocol import Gap
from services.gateway.streaming import OPEN_STREAMS, on_disconnect, start_stream

POLL_S = 0.5
"""How often a stream looks for what another process wrote (a feed event, a new match)."""


def gap_line(after: int, oldest: int, sse: bool) -> bytes:
    """The line telling a stream resumed after ``after`` that it lost the lines before
    ``oldest``."""
    data = msgspec.json.encode(Gap(id=oldest - 1, after=after, oldest=oldest))
    return sse_event(oldest - 1, data) if sse else data + b"\n"


def sse_event(n: int, data: bytes) -> bytes:
    """A line as a server-sent event: its id ``n``, its type as the event's name."""
    kind = msgspec.json.decode(data, type=dict[str, Any]).get("type", "event")
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (n, str(kind).encode(), data)


def sse_seat(data: bytes) -> bytes:
    """A play stream's line as a server-sent event ``seat`` (no id: resumed by reconnecting)."""
    return b"event: seat\ndata: %s\n\n" % data.rstrip(b"\n")


class LiveResponse:
    """A long-lived response writing an async iterator's chunks (b"" means nothing new) with
    a keep-alive after ``keepalive`` seconds of silence, until the client goes away; counted
    open in the metrics as a stream of ``kind`` (an account's, or the public's). One opened
    with a credential (``bound``) ends with a closing line, and writes nothing more, once
    that credential ends (services/gateway/credentials.py): the iterator yields at least
    every POLL_S, so within that."""

    def __init__(
        self,
        lines: AsyncIterator[bytes],
        sse: bool,
        keepalive: float,
        on_close: Callable[[], Awaitable[None]],
        kind: str = "account",
        bound: tuple[Credentials, Credential] | None = None,
    ) -> None:
        self.lines = lines
        self.sse = sse
        self.keepalive = keepalive
        self.on_close = on_close
        self.open_streams = OPEN_STREAMS[kind]
        self.bound = bound
        self.closing: str | None = None  # why the stream must end now, once its credential did
        self.wake: Callable[[], None] | None = None  # hurries the iterator along when set

    def close(self, reason: str) -> None:
        """The credential the stream was opened with ended: the next chunk is not written,
        the closing line is."""
        self.closing = reason
        if self.wake is not None:
            self.wake()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(on_disconnect(receive, gone.set))
        loop = asyncio.get_running_loop()
        self.open_streams.inc()
        binding: Binding | None = None
        if self.bound is not None:
            credentials, credential = self.bound
            binding = credentials.bind(credential, self.close)
        try:
            ping = await start_stream(send, self.sse)
            quiet_since = loop.time()
            async for chunk in self.lines:
                if gone.is_set():
                    break
                if self.closing is not None:
                    body = closed_line(self.closing, self.sse)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    break
                if not chunk:
                    if loop.time() - quiet_since < self.keepalive:
                        continue
                    chunk = ping
                quiet_since = loop.time()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not gone.is_set():  # the lines ended (an arena's at its end): so does the answer
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we wrote
        finally:
            self.open_streams.dec()
            if binding is not None:
                credentials.unbind(binding)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            with contextlib.suppress(Exception):
                await self.lines.aclose()  # type: ignore[attr-defined]
            await self.on_close()
