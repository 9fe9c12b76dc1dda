"""Commands to the referee, many per round trip.

Each move is one Lua call: count it against the seat's move limit (:class:`Charge`: refused,
nothing sent, when over), then send the command unless its id was already applied (then
return the versions it made). Calls made while a batch is on its way to Redis go together in
the next pipeline, so a busy gateway pays one round trip per batch rather than per move; the
batches go over a :class:`Lane` of their own.

On one Redis node a charged call's keys (the match's, the seat's bucket, the token's bucket
of rejected moves) need not share a slot, and the charge is counted in the same call. On a
Redis Cluster a script keeps to one slot: the charge is counted first (:meth:`Charge.hit`, one
call per bucket, pipelined), then the command is sent; a command refused by its limit is not
sent either way.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from events.model import AnyCommand
from services.core.commands import command_message
from services.gateway.limits import BUCKET, Charge
from services.redis.lane import ClusterLane, Lane
from services.redis.lua import Arg, Call, LuaScript
from services.store.keys import Keys

SEND = LuaScript(
    BUCKET
    + """
-- KEYS: the match's dedupe hash, its partition's command stream, the command's in-flight
--   mark, then any token buckets the command is charged to (limits.Charge: the first takes
--   a token, the others are looked at)
-- ARGV: command id, command envelope, then each bucket's rate, burst and cost, then how long
--   (ms) the in-flight mark lasts
-- Returns {what, each bucket's 1 or 0 (a token was left), each bucket's tokens left}: what
-- is 'refused' (a bucket had no token: nothing sent), 'sent', 'inflight' (a copy sent by
-- someone else is on its way: not sent again), or the versions the command id made when it
-- was applied before (first:last; not sent again).
local n = #KEYS - 3
local reply = {'sent'}
if n > 0 then
  local now = microseconds()
  for i = 1, n do
    local at = 3 * i
    local ok, left = take(
      KEYS[3 + i], tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), now)
    if ok == 0 then
      reply[1] = 'refused'
    end
    reply[1 + i] = ok
    reply[1 + n + i] = string.format('%.6f', left)
  end
  if reply[1] == 'refused' then
    return reply
  end
end
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then
  reply[1] = done
  return reply
end
if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[#ARGV]) then
  reply[1] = 'inflight'
  return reply
end
redis.call('XADD', KEYS[2], '*', '__data__', ARGV[2])
return reply
"""
)


INFLIGHT = b"inflight"
"""What :meth:`CommandSender.send` returns for a command a copy of which, sent by another
gateway, is still on its way: this one is its replay."""


class CommandSender:
    """Queues commands for the referee and sends them in pipelined batches, one at a time."""

    def __init__(
        self, lane: Lane | ClusterLane, topo: Keys, reply_to: str, inflight_ms: int = 10_000
    ) -> None:
        self.lane = lane  # a connection of its own: a batch is one write and one read
        self.topo = topo
        self.reply_to = reply_to
        self.inflight_ms = inflight_ms  # how long a sent command marks its id as on its way
        self._queue: list[tuple[Call, asyncio.Future[list[Any]]]] = []
        self._flushing = False
        self.batches = 0

    async def send(
        self, match_id: str, command_id: str, command: AnyCommand, charge: Charge | None = None
    ) -> bytes | None:
        """Send ``command`` unless ``command_id`` was applied to the match already; then
        return the versions it made (``first:last``), or :data:`INFLIGHT` when a copy sent by
        another gateway is on its way; else None. With a ``charge``, the
        command is counted against its limit first and not sent when over it (LimitExceeded).
        """
        message = command_message(self.topo, match_id, command_id, command, self.reply_to)
        keys = [
            self.topo.dedupe(match_id),
            message.stream,
            self.topo.inflight(match_id, command_id),
        ]
        args: list[Arg] = [command_id, message.payload]
        if charge is not None and isinstance(self.lane, ClusterLane):
            await charge.hit(self.lane.client)  # raises LimitExceeded: nothing sent
            charge = None
        if charge is not None:
            keys += charge.keys()
            args += charge.args()
        args.append(self.inflight_ms)
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queue.append(((keys, args), fut))
        if not self._flushing:
            self._flushing = True
            asyncio.create_task(self._flush())  # noqa: RUF006 - every caller awaits its future
        reply = await fut
        what = reply[0]
        if charge is not None:
            n = (len(reply) - 1) // 2
            charge.settle(reply[1 : 1 + n], reply[1 + n :])
        return None if what == b"sent" else cast(bytes, what)

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                self.batches += 1
                try:
                    replies = await self.lane.run(SEND, [call for call, _ in batch])
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
