"""The services' Redis client: redis-py's asyncio client with hiredis packing commands.

redis-py's asyncio connection packs every command in Python; hiredis packs it in C. With the
referee's pipelined EVALSHA calls of a dozen arguments each, packing was a tenth of the
referee's time (measured with py-spy during ``make bench BENCH=service``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import hiredis
from redis.asyncio import Connection, Redis


class PackedConnection(Connection):
    """An asyncio connection whose commands are packed by hiredis."""

    def pack_command(self, *args: Any) -> list[bytes]:
        """One command in the Redis protocol, packed in C."""
        first = args[0]
        if isinstance(first, str):
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        return [hiredis.pack_command(args)]

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        """Many commands in one buffer, for a pipeline."""
        return [b"".join(self.pack_command(*command)[0] for command in commands)]


def connect(url: str) -> Redis:
    """A bytes-returning client for ``url`` (not connected until first used)."""
    return Redis.from_url(url, decode_responses=False, connection_class=PackedConnection)
