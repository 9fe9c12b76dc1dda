"""A long-lived response that writes a subscriber's lines as they come, with keep-alives."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from services.gateway.credentials import Binding, Credential, Credentials, closed_line
from services.gateway.hub import Feed, Hub, Subscriber
from services.gateway.protocol import KEEPALIVE_NDJSON, KEEPALIVE_SSE
from services.metrics import GATEWAY_OPEN_STREAMS

NDJSON = b"application/x-ndjson"
SSE = b"text/event-stream"
OPEN_STREAMS = {kind: GATEWAY_OPEN_STREAMS.labels(kind) for kind in ("seat", "account", "public")}
"""The open streams of each kind in the metrics: a seat's, an account's, the public's."""


async def start_stream(send: Send, sse: bool) -> bytes:
    """Begin a streamed answer (NDJSON or server-sent events, never cached or buffered by a
    proxy); return the keep-alive its client expects."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", SSE if sse else NDJSON),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ],
        }
    )
    return KEEPALIVE_SSE if sse else KEEPALIVE_NDJSON


async def on_disconnect(receive: Receive, then: Callable[[], None]) -> None:
    """Call ``then`` as soon as the client disconnects, not at the next write."""
    while (await receive())["type"] != "http.disconnect":
        pass
    then()


class StreamResponse:
    """Writes ``first`` (snapshot or backlog), then the subscriber's lines until the match ends
    or the client goes away; a keep-alive after ``keepalive`` seconds of silence. A stream
    opened with a credential (``bound``) ends with a closing line when that credential does
    (services/gateway/credentials.py)."""

    def __init__(
        self,
        hub: Hub,
        feed: Feed,
        sub: Subscriber,
        first: list[bytes],
        keepalive: float,
        on_close: Callable[[], None],
        bound: tuple[Credentials, Credential] | None = None,
    ) -> None:
        self.hub = hub
        self.feed = feed
        self.sub = sub
        self.first = first
        self.keepalive = keepalive
        self.on_close = on_close
        self.bound = bound

    def close(self, reason: str) -> None:
        """The credential the stream was opened with ended: nothing more of the match is
        written, only the closing line saying why."""
        self.first = []
        self.sub.chunks.clear()
        self.sub.size = 0
        self.sub.push(closed_line(reason, self.sub.sse))
        self.sub.finish()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sub = self.sub
        watcher = asyncio.create_task(on_disconnect(receive, self._gone))
        open_streams = OPEN_STREAMS["public" if sub.seat is None else "seat"]
        open_streams.inc()
        binding: Binding | None = None
        if self.bound is not None:
            credentials, credential = self.bound
            binding = credentials.bind(credential, self.close)
        try:
            ping = await start_stream(send, sub.sse)
            if self.first:
                await send(
                    {"type": "http.response.body", "body": b"".join(self.first), "more_body": True}
                )
            while True:
                data = await sub.take(self.keepalive)
                if data is None:
                    break
                await send({"type": "http.response.body", "body": data or ping, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we wrote
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            open_streams.dec()
            if binding is not None:
                credentials.unbind(binding)
            self.hub.unsubscribe(self.feed, sub)
            self.on_close()

    def _gone(self) -> None:
        """The client went away: nothing more is written."""
        self.sub.chunks.clear()
        self.sub.finish()
