"""What the SDK's clients share, over HTTP and over sockets: the version of the protocol they
speak, the errors they raise, what they try again and for how long, and the result of a move."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache
from typing import Any

from domino_sdk.protocol import PROTOCOL, PROTOCOL_HEADER

_SPOKEN = {PROTOCOL_HEADER: str(PROTOCOL)}
"""What every request carries: the version of the protocol this SDK speaks."""
RETRYABLE = frozenset({502, 503, 504})
MOVE_PATIENCE_S = 30.0
"""How long a move is tried again while the gateway cannot be reached: its key makes every
try one move, and a move that arrives before its turn's deadline still counts."""


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle takes ~50 ms each time."""
    return ssl.create_default_context()


class GatewayError(Exception):
    """Raised for an answer the client cannot act on: its HTTP ``status``, the JSON ``body``
    and the error ``code`` in it (e.g. ``unauthorized``, ``wrong_seat``)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        self.code = str(body.get("error", "http_error"))
        super().__init__(f"{status} {self.code}: {body.get('message', '')}")


class MoveRejected(GatewayError):
    """Raised when the referee refused a move: ``reason`` and ``rule`` say why (C-rules)."""

    @property
    def reason(self) -> str:
        """The engine's reason code, e.g. ``not_your_turn``."""
        return str(self.body.get("reason", ""))

    @property
    def rule(self) -> str:
        """The rule the move broke, e.g. ``C4``."""
        return str(self.body.get("rule", ""))


class StreamClosed(GatewayError):
    """Raised when the gateway ended a stream because the token it was opened with ended:
    ``code`` says how (``token_rotated``, ``token_revoked``, ``token_reissued``,
    ``account_banned``, ``seat_ended``). That token opens nothing more, so the stream is not
    opened again with it."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(403 if body.get("reason") == "account_banned" else 401, body)
        self.code = str(body.get("reason", "closed"))


class ProtocolMismatch(GatewayError):
    """Raised when an answer states (``Domino-Protocol``) a version of the protocol other than
    the one this SDK speaks, before anything of it is read: a gateway older or newer than the
    SDK, or one refusing the SDK's version (400 ``unsupported_protocol``). ``sdk`` is this
    SDK's version, ``gateway`` the header as the gateway sent it; ``status`` the answer's."""

    def __init__(self, status: int, gateway: str) -> None:
        self.sdk = PROTOCOL
        self.gateway = gateway
        message = (
            f"the gateway speaks version {gateway!r} of the protocol, this SDK version "
            f"{PROTOCOL}: {_advice(gateway)}"
        )
        super().__init__(status, {"error": "unsupported_protocol", "message": message})


def _advice(gateway: str) -> str:
    """What to do about a gateway stating ``gateway``: upgrade the SDK, or find a gateway."""
    canonical = gateway.isascii() and gateway.isdigit() and len(gateway) <= 6
    if not canonical or str(int(gateway)) != gateway:  # "01" and "1.0" are no version 1
        return "its answers are none this SDK can read"
    if int(gateway) > PROTOCOL:
        return f"upgrade domino-sdk to one that speaks version {int(gateway)}"
    return (
        f"the gateway is older than this SDK: use a domino-sdk that speaks version "
        f"{int(gateway)}, or a newer gateway"
    )


@dataclass(frozen=True, slots=True)
class MoveResult:
    """An accepted move: the match version of its first event; ``replayed`` if an earlier
    request with the same key had already been applied."""

    version: int
    replayed: bool
