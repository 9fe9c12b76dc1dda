"""Commands to the referee, many per round trip.

Each move is one Lua call: send the command unless its id was already applied (then return
the versions it made). Calls made while a batch is on its way to Redis go together in the
next pipeline, so a busy gateway pays one round trip per batch rather than per move.
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from events.model import AnyCommand
from services.core.commands import command_message
from services.redis.lua import Call, LuaScript
from services.store.keys import Keys

SEND = LuaScript(
    """
-- KEYS: the match's dedupe hash, its partition's command stream
-- ARGV: command id, command envelope
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then
  return done
end
redis.call('XADD', KEYS[2], '*', '__data__', ARGV[2])
return false
"""
)


class CommandSender:
    """Queues commands for the referee and sends them in pipelined batches, one at a time."""

    def __init__(self, redis: Redis, topo: Keys, reply_to: str) -> None:
        self.redis = redis
        self.topo = topo
        self.reply_to = reply_to
        self._queue: list[tuple[Call, asyncio.Future[bytes | None]]] = []
        self._flushing = False
        self.batches = 0

    async def send(self, match_id: str, command_id: str, command: AnyCommand) -> bytes | None:
        """Send ``command`` unless ``command_id`` was applied to the match already; then
        return the versions it made (``first:last``), else None."""
        message = command_message(self.topo, match_id, command_id, command, self.reply_to)
        keys = [self.topo.dedupe(match_id), message.stream]
        fut: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._queue.append(((keys, [command_id, message.payload]), fut))
        if not self._flushing:
            self._flushing = True
            asyncio.create_task(self._flush())  # noqa: RUF006 - every caller awaits its future
        return await fut

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                self.batches += 1
                try:
                    replies = await SEND.many(self.redis, [call for call, _ in batch])
                except Exception as e:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                for (_, fut), reply in zip(batch, replies, strict=True):
                    if fut.done():
                        continue
                    if isinstance(reply, Exception):
                        fut.set_exception(reply)
                    else:
                        fut.set_result(reply)
        finally:
            self._flushing = False
