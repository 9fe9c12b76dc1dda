"""The account channel (docs/protocol.md, "The account channel"): the account socket (GET
/account/socket, a WebSocket: services/gateway/account_socket.py), and what the account
stream takes for the channel (``play=1``, ``cursor``: services/gateway/channel.py). Its
frames' schemas are listed here for the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp

from services.gateway import spec
from services.gateway.account_socket import AccountSockets
from services.gateway.channel_wire import (
    AccountFrame,
    AccountMoveFrame,
    ChannelError,
    ChannelLimited,
    ChannelLine,
)
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import Request, Response
from services.gateway.protocol import API

STRUCTS = [AccountFrame, ChannelLine, AccountMoveFrame, ChannelError, ChannelLimited]
"""The frames' structs, for the document's components."""

CURSOR = {
    "name": "cursor",
    "in": "query",
    "description": "resume the account channel: the `cursor` of the last frame read, sent back "
    "as it came (`F` or `F,M:S:V,...`, naming at most twice the seats an account may hold at "
    "once); absent, a fresh start. As server-sent events, Last-Event-ID carries it too (this "
    "parameter wins)",
    "schema": {"type": "string"},
}
STREAM_PARAMS = [
    {
        "name": "play",
        "in": "query",
        "description": "1: the account channel (`ChannelFrame` lines: the account's lines and "
        "every seat it holds, each under its cursor; resumed with `cursor`); 0 (the "
        "default): the account's lines alone",
        "schema": {"enum": ["0", "1"]},
    },
    CURSOR,
]
"""What GET /account/stream takes for the channel."""
BAD_CURSOR = "bad_cursor"
"""The code of a cursor refused (400)."""


def components() -> dict[str, Any]:
    """The union of the frames that carry a cursor."""
    return {
        "ChannelFrame": {
            "description": "A frame of the account channel: a line of the account's feed "
            "(`AccountFrame`) or of a seat it holds (`ChannelLine`), each under its cursor",
            "oneOf": [spec.ref("AccountFrame"), spec.ref("ChannelLine")],
            "discriminator": {"propertyName": "type"},
        }
    }


async def socket_without_upgrade(gw: Gateway, request: Request) -> Response:
    """GET /account/socket without the WebSocket upgrade (services/gateway/account_socket.py)."""
    return await AccountSockets(gw).upgrade_required(request)


def socket(gw: Gateway, route: str) -> ASGIApp:
    """The account socket's handshake, counted under ``route``."""
    return AccountSockets(gw).app(route)


OPERATIONS = (
    Operation(
        method="GET",
        path=f"{API}/account/socket",
        handler=socket_without_upgrade,
        socket=socket,
        summary="The account channel as a WebSocket: the account's lines and every seat it "
        "holds down, each frame under a cursor that resumes it exactly (`ChannelFrame`), and "
        "moves of any of its seats up (`AccountMoveFrame`)",
        description="Opened like the account stream with play=1 (the same token, places and "
        "cursor); a refusal is the HTTP answer to the handshake. Once open, a frame that plays "
        "nothing is answered with a `ChannelError` (a seat the account does not hold: "
        "not_your_seat), a move with `MoveAccepted`, `MoveRejected`, `MoveTimedOut` or "
        "`ChannelLimited`, under its key. Close codes: 4001 token_rotated, 4002 token_revoked, "
        "4003 token_reissued, 4004 account_banned (each after the closing frame); 4008 the "
        "client did not read; 4010 the gateway ended the channel; 1009 a frame far over the "
        "body limit. Without Authorization it waits 5 s for a `HelloFrame`, then 4000 + the "
        "status a refusal would have had. After any, open it again with `cursor` the last "
        "frame's (docs/protocol.md, The account channel).",
        security=spec.ACCOUNT,
        parameters=[
            CURSOR,
            spec.EVENTS,
            {
                "name": "Upgrade",
                "in": "header",
                "required": True,
                "description": "websocket (with the rest of the WebSocket handshake, RFC 6455)",
                "schema": {"enum": ["websocket"]},
            },
        ],
        answers=spec.as_account(
            {
                "101": {
                    "description": "Switching Protocols: the channel is open; every frame it "
                    "sends is JSON text, a `ChannelFrame` or an answer to a frame sent up",
                },
                "400": spec.error("a cursor refused", BAD_CURSOR),
                "422": spec.error("an unknown events", "invalid_query"),
                "426": spec.error(
                    "a GET without the WebSocket upgrade: connect with a WebSocket client",
                    "upgrade_required",
                ),
                "429": spec.limited(
                    "streams_per_account", 1.0, "player_streams_per_client", "auth_failures"
                ),
            }
        ),
    ),
)
