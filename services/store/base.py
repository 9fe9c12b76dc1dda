"""The event store contract: records, errors and the abstract store every backend implements."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from types import TracebackType
from typing import Literal, Self

from services.store.errors import (
    ConcurrencyError,
    InvalidAppend,
    InvalidMatchId,
    StoreError,
)
from services.store.keys import Keys

__all__ = ["ConcurrencyError", "InvalidAppend", "InvalidMatchId", "StoreError"]

START = "0"
"""Log position before the first entry: `read_log(partition, START, n)` reads from the start."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: its type (for inspection only) and its already-encoded bytes."""

    type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Recorded:
    """A stored event: `version` is its 1-based position in its match's stream."""

    match_id: str
    version: int
    type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A message added to `stream` in the same atomic append, payload in field `__data__`.

    The stream must carry the match's partition tag (e.g. the partition's turns stream).
    """

    stream: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class Schedule:
    """A sorted-set update in the same atomic append: `member` gets score `at_ms`, or is
    removed when `at_ms` is None. The key must carry the match's partition tag (e.g. the
    partition's turn deadlines).

    With `relative`, `at_ms` counts from the store's clock when the append runs: on Redis the
    server's own (`TIME`, read inside the append script), so a deadline never depends on the
    clock of the process that asked for it.
    """

    key: str
    member: str
    at_ms: int | None
    relative: bool = False

    @classmethod
    def after(cls, key: str, member: str, ms: int) -> Schedule:
        """`member` due `ms` milliseconds after the append, on the store's clock."""
        return cls(key, member, ms, relative=True)


@dataclass(frozen=True, slots=True, init=False)
class Ack:
    """A consumer-group acknowledgement made by the same atomic append: `XACK stream group id`.

    It is made when the append succeeds and when its command id turns out to be a duplicate
    (the command is done either way), never on a ConcurrencyError, where the entry stays
    pending. The stream must carry the match's partition tag (e.g. the partition's command
    stream); `id` is the entry id as read (`"1712345-0"`), given as str or bytes.
    """

    stream: str
    group: str
    id: str

    def __init__(self, stream: str, group: str, id: str | bytes) -> None:
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "id", id.decode() if isinstance(id, bytes) else id)


# AppendResult and AppendRequest are made once per append. Their __init__ sets each slot
# through its descriptor, which costs half of what the generated frozen __init__ does
# (object.__setattr__ by name); they are otherwise the usual frozen dataclasses.


