"""The errors the event store raises on purpose."""

from __future__ import annotations

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,  # refused, reset, closed, or the server still loading its data
    RedisTimeoutError,
    TimeoutError,
    OSError,
)
"""What a store that cannot be reached just now raises (Redis away, paused, restarting): the
work that met it is not at fault, and is tried again rather than given up."""


class StoreError(Exception):
    """Base class of the errors the event store raises on purpose."""


class ConcurrencyError(StoreError):
    """Raised when a match's version is not the one the appender expected; nothing is written."""

    def __init__(self, match_id: str, expected: int, actual: int) -> None:
        super().__init__(f"match {match_id!r} is at version {actual}, not {expected}")
        self.match_id = match_id
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[type[ConcurrencyError], tuple[str, int, int]]:
        return type(self), (self.match_id, self.expected, self.actual)


class InvalidMatchId(StoreError, ValueError):
    """Raised for a match id that is empty, longer than 128 characters, or holds braces,
    whitespace or control characters."""


class InvalidAppend(StoreError, ValueError):
    """Raised for an append that can never succeed as given: a negative expected version, an
    empty command id, an outbox stream, schedule key or ack stream outside the match's
    partition, a schedule entry without a member or with a negative time, or an ack with an
    empty group or a malformed entry id."""
