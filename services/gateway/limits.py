"""Rate and concurrency limits, kept in the gateway process (each instance counts its own).

A limit that is hit answers 429 with a JSON body naming the limit and when to retry (also in
``Retry-After``); every answer to a move carries ``RateLimit-Limit``, ``RateLimit-Remaining``
and ``RateLimit-Reset`` so a client can pace itself before it is refused.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


class LimitExceeded(Exception):
    """Raised when a request is over a limit: ``limit`` names it, ``retry_after`` (seconds) says
    when trying again can succeed."""

    def __init__(self, limit: str, retry_after: float, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after


@dataclass(slots=True)
class Bucket:
    """A token bucket: ``burst`` requests at once, refilled at ``rate`` a second."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float) -> float:
        """Take one token and return 0, or return how many seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimiter:
    """One token bucket per key (a token's hash, a client address), forgotten when full."""

    def __init__(self, name: str, rate: float, burst: int) -> None:
        self.name = name
        self.rate = rate
        self.burst = float(burst)
        self._buckets: dict[str, Bucket] = {}

    def hit(self, key: str) -> Bucket:
        """Count one request for ``key``; raise LimitExceeded when its bucket is empty."""
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(self.rate, self.burst, self.burst, now)
        wait = bucket.take(now)
        if wait:
            raise LimitExceeded(
                self.name,
                round(wait, 3),
                f"more than {self.rate:g} requests a second (burst {self.burst:g}); "
                f"retry in {wait:.3f} s",
            )
        return bucket

    def headers(self, bucket: Bucket) -> list[tuple[bytes, bytes]]:
        """RateLimit-* headers after a request counted against ``bucket``."""
        reset = math.ceil((self.burst - bucket.tokens) / self.rate)
        return [
            (b"ratelimit-limit", b"%d" % int(self.burst)),
            (b"ratelimit-remaining", b"%d" % int(bucket.tokens)),
            (b"ratelimit-reset", b"%d" % reset),
        ]

    def sweep(self) -> None:
        """Forget buckets that have refilled: they behave exactly like new ones."""
        now = time.monotonic()
        full = [
            k
            for k, b in self._buckets.items()
            if b.tokens + (now - b.stamp) * self.rate >= self.burst
        ]
        for k in full:
            del self._buckets[k]


class Concurrency:
    """How many streams each key has open, at most ``limit`` at once."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self._open: dict[str, int] = {}

    def acquire(self, key: str) -> None:
        """Count a new stream for ``key``; raise LimitExceeded when it has ``limit`` open."""
        n = self._open.get(key, 0)
        if n >= self.limit:
            raise LimitExceeded(
                self.name,
                1.0,
                f"{self.limit} streams are already open with this credential; close one (a "
                "dropped stream is noticed within a keep-alive interval)",
            )
        self._open[key] = n + 1

    def release(self, key: str) -> None:
        """A stream of ``key`` ended."""
        n = self._open.get(key, 0) - 1
        if n > 0:
            self._open[key] = n
        else:
            self._open.pop(key, None)