@dataclass(frozen=True, slots=True)
class TurnCheck:
    """The turn's clock, judged inside the append against the deadline a timeout fires from.

    The append first makes up for a stall of the partition's deadlines (a gap longer than
    `stall_ms` since `clock` was last written pushes every running deadline back by it), then
    reads `member`'s deadline in `deadlines` and the turn's beginning in `began`. A move
    (`arrived_ms`: when its command reached the stream, on the store's clock) is refused
    `late` unless it arrived before the deadline as stored, and `early` if it arrived before
    the turn began; a timeout (`arrived_ms` None) is refused `not_due` unless the deadline as
    stored has passed. Refused, the append writes nothing else (the make-up stands). Every key
    must carry the match's partition tag.
    """

    deadlines: str
    began: str
    clock: str
    member: str
    arrived_ms: int | None
    stall_ms: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a `TurnCheck` refused an append: `late` (`at_ms` the deadline), `early` (`at_ms`
    when the turn began) or `not_due` (`at_ms` the deadline, or -1 without one)."""

    reason: Literal["late", "early", "not_due"]
    at_ms: int


@dataclass(frozen=True, slots=True, init=False)
class AppendResult:
    """Versions given to an append: `first_version..last_version` inclusive.

    An append of no events gets `first_version == last_version + 1` (an empty range).
    `duplicate` is True when the command id had been seen and this is the earlier result.
    `server_ms` is the store's clock (the Redis server's, in ms) that the append's relative
    schedules counted from, when it had any (None otherwise, and for a duplicate): a writer
    knows from it exactly when the deadlines it set fall, without reading them back.
    `refused` says why the request's `TurnCheck` refused it: nothing was appended then.
    """

    first_version: int
    last_version: int
    duplicate: bool = False
    server_ms: int | None = None
    refused: Refusal | None = None

    def __init__(
        self,
        first_version: int,
        last_version: int,
        duplicate: bool = False,
        server_ms: int | None = None,
        refused: Refusal | None = None,
    ) -> None:
        set_first, set_last, set_duplicate, set_server_ms, set_refused = _RESULT_SLOTS
        set_first(self, first_version)
        set_last(self, last_version)
        set_duplicate(self, duplicate)
        set_server_ms(self, server_ms)
        set_refused(self, refused)


@dataclass(frozen=True, slots=True, init=False)
class AppendRequest:
    """One append of a batch given to `EventStore.append_many`."""

    match_id: str
    events: Sequence[NewEvent]
    expected_version: int
    command_id: str
    outbox: Sequence[OutboxEntry] = ()
    schedule: Sequence[Schedule] = ()
    ack: Ack | None = None
    turn: TurnCheck | None = None
    """Judge the turn's clock first (a move's arrival, or a timeout): see `TurnCheck`."""

    def __init__(
        self,
        match_id: str,
        events: Sequence[NewEvent],
        expected_version: int,
        command_id: str,
        outbox: Sequence[OutboxEntry] = (),
        schedule: Sequence[Schedule] = (),
        ack: Ack | None = None,
        turn: TurnCheck | None = None,
    ) -> None:
        (
            set_match,
            set_events,
            set_expected,
            set_command,
            set_outbox,
            set_schedule,
            set_ack,
            set_turn,
        ) = _REQUEST_SLOTS
        set_match(self, match_id)
        set_events(self, events)
        set_expected(self, expected_version)
        set_command(self, command_id)
        set_outbox(self, outbox)
        set_schedule(self, schedule)
        set_ack(self, ack)
        set_turn(self, turn)


def _slot_setters(cls: type) -> tuple[Callable[[object, object], None], ...]:
    return tuple(vars(cls)[f.name].__set__ for f in fields(cls))


_RESULT_SLOTS = _slot_setters(AppendResult)
_REQUEST_SLOTS = _slot_setters(AppendRequest)


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """A raw entry of an outbox stream: its position and its fields."""

    position: str
    fields: dict[bytes, bytes]


class EventStore(abc.ABC):
    """Per-match event streams with optimistic concurrency, command dedupe and an outbox.

    Every append also adds its events to the notification log of the match's partition, so a
    projection can follow all matches of a partition from one saved position.
    """

    keys: Keys
    """Key layout: prefix, number of partitions, and every key builder."""

    @property
    def partitions(self) -> int:
        """Number of partitions (and of notification logs)."""
        return self.keys.partitions

    @property
    def prefix(self) -> str:
        """Prefix of every key."""
        return self.keys.prefix

    @abc.abstractmethod
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
        `expected_version`, and make `ack` in the same step.

        A command id already recorded for this match returns the earlier result and writes
        nothing but `ack`. Raises ConcurrencyError (nothing written, nothing acknowledged)
        when the version differs, InvalidMatchId or InvalidAppend before contacting the
        backend.
        """

    @abc.abstractmethod
    async def append_many(
        self, batch: Sequence[AppendRequest]
    ) -> list[AppendResult | ConcurrencyError]:
        """Run many appends in one round trip; each is atomic, the batch is not.

        A conflict is returned in its slot, not raised. Invalid requests raise before any
        append is sent.
        """

    @abc.abstractmethod
    async def read(
        self, match_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[Recorded]:
        """Events of a match with `from_version <= version <= to_version` (to the end if None)."""

    @abc.abstractmethod
    async def version(self, match_id: str) -> int:
        """Number of events of the match; 0 for a match never appended to."""

    @abc.abstractmethod
    async def applied(self, match_id: str, command_id: str) -> AppendResult | None:
        """The result of the append that recorded `command_id` for the match, marked
        `duplicate` as a repeated append would get it; None if it was never applied."""

    async def exists(self, match_id: str) -> bool:
        """True once the match has at least one event."""
        return await self.version(match_id) > 0

    @abc.abstractmethod
    async def read_log(
        self, partition: int, after: str = START, count: int = 100
    ) -> list[tuple[str, Recorded]]:
        """Up to `count` notification-log entries of a partition after position `after`.

        Positions are opaque strings, increasing; `START` ("0") reads from the beginning.
        """

    @abc.abstractmethod
    async def last_position(self, partition: int) -> str:
        """The position of the notification log's latest entry (``START`` when it has none)."""

    @abc.abstractmethod
    async def match_ids(self, partition: int) -> list[str]:
        """Every match of the partition that has a log in this store (for rebuilds)."""

    @abc.abstractmethod
    async def scheduled(self, key: str) -> list[tuple[str, int]]:
        """Members of a schedule set with their times, soonest first (for inspection)."""

    @abc.abstractmethod
    async def read_stream(
        self, stream: str, after: str = START, count: int | None = None
    ) -> list[StreamEntry]:
        """Raw entries of an outbox stream after `after` (for inspection and tests)."""

    async def aclose(self) -> None:
        """Release connections; the store is unusable afterwards."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
