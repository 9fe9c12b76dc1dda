"""Write bots for the hosted domino match service: subclass :class:`Bot`, implement
``choose(view)``, call ``run(url, token)``.

The bot talks to the gateway over its WebSocket (the seat's socket, or the account's), or over
HTTP where the gateway has none or when asked (``transport="http"``; docs/protocol.md): it
reconnects and resumes where it was, honours limits, and answers each turn once. With an
account token (``dab_...``, from :func:`register`), ``run_account`` plays every match of the
account at once, answering challenges and seeking games. The protocol's wire types — the view,
moves, events, stream lines, request bodies and the account's events — are msgspec structs,
importable from here.

The wire types load at once (msgspec only); :class:`Bot` and the clients on first use, so the
gateway, which shares the request bodies, never loads httpx or the WebSocket client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from domino_sdk.lobby import (
    Account,
    AccountEvent,
    AccountGap,
    AccountState,
    AnyAccountEvent,
    Challenge,
    ChallengeAccepted,
    ChallengeCancelled,
    ChallengeDeclined,
    ChallengeReceived,
    MatchFinished,
    MatchStarted,
    PlayLine,
    Registered,
    Seek,
    SeekExpired,
    SeenAccountEvent,
    UnknownAccountEvent,
    decode_account_event,
    decode_play_line,
)
from domino_sdk.model import (
    AnyEvent,
    DrawTile,
    End,
    Event,
    MatchCreated,
    MatchEnded,
    Move,
    PassTurn,
    PlayTile,
    RoundEnded,
    RoundStarted,
    Rules,
    SeenEvent,
    Tile,
    TileDrawn,
    TilePlayed,
    TurnPassed,
    TurnTimedOut,
    UnknownEvent,
)
from domino_sdk.protocol import PROTOCOL, EventLine, Gap, Line, Snapshot, TurnLine, decode_line
from domino_sdk.views import OpenEnd, View

if TYPE_CHECKING:
    from domino_sdk.account import AccountClient, register
    from domino_sdk.bot import Bot
    from domino_sdk.client import (
        GatewayError,
        LobbyClient,
        MoveRejected,
        MoveResult,
        ProtocolMismatch,
        Seat,
        SeatClient,
        StreamClosed,
    )
    from domino_sdk.session import AccountSession
    from domino_sdk.socket import SocketLost, SocketUnavailable

_WHERE = {
    "AccountClient": "domino_sdk.account",
    "AccountSession": "domino_sdk.session",
    "Bot": "domino_sdk.bot",
    "GatewayError": "domino_sdk.client",
    "LobbyClient": "domino_sdk.client",
    "MoveRejected": "domino_sdk.client",
    "MoveResult": "domino_sdk.client",
    "ProtocolMismatch": "domino_sdk.client",
    "Seat": "domino_sdk.client",
    "SeatClient": "domino_sdk.client",
    "StreamClosed": "domino_sdk.client",
    "SocketLost": "domino_sdk.socket",
    "SocketUnavailable": "domino_sdk.socket",
    "register": "domino_sdk.account",
}
__all__ = [
    "PROTOCOL",
    "Account",
    "AccountClient",
    "AccountEvent",
    "AccountGap",
    "AccountSession",
    "AccountState",
    "AnyAccountEvent",
    "AnyEvent",
    "Bot",
    "Challenge",
    "ChallengeAccepted",
    "ChallengeCancelled",
    "ChallengeDeclined",
    "ChallengeReceived",
    "DrawTile",
    "End",
    "Event",
    "EventLine",
    "Gap",
    "GatewayError",
    "Line",
    "LobbyClient",
    "MatchCreated",
    "MatchEnded",
    "MatchFinished",
    "MatchStarted",
    "Move",
    "MoveRejected",
    "MoveResult",
    "OpenEnd",
    "PassTurn",
    "PlayLine",
    "PlayTile",
    "ProtocolMismatch",
    "Registered",
    "RoundEnded",
    "RoundStarted",
    "Rules",
    "Seat",
    "SeatClient",
    "Seek",
    "SeekExpired",
    "SeenAccountEvent",
    "SeenEvent",
    "Snapshot",
    "SocketLost",
    "SocketUnavailable",
    "StreamClosed",
    "Tile",
    "TileDrawn",
    "TilePlayed",
    "TurnLine",
    "TurnPassed",
    "TurnTimedOut",
    "UnknownAccountEvent",
    "UnknownEvent",
    "View",
    "decode_account_event",
    "decode_line",
    "decode_play_line",
    "register",
]


def __getattr__(name: str) -> Any:
    """Load the bot and the clients (and with them httpx) when first asked for."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
