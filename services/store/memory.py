"""The in-memory event store: same semantics and errors as the Redis one, for pure tests and
offline replay. Not shared between processes; positions are entry counts as strings.

There are no consumer groups here: an append's acknowledgement is recorded, and `acked`
shows which entry ids of a stream a group has acknowledged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from services.store.base import (
    START,
    Ack,
    AppendRequest,
    AppendResult,
    ConcurrencyError,
    EventStore,
    NewEvent,
    OutboxEntry,
    Recorded,
    Schedule,
    StreamEntry,
)
from services.store.checks import check_append
from services.store.keys import DEFAULT_PARTITIONS, DEFAULT_PREFIX, Keys


class MemoryEventStore(EventStore):
    """Event store kept in dicts and lists of this process."""

    def __init__(
        self, *, partitions: int = DEFAULT_PARTITIONS, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.keys = Keys(prefix, partitions)
        self._matches: dict[str, list[Recorded]] = {}
        self._dedupe: dict[str, dict[str, AppendResult]] = {}
        self._logs: list[list[Recorded]] = [[] for _ in range(partitions)]
        self._streams: dict[str, list[dict[bytes, bytes]]] = {}
        self._schedules: dict[str, dict[str, int]] = {}
        self._acked: dict[tuple[str, str], set[str]] = {}

    async def append(
        self,
        match_id: str,
        events: Sequence[NewEvent],
        expected_version: int,
        command_id: str,
        outbox: Sequence[OutboxEntry] = (),
        schedule: Sequence[Schedule] = (),
        ack: Ack | None = None,
    ) -> AppendResult:
        """Atomically append `events`, `outbox` and `schedule` if the match is at
        `expected_version`, and record `ack`."""
        partition = check_append(
            self.keys, match_id, expected_version, command_id, outbox, schedule, ack
        )
        return self._append(
            partition, match_id, events, expected_version, command_id, outbox, schedule, ack
        )

    async def append_many(
        self, batch: Sequence[AppendRequest]
    ) -> list[AppendResult | ConcurrencyError]:
        """Run many appends; each is atomic, a conflict is returned in its slot."""
        partitions = [
            check_append(
                self.keys,
                r.match_id,
                r.expected_version,
                r.command_id,
                r.outbox,
                r.schedule,
                r.ack,
            )
            for r in batch
        ]
        results: list[AppendResult | ConcurrencyError] = []
        for partition, r in zip(partitions, batch, strict=True):
            try:
                results.append(
                    self._append(
                        partition,
                        r.match_id,
                        r.events,
                        r.expected_version,
                        r.command_id,
                        r.outbox,
                        r.schedule,
                        r.ack,
                    )
                )
            except ConcurrencyError as conflict:
                results.append(conflict)
        return results

    def _append(
        self,
        partition: int,
        match_id: str,
        events: Sequence[NewEvent],
        expected_version: int,
        command_id: str,
        outbox: Sequence[OutboxEntry],
        schedule: Sequence[Schedule],
        ack: Ack | None,
    ) -> AppendResult:
        seen = self._dedupe.get(match_id)
        if seen is not None and command_id in seen:
            self._ack(ack)
            return replace(seen[command_id], duplicate=True)
        version = len(self._matches.get(match_id, ()))
        if version != expected_version:
            raise ConcurrencyError(match_id, expected_version, version)
        self._ack(ack)
        recorded = [
            Recorded(match_id, expected_version + i, event.type, bytes(event.data))
            for i, event in enumerate(events, start=1)
        ]
        if recorded:
            self._matches.setdefault(match_id, []).extend(recorded)
            self._logs[partition].extend(recorded)
        for entry in outbox:
            self._streams.setdefault(entry.stream, []).append({b"__data__": bytes(entry.payload)})
        for change in schedule:
            times = self._schedules.setdefault(change.key, {})
            if change.at_ms is None:
                times.pop(change.member, None)
            else:
                times[change.member] = change.at_ms
            if not times:
                del self._schedules[change.key]
        result = AppendResult(expected_version + 1, expected_version + len(recorded))
        self._dedupe.setdefault(match_id, {})[command_id] = result
        return result

    def _ack(self, ack: Ack | None) -> None:
        if ack is not None:
            self._acked.setdefault((ack.stream, ack.group), set()).add(ack.id)

    def acked(self, stream: str, group: str) -> set[str]:
        """Entry ids of `stream` that appends have acknowledged for `group` (a copy)."""
        return set(self._acked.get((stream, group), ()))

    async def read(
        self, match_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[Recorded]:
        """Events of a match with `from_version <= version <= to_version`."""
        self.keys.partition_of(match_id)
        stream = self._matches.get(match_id, [])
        stop = len(stream) if to_version is None else max(0, to_version)
        return stream[max(from_version, 1) - 1 : stop]

    async def version(self, match_id: str) -> int:
        """Number of events of the match; 0 for a match never appended to."""
        self.keys.partition_of(match_id)
        return len(self._matches.get(match_id, ()))

    async def read_log(
        self, partition: int, after: str = START, count: int = 100
    ) -> list[tuple[str, Recorded]]:
        """Up to `count` notification-log entries of a partition after position `after`."""
        self.keys.check_partition(partition)
        start = _index(after)
        log = self._logs[partition][start : start + count]
        return [(str(start + i), record) for i, record in enumerate(log, start=1)]

    async def scheduled(self, key: str) -> list[tuple[str, int]]:
        """Members of a schedule set with their times, soonest first."""
        times = self._schedules.get(key, {})
        return sorted(times.items(), key=lambda item: (item[1], item[0]))

    async def read_stream(
        self, stream: str, after: str = START, count: int | None = None
    ) -> list[StreamEntry]:
        """Raw entries of an outbox stream after `after`."""
        start = _index(after)
        entries = self._streams.get(stream, [])
        stop = None if count is None else start + count
        return [
            StreamEntry(str(start + i), dict(fields))
            for i, fields in enumerate(entries[start:stop], start=1)
        ]


def _index(position: str) -> int:
    try:
        index = int(position)
    except ValueError:
        raise ValueError(f"not a position of the memory store: {position!r}") from None
    if index < 0:
        raise ValueError(f"not a position of the memory store: {position!r}")
    return index
