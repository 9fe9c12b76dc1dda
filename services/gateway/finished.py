"""What a gateway keeps of finished matches: a finished match's log never changes, so its replay
and its streams' lines are read, folded and encoded once, then answered from memory.

Each is kept as one body of bytes, with, for streams, where each event's line ends in it, so
that a stream resumed after any event is one slice. What is kept is bounded by its size in
bytes, the least recently used leaving first; while one request makes an answer, the others
asking for it wait for that one rather than making it again.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kept:
    """An answer about a finished match: its ``body``, and for a stream's lines where each
    line ends in it (``ends[v - 1]``: the end of version v's line)."""

    body: bytes
    ends: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """About how many bytes it holds."""
        return len(self.body) + 8 * len(self.ends)

    def lines(self, after: int, upto: int) -> bytes:
        """The lines of the versions after ``after`` up to ``upto``."""
        start = self.ends[after - 1] if after > 0 else 0
        return self.body[start : self.ends[upto - 1]] if upto > after else b""


class Finished:
    """Answers about finished matches, up to ``max_bytes`` of them."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._kept: OrderedDict[Hashable, Kept] = OrderedDict()
        self._making: dict[Hashable, asyncio.Future[Kept | None]] = {}

    def get(self, key: Hashable) -> Kept | None:
        """The answer kept under ``key``, if any."""
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
        return kept

    async def get_or_make(
        self, key: Hashable, make: Callable[[], Awaitable[Kept | None]]
    ) -> Kept | None:
        """The answer kept under ``key``, else what ``make`` makes (kept, unless None: not an
        answer to keep), made once however many ask at the same time (if the one making it
        fails, each of the others makes it itself)."""
        kept = self.get(key)
        if kept is not None:
            return kept
        making = self._making.get(key)
        if making is not None:
            kept = await asyncio.shield(making)
            return kept if kept is not None else await make()
        made: asyncio.Future[Kept | None] = asyncio.get_running_loop().create_future()
        self._making[key] = made
        try:
            kept = await make()
        finally:
            del self._making[key]
            made.set_result(kept)  # None when make failed: those waiting make it themselves
        if kept is not None:
            self.put(key, kept)
        return kept

    def put(self, key: Hashable, kept: Kept) -> None:
        """Keep an answer (not one larger than the whole budget)."""
        if kept.size > self.max_bytes:
            return
        old = self._kept.pop(key, None)
        if old is not None:
            self.size -= old.size
        self._kept[key] = kept
        self.size += kept.size
        while self.size > self.max_bytes:
            _, dropped = self._kept.popitem(last=False)
            self.size -= dropped.size
