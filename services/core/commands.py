"""Commands on their way to the referee: match ids, envelopes, and a trusted sender's client.

Every sender — the CLI, the demo, tournaments, the gateway — builds its envelopes here, so a
command reaches the referee in one shape: the match's partition command stream, the sender's
reply stream for a rejection, the command id the store deduplicates by.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence

from engine.rules import Rules
from events.codec import JSON
from events.envelope import CommandEnvelope
from events.model import AnyCommand, CreateMatch
from events.wire import Rejected
from services.store.base import START, EventStore
from services.store.keys import Keys
from services.transport.base import DATA, Message, Transport


def new_match_id(prefix: str = "m") -> str:
    """A fresh, unguessable match id."""
    return f"{prefix}-{secrets.token_hex(5)}"


def command_message(
    keys: Keys,
    match_id: str,
    command_id: str,
    command: AnyCommand,
    reply_to: str | None,
    now: float | None = None,
) -> Message:
    """The command as an entry of its match's partition command stream; raises
    InvalidMatchId for a match id the store would refuse."""
    envelope = CommandEnvelope(
        match_id=match_id,
        command_id=command_id,
        command=command,
        reply_to=reply_to,
        ts=time.time() if now is None else now,
    )
    return Message(keys.commands(keys.partition_of(match_id)), JSON.encode(envelope))


def create_match(
    rules: Rules,
    seats: Sequence[str | None],
    *,
    names: Sequence[str] | None = None,
    deadline_ms: int = 0,
) -> CreateMatch:
    """A match whose seats are played by these house bot pools (None: an outside player),
    named ``names`` (default: the pool, or ``seat<i>`` for an outside seat)."""
    players = tuple(names) if names else tuple(s or f"seat{i}" for i, s in enumerate(seats))
    return CreateMatch(rules=rules, players=players, bots=tuple(seats), deadline_ms=deadline_ms)


class ServiceClient:
    """Sends commands as a trusted sender and reads the rejections sent back to it."""

    def __init__(self, transport: Transport, store: EventStore, sender: str = "cli") -> None:
        self.transport = transport
        self.store = store
        self.keys = transport.keys
        self.replies = self.keys.replies(sender)
        self._last_reply = START

    async def send(self, match_id: str, command: AnyCommand, command_id: str | None = None) -> str:
        """Queue ``command`` for the match; return its command id."""
        command_id = command_id or secrets.token_hex(8)
        message = command_message(self.keys, match_id, command_id, command, self.replies)
        await self.transport.publish([message])
        return command_id

    async def send_raw(self, match_id: str, payload: bytes) -> None:
        """Queue raw bytes as a command (to test how bad input is handled)."""
        stream = self.keys.commands(self.keys.partition_of(match_id))
        await self.transport.publish([Message(stream, payload)])

    async def create_match(
        self,
        rules: Rules,
        seats: Sequence[str | None],
        *,
        names: Sequence[str] | None = None,
        deadline_ms: int = 0,
        match_id: str | None = None,
    ) -> str:
        """Open a match whose seats are played by these bot pools (None: external); return
        its id."""
        match_id = match_id or new_match_id()
        command = create_match(rules, seats, names=names, deadline_ms=deadline_ms)
        await self.send(match_id, command, command_id=f"create:{match_id}")
        return match_id

    async def rejections(self, block_ms: int | None = None) -> list[Rejected]:
        """Rejections sent back to this client since the last call; with ``block_ms``, wait
        that long for one when there are none yet."""
        entries = await self.store.read_stream(self.replies, self._last_reply)
        if not entries and block_ms:
            await asyncio.sleep(block_ms / 1000)
            entries = await self.store.read_stream(self.replies, self._last_reply)
        if entries:
            self._last_reply = entries[-1].position
        return [JSON.decode_rejected(e.fields[DATA]) for e in entries]
