"""What the seat's socket and the account's socket share: their close codes, the hello frame
of a client that cannot set a header, the largest frame taken, and the handshake's refusals
sent as its HTTP answer."""

from __future__ import annotations

import msgspec
from starlette.types import Message, Scope, Send

from services.gateway import versions
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
