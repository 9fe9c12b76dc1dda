"""The receivers of a match's lines: a :class:`Subscriber` per open stream or socket, holding
the framed lines waiting to be written (bounded: a client too far behind is cut off, to resume),
and a :class:`Waker` for one reader of many subscribers (the account's play stream, its
channel, a socket)."""

from __future__ import annotations

import asyncio

from events.model import AnyEvent, MatchEnded, RoundEnded, TurnTimedOut


class Subscriber:
    """One open stream: framed lines waiting to be written, for one seat or a spectator."""

    __slots__ = (
        "_waiter",
        "after",
        "chunks",
        "everything",
        "finished",
        "limit",
        "overflow",
        "seat",
        "size",
        "sse",
        "until_turn",
        "views",
        "waker",
    )

    def __init__(
        self,
        seat: int | None,
        sse: bool,
        after: int,
        limit: int,
        everything: bool = True,
        until_turn: bool = False,
        waker: Waker | None = None,
        views: bool = False,
    ) -> None:
        self.seat = seat
        self.sse = sse
        self.everything = everything  # every event, or only those :func:`essential` keeps
        self.until_turn = until_turn  # the stream ends after its first turn line
        self.views = views  # a snapshot after each batch of events, and at the end
        self.after = after  # live events up to this version are not sent (resumed streams)
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.finished = False
        self.overflow = False
        self._waiter: asyncio.Future[None] | None = None
        self.waker = waker  # one reader of many streams (the play stream) instead of its own

    def push(self, data: bytes) -> None:
        """Queue bytes for the client; a client too far behind is cut off (it will resume)."""
        if self.finished:
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > self.limit:
            self.overflow = True
            self.chunks.clear()
            self.finish()
            return
        self._wake()

    def finish(self) -> None:
        """Nothing more will come: the writer sends what is queued and ends the response."""
        self.finished = True
        self._wake()

    def push_turn(self, data: bytes) -> None:
        """Queue a turn line; a stream opened ``until=turn`` ends with it."""
        self.push(data)
        if self.until_turn:
            self.finish()

    def _wake(self) -> None:
        if self.waker is not None:
            self.waker.wake(self)
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self, timeout: float) -> bytes | None:
        """Everything queued, at once; b"" after ``timeout`` with nothing to send; None at the
        end."""
        if not self.chunks and not self.finished:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await _until(self._waiter, timeout)
            finally:
                self._waiter = None
        return self.drain()

    def drain(self) -> bytes | None:
        """Everything queued now (b"" if nothing); None once finished with nothing left."""
        if not self.chunks:
            return None if self.finished else b""
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks.clear()
        self.size = 0
        return data


class Waker:
    """One reader of many subscribers (the play stream: every seat of an account): it wakes
    when any of them has something, and learns which."""

    __slots__ = ("_waiter", "ready")

    def __init__(self) -> None:
        self.ready: dict[Subscriber, None] = {}  # in the order they woke
        self._waiter: asyncio.Future[None] | None = None

    def wake(self, sub: Subscriber) -> None:
        """``sub`` has something queued, or has finished."""
        self.ready[sub] = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def poke(self) -> None:
        """Wake the reader with no subscriber ready: something else wants its attention."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wait_now(self) -> list[Subscriber]:
        """The subscribers that woke since the last look, without waiting."""
        ready = list(self.ready)
        self.ready.clear()
        return ready

    async def wait(self, timeout: float) -> list[Subscriber]:
        """The subscribers that woke, waiting up to ``timeout`` seconds for one."""
        if not self.ready:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await _until(self._waiter, timeout)
            finally:
                self._waiter = None
        ready = list(self.ready)
        self.ready.clear()
        return ready


class Watch(Waker):
    """A socket's waker (the seat's socket, the account channel): it also tells at once when a
    subscriber is cut for being too far behind, though the writer may be stuck on a client
    that does not read."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        super().__init__()
        self.cut = asyncio.Event()

    def wake(self, sub: Subscriber) -> None:
        """``sub`` has something queued, or has finished (cut, when over its limit)."""
        super().wake(sub)
        if sub.overflow:
            self.cut.set()


def essential(event: AnyEvent, seat: int | None) -> bool:
    """The events a stream with ``events=minimal`` still carries: the receiver's own timeouts
    and the ends of rounds and of the match."""
    if isinstance(event, TurnTimedOut):
        return event.seat == seat
    return isinstance(event, RoundEnded | MatchEnded)


async def _until(waiter: asyncio.Future[None], timeout: float) -> None:
    """Wait for ``waiter`` to be settled, or ``timeout`` seconds (a timer, not wait_for: no
    task is made)."""
    handle = asyncio.get_running_loop().call_later(timeout, _settle, waiter)
    try:
        await waiter
    finally:
        handle.cancel()


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
