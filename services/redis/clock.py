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
