"""What a token opens (a seat, an account), remembered for a while by each gateway process.

A token is looked up in Redis once, then served from here for ``ttl_s`` seconds, so a token
that expires or is revoked in Redis stops working here too within that time; the cache holds
at most ``size`` tokens, the least recently used leaving first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SeatCache(Generic[T]):
    """Token hash -> what it opens (a seat, an account), each entry good for ``ttl_s``
    seconds."""

    def __init__(
        self, ttl_s: float = 30.0, size: int = 100_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self.clock = clock
        self._seats: OrderedDict[str, tuple[float, T]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seats)

    def get(self, digest: str) -> T | None:
        """The seat of a token hash, unless it was never looked up or its time is up."""
        found = self._seats.get(digest)
        if found is None:
            return None
        until, seat = found
        if self.clock() >= until:
            del self._seats[digest]
            return None
        self._seats.move_to_end(digest)
        return seat

    def drop(self, digest: str) -> None:
        """Forget a token hash (its token was revoked here): the next look-up asks Redis."""
        self._seats.pop(digest, None)

    def drop_if(self, forget: Callable[[T], bool]) -> None:
        """Forget every token hash whose entry ``forget`` picks (an account banned)."""
        for digest in [d for d, (_, entry) in self._seats.items() if forget(entry)]:
            del self._seats[digest]

    def put(self, digest: str, seat: T) -> None:
        """Remember a token hash's seat for ``ttl_s`` seconds."""
        self._seats[digest] = (self.clock() + self.ttl_s, seat)
        self._seats.move_to_end(digest)
        while len(self._seats) > self.size:
            self._seats.popitem(last=False)
