"""A Python SDK for external bots: subclass :class:`Bot`, implement ``choose(view)``, ``run``.

The bot talks to the gateway over HTTP only (see docs/protocol.md): it reconnects and resumes
its stream, honours 429s, and answers each turn once. Names are imported on first use, so the
``domino`` command does not load httpx for its other subcommands.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.sdk.bot import Bot, StrategyBot
    from services.sdk.client import (
        GatewayError,
        LobbyClient,
        MoveRejected,
        MoveResult,
        Seat,
        SeatClient,
    )

_WHERE = {
    "Bot": "services.sdk.bot",
    "StrategyBot": "services.sdk.bot",
    "GatewayError": "services.sdk.client",
    "LobbyClient": "services.sdk.client",
    "MoveRejected": "services.sdk.client",
    "MoveResult": "services.sdk.client",
    "Seat": "services.sdk.client",
    "SeatClient": "services.sdk.client",
}
__all__ = [
    "Bot",
    "GatewayError",
    "LobbyClient",
    "MoveRejected",
    "MoveResult",
    "Seat",
    "SeatClient",
    "StrategyBot",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
