"""The message transport: what the services need from Redis besides the event store.

Commands, turns and replies travel on streams read through consumer groups: a batch is read,
processed and acknowledged; what a dead consumer left pending is claimed by another; what keeps
failing is parked on the dead-letter stream. Turn deadlines sit in per-partition schedules on
the transport's clock — on Redis the server's, read inside the scripts, so no process's own
clock decides when a turn is over — and referees hold expiring leases on partitions. The
referee, the bot workers and the projector reach Redis only through this seam and the event
store, so the same service code runs on the in-memory backend (one process, for fast tests)
and on Redis.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from services.store.keys import Keys

DATA = b"__data__"
"""The field of a stream entry that holds its payload (FastStream's name for it)."""


@dataclass(slots=True)
class Entry:
    """One stream entry read through a group: where it came from, its id and its payload,
    and when it reached its stream (ms on the transport's clock: on Redis, its id's time)."""

    stream: str
    id: bytes
    data: bytes | None  # None when the entry has no ``__data__`` field
    deliveries: int = 1
    arrived_ms: int = 0


@dataclass(frozen=True, slots=True)
class DueDeadlines:
    """One partition's deadlines as a check found them, on the transport's clock."""

    matches: list[str]
    """The matches whose turn is over, soonest first: every deadline passed with no command
    that arrived before it still waiting."""
    now_ms: int
    shifted_ms: int = 0
    """Every deadline of the partition still running was pushed back this much: the time
    since the last check, which nobody spent serving it (a stall)."""
    held: int = 0
    """Deadlines passed that wait for commands which arrived before them to be processed."""


@dataclass(frozen=True, slots=True)
class Message:
    """A payload to add to a stream (in field ``__data__``)."""

    stream: str
    payload: bytes


class Consumer(abc.ABC):
    """One consumer of a group over several streams: read, acknowledge, claim, dead-letter."""

    group: str
    name: str
    streams: list[str]
    """The streams read; a referee changes them as it gains or loses partitions."""
    held: set[tuple[str, bytes]]
    """(stream, id) of the entries this consumer's worker is handling now: read and not yet
    done with, so never claimed back from under it however long they take."""

    def hold(self, entries: Sequence[Entry]) -> None:
        """Mark entries as being handled by this consumer (from their read to their end)."""
        self.held.update((e.stream, e.id) for e in entries)

    def release(self, entries: Sequence[Entry]) -> None:
        """Done with entries, acknowledged or not: from now on a claim may take those that are
        still pending (a batch that failed is handled again that way)."""
        self.held.difference_update((e.stream, e.id) for e in entries)

    @abc.abstractmethod
    async def start(self) -> None:
        """Create the group on every stream at the start (no earlier entry is missed)."""

    @abc.abstractmethod
    async def read(self, pending: bool = False) -> list[Entry]:
        """The next batch of new entries (waiting briefly when there are none), or this
        consumer's own pending entries with ``pending`` (as after a restart)."""

    @abc.abstractmethod
    async def ack(self, entries: Sequence[Entry]) -> None:
        """Acknowledge processed entries (after their effects are durable)."""

    @abc.abstractmethod
    async def claim(self, min_idle_ms: int) -> list[Entry]:
        """Take over entries pending with any consumer for ``min_idle_ms`` — but never one this
        consumer holds (see :attr:`held`): a slow batch is not decided a second time beside
        the first. An entry delivered more than the limit is dead-lettered instead of
        returned."""

    @abc.abstractmethod
    async def dead_letter(self, entry: Entry, reason: str) -> None:
        """Park an entry that cannot be processed, acknowledge it, and say why in the log."""

    @abc.abstractmethod
    async def answer(self, messages: Sequence[Message], done: Sequence[Entry]) -> None:
        """Add ``messages`` and acknowledge ``done`` in one round trip (not atomically: a crash
        in between means an entry answered again, so receivers must be idempotent)."""

    async def close(self) -> None:  # noqa: B027 - most consumers hold nothing to stop
        """Stop any read still in flight (on the way out)."""


class LeaseTable(abc.ABC):
    """Expiring partition leases and the heartbeats of the processes that hold them."""

    @abc.abstractmethod
    async def heartbeat(self, name: str, ttl_ms: int) -> list[str]:
        """Record that ``name`` is alive; return every holder alive within ``ttl_ms``."""

    @abc.abstractmethod
    async def renew(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Extend ``name``'s lease on ``partition``; False if it no longer holds it."""

    @abc.abstractmethod
    async def take(self, partition: int, name: str, ttl_ms: int) -> bool:
        """Take ``partition`` if nobody holds it; True if ``name`` holds it now."""

    @abc.abstractmethod
    async def release(self, partition: int, name: str) -> None:
        """Give ``partition`` back if ``name`` holds it."""

    @abc.abstractmethod
    async def leave(self, name: str) -> None:
        """Remove ``name``'s heartbeat (on a clean stop)."""


class Transport(abc.ABC):
    """Streams with consumer groups, schedules and leases, for one key layout."""

    keys: Keys

    @abc.abstractmethod
    def consumer(
        self,
        group: str,
        name: str,
        streams: Sequence[str],
        *,
        count: int,
        max_deliveries: int,
        block_ms: int = 20,
    ) -> Consumer:
        """A consumer ``name`` of ``group`` over ``streams``."""

    @abc.abstractmethod
    async def publish(self, messages: Sequence[Message]) -> None:
        """Add ``messages`` to their streams, in one round trip."""

    @abc.abstractmethod
    async def reply(self, stream: str, payload: bytes) -> None:
        """Add a reply to a sender's reply stream, which keeps only its latest entries."""

    @abc.abstractmethod
    async def due(self, keys: Sequence[str], now_ms: int, count: int) -> list[list[str]]:
        """For each schedule, up to ``count`` members whose time is at or before ``now_ms``,
        soonest first (one round trip for all of them)."""

    @abc.abstractmethod
    async def deadlines_due(
        self, partitions: Sequence[int], group: str, count: int, stall_ms: int
    ) -> list[DueDeadlines]:
        """Check each partition's turn deadlines on the transport's clock (one round trip for
        all of them): up to ``count`` whose turn is over, soonest first.

        A deadline is over only once every command that reached the partition's command
        stream before it has been processed by ``group`` (acknowledged: neither pending nor
        unread), so a move queued in time is never timed out. A check that finds more than
        ``stall_ms`` since the partition's last check — Redis paused, its referee stalled or
        gone — first pushes every deadline still running at the last check back by that gap:
        the players are not charged the time nobody served them. The append that judges a
        move or a timeout (``TurnCheck``, services/store/base.py) makes up for a stall the
        same way, whichever of the two comes first.
        """

    @abc.abstractmethod
    async def reschedule(self, key: str, member: str, at_ms: int | None) -> None:
        """Set a member's time in a schedule, or remove it (``at_ms`` None)."""

    @abc.abstractmethod
    def leases(self) -> LeaseTable:
        """The partition lease table of this layout."""

    @abc.abstractmethod
    async def trim(self, streams: Sequence[str]) -> int:
        """Remove from each stream the entries every consumer group reading it has been
        delivered and has acknowledged (and nothing a group still needs: its pending entries
        and what it has not read yet); a stream no group reads is left alone. Return how
        many entries went."""

    async def aclose(self) -> None:
        """Release connections; the transport is unusable afterwards."""
        return None
