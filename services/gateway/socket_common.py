"""What the seat's socket and the account's socket share: their close codes, the hello frame
of a client that cannot set a header, the largest frame taken, the handshake (its refusals
sent as its HTTP answer) and the reading of the client's frames. Their waker, which tells of
a subscriber cut for being too far behind, is services/gateway/subscribers.py's Watch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway import versions
from services.gateway.http import Endpoint, Request
from services.gateway.protocol import HelloFrame

MATCH_OVER = 1000
"""The close code after the match's last lines: a normal closure."""
CLOSE_CODES: dict[str, int] = {
    "token_rotated": 4001,
    "token_revoked": 4002,
    "token_reissued": 4003,
    "account_banned": 4004,
    "seat_ended": 4005,
    "too_slow": 4008,
    "resume": 4010,
}
"""The socket's close codes, one per reason (docs/protocol.md lists them): the five ends of
the credential it was opened with (each after the stream's closing line naming it), a client
that did not read its frames (``too_slow``), and the gateway ending the seat's stream before
the match ended (``resume``: its feed failed, or it is stopping)."""
HELLO_S = 5.0
"""How long a socket opened without a token waits for its hello frame."""
HELLO_BYTES = 512
"""The longest hello frame read."""
CUT_WAIT_S = 10.0
"""How long a socket cut for not reading waits for its close frame to be written."""
FRAME_SLACK = 16
"""The WebSocket layer (uvicorn's ``ws_max_size``) takes frames up to this many times the
body limit, so that a frame a little over the limit is answered with an error frame; one
over this is closed with 1009 by the WebSocket layer, unread."""
_HELLO = msgspec.json.Decoder(HelloFrame)


def frame_limit(max_body_bytes: int) -> int:
    """The largest frame the WebSocket layer takes (uvicorn's ``ws_max_size``)."""
    return FRAME_SLACK * max(max_body_bytes, 4096)


def hello_token(text: str | None) -> bytes | None:
    """The token of a hello frame; None for any other frame."""
    if text is None or len(text) > HELLO_BYTES:
        return None
    try:
        hello = _HELLO.decode(text)
    except msgspec.DecodeError:  # ValidationError too: its subclass
        return None
    token = hello.token.strip()
    if not token or len(token) > 200 or not token.isascii() or not token.isprintable():
        return None
    return token.encode()


def denying(send: Send, scope: Scope) -> Send:
    """``send`` for a socket's handshake: an HTTP answer made before the upgrade (a refusal) is
    sent as the handshake's answer (ASGI's WebSocket denial response), and every answer and the
    upgrade state the protocol's version. A server without denial responses closes instead."""
    extensions = scope.get("extensions") or {}
    can_deny = "websocket.http.response" in extensions

    async def deny(message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if not can_deny:
                await send({"type": "websocket.close", "code": 1008})
                return
            headers = [*message.get("headers", ()), versions.STATED]
            message = {**message, "type": "websocket.http.response.start", "headers": headers}
        elif kind == "http.response.body":
            if not can_deny:
                return
            message = {**message, "type": "websocket.http.response.body"}
        await send(message)

    return deny


def handshake(open_socket: Callable[[Request], Awaitable[ASGIApp]], route: str) -> ASGIApp:
    """The ASGI app of a socket's handshake: ``open_socket`` as an Endpoint (its refusals typed
    JSON answers, counted under ``route``), each refusal sent as the handshake's answer."""
    opened = Endpoint(open_socket)
    opened.measure(route)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await opened(scope, receive, denying(send, scope))

    return app


async def read_frames(
    receive: Receive,
    limit: int,
    frame: Callable[[bytes], Awaitable[None]],
    answer: Callable[[str | None, str, str], Awaitable[None]],
    failed: Callable[[Exception], Awaitable[None]],
) -> None:
    """A socket's frames from the client, one at a time, until it goes away: each text frame
    of at most ``limit`` bytes to ``frame``; a binary or larger one ``answer``-ed with its
    error (no key); a frame whose handling failed, but for the client going away, to
    ``failed``, and the socket goes on."""
    while True:
        message: Message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message["type"] != "websocket.receive":
            continue
        text = message.get("text")
        if text is None:
            await answer(None, "bad_frame", "send moves as text frames of JSON")
            continue
        data = text.encode()
        if len(data) > limit:
            await answer(
                None, "frame_too_large", f"a frame is at most {limit} bytes (the body limit)"
            )
            continue
        try:
            await frame(data)
        except OSError:
            raise  # the client went away
        except Exception as e:
            await failed(e)
