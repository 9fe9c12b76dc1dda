"""The Redis server's clock, as a process that must tell the time without asking each time.

Deadlines are set and compared on the server's clock (inside the scripts); a process that
reports one to a client — how many milliseconds a seat has left — needs the server's "now"
too, while its own clock may be seconds off. :class:`ServerClock` keeps the offset between the
two, measured with ``TIME``: of the last few readings, the one with the shortest round trip
(the server read its clock somewhere within that trip, so the midpoint is the best guess).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from services.redis.connection import Client

READINGS = 5
"""How many recent readings the offset is chosen from."""


class ServerClock:
    """This process's clock plus the offset to the Redis server's; 0 until :meth:`read`."""

    def __init__(self) -> None:
        self.offset = 0.0
        """Seconds to add to this process's clock to get the server's."""
        self.round_trip = float("inf")
        """The round trip (s) of the reading the offset comes from."""
        self._readings: deque[tuple[float, float]] = deque(maxlen=READINGS)

    def now(self) -> float:
        """The server's time now (seconds since the epoch), as best this process can tell."""
        return time.time() + self.offset

    async def read(self, client: Client) -> None:
        """Read the server's clock once more and keep the best offset of the last few."""
        sent = time.time()
        reply = await client.time()
        came = time.time()
        seconds, micros = _time(reply)
        self._readings.append((came - sent, seconds + micros / 1e6 - (sent + came) / 2))
        self.round_trip, self.offset = min(self._readings)


def _time(reply: Any) -> tuple[int, int]:
    """TIME's answer, from a node, or from one node of a cluster's answers by node."""
    if isinstance(reply, dict):
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds), int(micros)


# The server's clock inside a script, and the make-up for a stall: one text, run by every
# script that reads a partition's deadlines (the deadline check, the append that judges a move
# or a timeout), so that whichever runs first after a stall pushes the deadlines back before
# anything is judged against them.
CLOCK_LUA = """
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A gap longer than stall_ms since the partition's deadlines were last checked (clock) is
-- time nobody served them (Redis paused, the referee stalled or dead): every deadline still
-- running at the last check is pushed back by it; one already passed then is left as it is.
-- The last check is written at most every 250 ms (and whenever the clock went back).
-- Returns by how much the deadlines moved (0: no stall).
local function make_up_for_stall(deadlines, clock, stall_ms, now)
  local last = tonumber(redis.call('GET', clock))
  local shifted = 0
  if last and now - last > stall_ms then
    shifted = now - last
    local running = redis.call('ZRANGEBYSCORE', deadlines, '(' .. last, '+inf', 'WITHSCORES')
    for i = 1, #running, 2 do
      redis.call('ZADD', deadlines, tonumber(running[i + 1]) + shifted, running[i])
    end
  end
  if not last or now - last >= 250 or now < last then
    redis.call('SET', clock, now)
  end
  return shifted
end
"""
