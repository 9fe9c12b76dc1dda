"""Send commands to the referee and read its rejections, as any trusted sender would."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import cast

from engine.rules import Rules
from events.codec import JSON
from events.envelope import CommandEnvelope
from events.model import AnyCommand, CreateMatch
from events.wire import Rejected
from services.config import Settings
from services.redis.connection import Client
from services.store.keys import Keys
from services.transport.base import DATA


def new_match_id(prefix: str = "m") -> str:
    """A fresh, unguessable match id."""
    return f"{prefix}-{secrets.token_hex(5)}"


class ServiceClient:
    """Writes command envelopes to the right partition; rejections come back on ``replies``."""

    def __init__(self, redis: Client, settings: Settings, sender: str = "cli") -> None:
        self.redis = redis
        self.topo = Keys(settings.prefix, settings.partitions)
        self.replies = self.topo.replies(sender)
        self._last_reply = "0"

    async def send(self, match_id: str, command: AnyCommand, command_id: str | None = None) -> str:
        """Queue ``command`` for the match; return its command id."""
        command_id = command_id or secrets.token_hex(8)
        envelope = CommandEnvelope(
            match_id=match_id,
            command_id=command_id,
            command=command,
            reply_to=self.replies,
            ts=time.time(),
        )
        stream = self.topo.commands(self.topo.partition_of(match_id))
        await self.redis.xadd(stream, {DATA: JSON.encode(envelope)})
        return command_id

    async def send_raw(self, match_id: str, payload: bytes) -> None:
        """Queue raw bytes as a command (to test how bad input is handled)."""
        stream = self.topo.commands(self.topo.partition_of(match_id))
        await self.redis.xadd(stream, {DATA: payload})

    async def create_match(
        self,
        rules: Rules,
        seats: Sequence[str | None],
        *,
        names: Sequence[str] | None = None,
        deadline_ms: int = 0,
        match_id: str | None = None,
    ) -> str:
        """Open a match whose seats are played by these bot pools (None: external)."""
        match_id = match_id or new_match_id()
        players = tuple(names) if names else tuple(s or f"seat{i}" for i, s in enumerate(seats))
        command = CreateMatch(
            rules=rules, players=players, bots=tuple(seats), deadline_ms=deadline_ms
        )
        await self.send(match_id, command, command_id=f"create:{match_id}")
        return match_id

    async def rejections(self, block_ms: int | None = None) -> list[Rejected]:
        """Rejections sent back to this client since the last call."""
        reply = await self.redis.xread({self.replies: self._last_reply}, block=block_ms)
        # The client returns bytes over RESP2, so XREAD answers [stream, [(id, fields), ...]]
        # per stream; redis-py types the reply for every protocol and decoding at once.
        streams = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], reply or [])
        out: list[Rejected] = []
        for _, entries in streams:
            for entry_id, fields in entries:
                self._last_reply = entry_id.decode()
                out.append(JSON.decode_rejected(fields[DATA]))
        return out
