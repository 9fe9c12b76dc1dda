"""Admission of bulk reads, so that play comes first.

A gateway process serves play (moves, seat streams) and bulk reads (a match's replay, a
spectator stream resumed from a point of the log, the match lists, the ratings and the players'
pages) from one event loop and one Redis client. A bulk read of a long log holds a connection
of that client's pool while Redis sends the log, and the loop while the log is decoded, folded,
encoded and written: a burst of them once held every connection, so that moves and feeds
waited for one and requests timed out into 503 while Redis was healthy, and the loop had little
time left for the moves.

So a bulk read first takes a place here, in its process: at most ``limit`` are under way at
once, and they start at most ``rate`` a second (a burst of ``limit`` at once; an answer of
more than :data:`TURN_BYTES` counts as one read for each such part of it, since writing it is
what costs), which bounds the share of the loop and of the Redis pool they can take, however
cheap each one is. A read that
cannot start at once waits for its turn, first come first served, if that turn comes within
``wait_s``; else it is refused at once with :class:`~services.gateway.limits.LimitExceeded`
(a 429, limit ``bulk_reads``) whose ``retry_after`` is a turn of its own: the reads refused
together are told to come back one after the other, at the rate, not all at once (none
later than :data:`RETRY_MAX_S`).

A place is held while the answer is made and, for a long one (a replay, the backlog of a
finished match's stream: :class:`Held`), while it is written. Play never takes a place.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.limits import LimitExceeded, Quota

A = TypeVar("A")
T = TypeVar("T")

TURN_BYTES = 256 << 10
"""An answer counts as one bulk read for each this many bytes of it (a long replay: several)."""
RETRY_MIN_S = 0.05
"""The soonest a refused bulk read is told to come back."""
RETRY_MAX_S = 10.0
"""The latest: however many were refused before (a client that never waits for its turn
pushes the turns on), none is told to wait longer than this."""
_SMOOTHING = 0.2
"""How much each read's time moves the running average of how long a place is held."""


class Admission:
    """Places for bulk reads in one process: ``limit`` at once, started at most ``rate`` a
    second, none waiting for its turn longer than ``wait_s``; the refused are told when to
    come back (limit ``name``)."""

    def __init__(self, name: str, limit: int, rate: float, wait_s: float) -> None:
        self.name = name
        self.limit = limit
        self.rate = rate
        self.wait_s = wait_s
        self.active = 0
        self._interval = 1.0 / rate
        self._burst_s = (limit - 1) * self._interval  # how far ahead a burst may start
        self._next = 0.0  # when the next read is due at the rate (loop time)
        self._promised = 0.0  # the last turn a refused read was told to come back at
        self._waiting: deque[asyncio.Future[bool]] = deque()  # for a place, in order
        self._held_s = self._interval  # how long a place is held, on average lately

    @property
    def waiting(self) -> int:
        """How many reads wait for a place now."""
        return len(self._waiting)

    async def take(self) -> Place:
        """A place, held until it is released; raise LimitExceeded when the read's turn is
        more than ``wait_s`` away."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = max(self._next, now)  # when it is due at the rate, a burst being allowed ahead
        turn = max(now, due - self._burst_s)
        if turn - now > self.wait_s:
            raise self._refused(now, turn)
        self._next = due + self._interval
        if turn > now:
            await asyncio.sleep(turn - now)
        await self._enter(now + self.wait_s)
        return Place(self)

    @contextlib.asynccontextmanager
    async def place(self) -> AsyncIterator[Place]:
        """Hold a place while the block runs (see :meth:`take`)."""
        place = await self.take()
        try:
            yield place
        finally:
            place.release()

    def admitted(self, handler: Callable[[A], Awaitable[T]]) -> Callable[[A], Awaitable[T]]:
        """``handler``, run in a place of its own."""

        async def run(request: A) -> T:
            async with self.place():
                return await handler(request)

        run.__name__ = getattr(handler, "__name__", "admitted")
        return run

    async def _enter(self, deadline: float) -> None:
        """Wait for one of the ``limit`` places, until ``deadline`` (loop time) at most."""
        if self.active < self.limit and not self._waiting:
            self.active += 1
            return
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[bool] = loop.create_future()
        self._waiting.append(turn)
        timer = loop.call_at(deadline, _give_up, turn)
        try:
            admitted = await turn
        except BaseException:  # cancelled (the client went away) while it waited
            if turn.done() and not turn.cancelled() and turn.result():
                self._leave()  # a place had just been given to it: pass it on
            else:
                self._discard(turn)
            raise
        finally:
            timer.cancel()
        if not admitted:
            self._discard(turn)
            now = loop.time()
            raise self._refused(now, now + self._held_s * (self.waiting + 1) / self.limit)

    def charge(self, size: int) -> None:
        """A read's answer has ``size`` bytes: the reads after it start later by the turns
        its parts beyond the first take."""
        extra = (size - 1) // TURN_BYTES
        if extra > 0:
            now = asyncio.get_running_loop().time()
            self._next = max(self._next, now) + extra * self._interval

    def _left(self, held_s: float) -> None:
        """A place held ``held_s`` seconds was released."""
        self._held_s += (held_s - self._held_s) * _SMOOTHING
        self._leave()

    def _leave(self) -> None:
        """A place is free: it goes to the first read still waiting, else back."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(True)
                return
        self.active -= 1

    def _discard(self, turn: asyncio.Future[bool]) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(turn)

    def _refused(self, now: float, turn: float) -> LimitExceeded:
        """The refusal of a read whose turn is at ``turn``: told to come back then, or after
        the reads refused before it, one an interval after the other."""
        self._promised = min(max(self._promised + self._interval, turn), now + RETRY_MAX_S)
        retry = max(RETRY_MIN_S, self._promised - now)
        return LimitExceeded(
            self.name,
            Quota(self.limit, 0, retry, retry),
            f"this gateway starts {self.rate:g} bulk reads a second, {self.limit} at once, and "
            "has none free now: retry after retry_after seconds (play is never held up by them)",
        )


class Place:
    """A place taken: released once, by :meth:`release` (again, it does nothing)."""

    __slots__ = ("_admission", "_started")

    def __init__(self, admission: Admission) -> None:
        self._admission: Admission | None = admission
        self._started = time.monotonic()

    def charge(self, size: int) -> None:
        """The answer made in this place has ``size`` bytes (see :meth:`Admission.charge`)."""
        if self._admission is not None:
            self._admission.charge(size)

    def release(self) -> None:
        """Give the place back."""
        admission, self._admission = self._admission, None
        if admission is not None:
            admission._left(time.monotonic() - self._started)


class Held:
    """An answer whose place is released once it has been written (or has failed to be)."""

    def __init__(self, answer: ASGIApp, place: Place) -> None:
        self.answer = answer
        self.place = place
        self.status = getattr(answer, "status", 200)  # for the endpoint's metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.answer(scope, receive, send)
        finally:
            self.place.release()


def _give_up(turn: asyncio.Future[bool]) -> None:
    if not turn.done():
        turn.set_result(False)
