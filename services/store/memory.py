"""The in-memory event store: same semantics and errors as the Redis one, for pure tests and
offline replay. Not shared between processes; positions are entry counts as strings.

Its outbox streams, schedules and acknowledgements live in :class:`MemoryStreams`, which also
gives them consumer groups, so the in-memory message transport (services/transport/memory.py)
reads the turns an append wrote and sees the commands it acknowledged, as on Redis."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

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
    Refusal,
    Schedule,
    StreamEntry,
    TurnCheck,
)
from services.store.checks import check_append
from services.store.keys import DEFAULT_PARTITIONS, DEFAULT_PREFIX, Keys


@dataclass(slots=True)
class PendingEntry:
    """An entry delivered to a consumer of a group and not yet acknowledged."""

    consumer: str
    deliveries: int
    since: float


@dataclass(slots=True)
class _Group:
    last: int = 0  # sequence number of the last entry delivered to the group
    pending: dict[bytes, PendingEntry] = field(default_factory=dict)


class MemoryStreams:
    """Streams with consumer groups, sorted-set schedules and acknowledgements, in memory.

    Entry ids are ``<n>-0`` with ``n`` counting up per stream, as Redis would give them within
    one millisecond; each entry also keeps when it arrived on ``wall`` (what a Redis entry id's
    time says). Groups start at the beginning of a stream (as ``XGROUP CREATE ... 0``).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.wall = wall
        self._entries: dict[str, list[tuple[int, dict[bytes, bytes], int]]] = {}
        self._next: dict[str, int] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._acked: dict[tuple[str, str], set[str]] = {}
        self.schedules: dict[str, dict[str, int]] = {}
        self.clocks: dict[str, int] = {}
        """When each partition's deadlines were last checked (ms, by the key that holds it
        on Redis)."""
        self._changed = asyncio.Event()

    def contents(self) -> dict[str, object]:
        """Entries and schedules (not group state), for comparing before and after."""
        return {
            "entries": {k: [dict(f) for _, f, _ in v] for k, v in self._entries.items()},
            "schedules": {k: dict(v) for k, v in self.schedules.items()},
        }

    def add(self, stream: str, fields: dict[bytes, bytes], maxlen: int | None = None) -> bytes:
        """Add an entry; keep only the latest ``maxlen`` entries if given. Returns its id."""
        n = self._next.get(stream, 0) + 1
        self._next[stream] = n
        entries = self._entries.setdefault(stream, [])
        entries.append((n, fields, int(self.wall() * 1000)))
        if maxlen is not None and len(entries) > maxlen:
            del entries[: len(entries) - maxlen]
        self._changed.set()
        self._changed = asyncio.Event()
        return f"{n}-0".encode()

    def entries(self, stream: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Every entry of a stream with its id."""
        return [(f"{n}-0".encode(), f) for n, f, _ in self._entries.get(stream, ())]

    def create_group(self, stream: str, group: str) -> None:
        """Create ``group`` at the start of ``stream`` unless it exists."""
        self._entries.setdefault(stream, [])
        self._groups.setdefault((stream, group), _Group())

    def deliver(
        self, group: str, consumer: str, streams: Iterable[str], count: int
    ) -> list[tuple[str, bytes, dict[bytes, bytes]]]:
        """Up to ``count`` entries not yet delivered to ``group``, now pending with
        ``consumer``."""
        out: list[tuple[str, bytes, dict[bytes, bytes]]] = []
        now = self.clock()
        for stream in streams:
            state = self._groups.setdefault((stream, group), _Group())
            for n, fields, _ in self._entries.get(stream, ()):
                if len(out) >= count:
                    return out
                if n <= state.last:
                    continue
                state.last = n
                entry_id = f"{n}-0".encode()
                state.pending[entry_id] = PendingEntry(consumer, 1, now)
                out.append((stream, entry_id, fields))
        return out

    def trim(self, stream: str) -> int:
        """Drop the entries of ``stream`` every group of it was delivered and acknowledged,
        keeping the last one delivered (as ``XTRIM MINID`` does on Redis); return how many
        went. A stream without groups is left alone."""
        bounds = []
        for (name, _), state in self._groups.items():
            if name != stream:
                continue
            pending = [int(entry_id.split(b"-")[0]) for entry_id in state.pending]
            bounds.append(min([state.last, *pending]))
        entries = self._entries.get(stream)
        if not bounds or not entries:
            return 0
        floor = min(bounds)
        kept = [entry for entry in entries if entry[0] >= floor]
        removed = len(entries) - len(kept)
        self._entries[stream] = kept
        return removed

    def pending(self, stream: str, group: str) -> dict[bytes, PendingEntry]:
        """The entries of ``stream`` delivered to ``group`` and not acknowledged (a copy)."""
        state = self._groups.get((stream, group))
        return dict(state.pending) if state else {}

    def fields(self, stream: str, entry_id: bytes) -> dict[bytes, bytes] | None:
        """The fields of an entry, None if it is gone."""
        n = int(entry_id.split(b"-")[0])
        for m, f, _ in self._entries.get(stream, ()):
            if m == n:
                return f
        return None

    def arrived(self, stream: str, entry_id: bytes) -> int:
        """When an entry arrived (ms on ``wall``); 0 if it is gone."""
        n = int(entry_id.split(b"-")[0])
        for m, _, at in self._entries.get(stream, ()):
            if m == n:
                return at
        return 0

    def oldest_unprocessed(self, stream: str, group: str) -> int | None:
        """When the oldest entry of ``stream`` that ``group`` has not finished with (pending,
        or not delivered yet) arrived (ms on ``wall``); None if there is none."""
        state = self._groups.get((stream, group)) or _Group()
        for n, _, at in self._entries.get(stream, ()):
            if n > state.last or f"{n}-0".encode() in state.pending:
                return at
        return None

    def claim(
        self,
        stream: str,
        group: str,
        consumer: str,
        min_idle_s: float,
        count: int,
        skip: Collection[bytes] = (),
    ) -> list[tuple[bytes, PendingEntry]]:
        """Pending entries idle for ``min_idle_s`` (but those in ``skip``), now pending with
        ``consumer`` (delivered once more)."""
        state = self._groups.get((stream, group))
        if state is None:
            return []
        now = self.clock()
        out: list[tuple[bytes, PendingEntry]] = []
        for entry_id, p in sorted(state.pending.items(), key=lambda item: item[1].since):
            if len(out) >= count or now - p.since < min_idle_s or entry_id in skip:
                continue
            p.consumer, p.deliveries, p.since = consumer, p.deliveries + 1, now
            out.append((entry_id, p))
        return out

    def ack(self, stream: str, group: str, entry_id: str | bytes) -> None:
        """Acknowledge one entry for ``group``."""
        raw = entry_id.encode() if isinstance(entry_id, str) else entry_id
        state = self._groups.get((stream, group))
        if state is not None:
            state.pending.pop(raw, None)
        self._acked.setdefault((stream, group), set()).add(raw.decode())

    def acked(self, stream: str, group: str) -> set[str]:
        """Entry ids of `stream` acknowledged for `group` (a copy)."""
        return set(self._acked.get((stream, group), ()))

    def schedule(self, key: str, member: str, at_ms: int | None) -> None:
        """Set a member's time in a schedule, or remove it (``at_ms`` None)."""
        times = self.schedules.setdefault(key, {})
        if at_ms is None:
            times.pop(member, None)
        else:
            times[member] = at_ms
        if not times:
            del self.schedules[key]

    def make_up_for_stall(self, deadlines: str, clock: str, now_ms: int, stall_ms: int) -> int:
        """Push back every deadline still running at the last check of ``clock`` by the time
        since, when that is longer than a stall; return by how much (as the Redis scripts do:
        services/redis/clock.py)."""
        last = self.clocks.get(clock)
        shifted = 0
        if last is not None and now_ms - last > stall_ms:
            shifted = now_ms - last
            times = self.schedules.get(deadlines, {})
            for member, at in times.items():
                if at > last:
                    times[member] = at + shifted
        if last is None or now_ms - last >= 250 or now_ms < last:
            self.clocks[clock] = now_ms
        return shifted

    async def wait(self, timeout_s: float) -> None:
        """Return when an entry is added, or after ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)


class MemoryEventStore(EventStore):
    """Event store kept in dicts and lists of this process."""

    def __init__(
        self,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = Keys(prefix, partitions)
        self.clock = clock
        """The store's wall clock (seconds): relative schedules count from it, and the
        entries of its streams arrive on it (what the Redis server's clock is on Redis)."""
        self._matches: dict[str, list[Recorded]] = {}
        self._dedupe: dict[str, dict[str, AppendResult]] = {}
        self._logs: list[list[Recorded]] = [[] for _ in range(partitions)]
        self.streams = MemoryStreams(wall=lambda: self.clock())

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
                r.turn,
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
                        r.turn,
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
        turn: TurnCheck | None = None,
    ) -> AppendResult:
        seen = self._dedupe.get(match_id)
        if seen is not None and command_id in seen:
            self._ack(ack)
            return replace(seen[command_id], duplicate=True)
        version = len(self._matches.get(match_id, ()))
        if version != expected_version:
            raise ConcurrencyError(match_id, expected_version, version)
        now_ms: int | None = None
        if turn is not None:
            now_ms = int(self.clock() * 1000)
            refused = self._judge(turn, now_ms)
            if refused is not None:
                return AppendResult(expected_version + 1, expected_version, refused=refused)
        self._ack(ack)
        recorded = [
            Recorded(match_id, expected_version + i, event.type, bytes(event.data))
            for i, event in enumerate(events, start=1)
        ]
        if recorded:
            self._matches.setdefault(match_id, []).extend(recorded)
            self._logs[partition].extend(recorded)
        for entry in outbox:
            self.streams.add(entry.stream, {b"__data__": bytes(entry.payload)})
        timed = False
        for change in schedule:
            at = change.at_ms
            if at is not None and change.relative:
                if now_ms is None:
                    now_ms = int(self.clock() * 1000)
                timed = True
                at += now_ms
            self.streams.schedule(change.key, change.member, at)
        first, last = expected_version + 1, expected_version + len(recorded)
        self._dedupe.setdefault(match_id, {})[command_id] = AppendResult(first, last)
        return AppendResult(first, last, server_ms=now_ms if timed else None)

    def _judge(self, turn: TurnCheck, now_ms: int) -> Refusal | None:
        """Why ``turn`` refuses the append, if it does (as the Redis append script judges)."""
        streams = self.streams
        streams.make_up_for_stall(turn.deadlines, turn.clock, now_ms, turn.stall_ms)
        deadline = streams.schedules.get(turn.deadlines, {}).get(turn.member)
        if turn.arrived_ms is None:
            if deadline is None or deadline > now_ms:
                return Refusal("not_due", -1 if deadline is None else deadline)
            return None
        if deadline is not None and turn.arrived_ms >= deadline:
            return Refusal("late", deadline)
        began = streams.schedules.get(turn.began, {}).get(turn.member)
        if began is not None and turn.arrived_ms < began:
            return Refusal("early", began)
        return None

    def _ack(self, ack: Ack | None) -> None:
        if ack is not None:
            self.streams.ack(ack.stream, ack.group, ack.id)

    def acked(self, stream: str, group: str) -> set[str]:
        """Entry ids of `stream` acknowledged for `group` (a copy)."""
        return self.streams.acked(stream, group)

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

    async def applied(self, match_id: str, command_id: str) -> AppendResult | None:
        """The result of the append that recorded `command_id` for the match, or None."""
        self.keys.partition_of(match_id)
        earlier = self._dedupe.get(match_id, {}).get(command_id)
        return None if earlier is None else replace(earlier, duplicate=True)

    async def read_log(
        self, partition: int, after: str = START, count: int = 100
    ) -> list[tuple[str, Recorded]]:
        """Up to `count` notification-log entries of a partition after position `after`."""
        self.keys.check_partition(partition)
        start = _index(after)
        log = self._logs[partition][start : start + count]
        return [(str(start + i), record) for i, record in enumerate(log, start=1)]

    async def last_position(self, partition: int) -> str:
        """The position of the partition log's latest entry (``START`` when it has none)."""
        self.keys.check_partition(partition)
        return str(len(self._logs[partition])) if self._logs[partition] else START

    async def match_ids(self, partition: int) -> list[str]:
        """Every match of the partition with events."""
        self.keys.check_partition(partition)
        return [m for m in self._matches if self.keys.partition_of(m) == partition]

    async def scheduled(self, key: str) -> list[tuple[str, int]]:
        """Members of a schedule set with their times, soonest first."""
        times = self.streams.schedules.get(key, {})
        return sorted(times.items(), key=lambda item: (item[1], item[0]))

    async def read_stream(
        self, stream: str, after: str = START, count: int | None = None
    ) -> list[StreamEntry]:
        """Raw entries of an outbox stream after `after`."""
        start = _index(after)
        entries = self.streams.entries(stream)
        stop = None if count is None else start + count
        return [
            StreamEntry(str(start + i), dict(fields))
            for i, (_, fields) in enumerate(entries[start:stop], start=1)
        ]


def _index(position: str) -> int:
    try:
        index = int(position)
    except ValueError:
        raise ValueError(f"not a position of the memory store: {position!r}") from None
    if index < 0:
        raise ValueError(f"not a position of the memory store: {position!r}")
    return index
