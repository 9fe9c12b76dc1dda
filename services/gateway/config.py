"""The gateway's own settings, from environment variables, each with a documented default.

| variable | default | meaning |
| --- | --- | --- |
| DOMINO_GATEWAY_HOST | 127.0.0.1 | address to listen on |
| DOMINO_GATEWAY_PORT | 8080 | port to listen on |
| DOMINO_GATEWAY_MAX_BODY_BYTES | 4096 | larger request bodies are refused (413) |
| DOMINO_GATEWAY_MOVES_PER_S | 20 | moves a seat token may post per second, sustained |
| DOMINO_GATEWAY_MOVE_BURST | 40 | moves a seat token may post at once before the rate applies |
| DOMINO_GATEWAY_STREAMS_PER_TOKEN | 2 | seat streams open at once per token |
| DOMINO_GATEWAY_STREAMS_PER_CLIENT | 64 | spectator streams open at once per client address |
| DOMINO_GATEWAY_LOBBY_PER_S | 5 | matches created or seats joined per second per client address |
| DOMINO_GATEWAY_LOBBY_BURST | 20 | lobby writes at once per client address |
| DOMINO_GATEWAY_KEEPALIVE_S | 10 | a stream with nothing to say sends a keep-alive this often |
| DOMINO_GATEWAY_MOVE_TIMEOUT_S | 5 | how long a move waits for the referee's answer |
| DOMINO_GATEWAY_TOKEN_TTL_S | 604800 | lobby records and seat tokens expire after this (7 days) |
| DOMINO_GATEWAY_STREAM_BUFFER_BYTES | 1048576 | a stream this far behind is cut (it resumes) |

The Redis, key prefix and partitions are the service's (services/config.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from services.config import read_env

ENV: dict[str, str] = {
    "host": "DOMINO_GATEWAY_HOST",
    "port": "DOMINO_GATEWAY_PORT",
    "max_body_bytes": "DOMINO_GATEWAY_MAX_BODY_BYTES",
    "moves_per_s": "DOMINO_GATEWAY_MOVES_PER_S",
    "move_burst": "DOMINO_GATEWAY_MOVE_BURST",
    "streams_per_token": "DOMINO_GATEWAY_STREAMS_PER_TOKEN",
    "streams_per_client": "DOMINO_GATEWAY_STREAMS_PER_CLIENT",
    "lobby_per_s": "DOMINO_GATEWAY_LOBBY_PER_S",
    "lobby_burst": "DOMINO_GATEWAY_LOBBY_BURST",
    "keepalive_s": "DOMINO_GATEWAY_KEEPALIVE_S",
    "move_timeout_s": "DOMINO_GATEWAY_MOVE_TIMEOUT_S",
    "token_ttl_s": "DOMINO_GATEWAY_TOKEN_TTL_S",
    "stream_buffer_bytes": "DOMINO_GATEWAY_STREAM_BUFFER_BYTES",
}
"""Each gateway setting and the environment variable it is read from."""


class GatewayConfigError(ValueError):
    """Raised when a gateway variable holds a value its setting cannot take."""


class GatewaySettings(msgspec.Struct, frozen=True, kw_only=True):
    """Every setting of the gateway; see the module docstring for the variables."""

    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 4096
    moves_per_s: float = 20.0
    move_burst: int = 40
    streams_per_token: int = 2
    streams_per_client: int = 64
    lobby_per_s: float = 5.0
    lobby_burst: int = 20
    keepalive_s: float = 10.0
    move_timeout_s: float = 5.0
    token_ttl_s: int = 604_800
    stream_buffer_bytes: int = 1 << 20

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GatewaySettings:
        """Read the settings from ``environ`` (default: the process environment)."""
        settings = read_env(cls, ENV, environ, GatewayConfigError)
        numbers = {f: getattr(settings, f) for f in ENV if f != "host"}
        bad = [ENV[f] for f, v in numbers.items() if v <= 0]
        if bad:
            raise GatewayConfigError(f"{', '.join(bad)} must be positive")
        return settings
