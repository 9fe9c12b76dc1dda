"""The event store contract, run once per backend by subclasses in test_event_store.py.

A subclass provides the `store` fixture, a `second_writer` fixture (another client of the same
data), `snapshot`, which captures everything the store holds so a test can check that a
refused append wrote nothing, and `pending_command` / `acknowledged`, which make a command
entry pending in a consumer group and tell whether an append has acknowledged it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.store import (
    START,
    Ack,
    AppendRequest,
    AppendResult,
    ConcurrencyError,
    EventStore,
    InvalidAppend,
    InvalidMatchId,
    NewEvent,
    OutboxEntry,
    Recorded,
    Schedule,
    partition_of,
)
from services.store.base import Refusal, TurnCheck

BAD_MATCH_IDS = ["", "x" * 129, "two words", "tab\there", "new\nline", "{p1}", "a}b", "a{b"]


def events(*types: str) -> list[NewEvent]:
    """Events whose data is derived from their type, so reads can be checked."""
    return [NewEvent(t, f'{{"type":"{t}"}}'.encode()) for t in types]


def matches_in_partition(partition: int, count: int, partitions: int = 8) -> list[str]:
    """`count` match ids that all fall in `partition`."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        match_id = f"match-{n}"
        if partition_of(match_id, partitions) == partition:
            found.append(match_id)
        n += 1
    return found


class EventStoreContract:
    @pytest.fixture
    def store(self) -> EventStore:
        raise NotImplementedError

    @pytest.fixture
    def second_writer(self, store: EventStore) -> EventStore:
        raise NotImplementedError

    async def snapshot(self, store: EventStore) -> Any:
        raise NotImplementedError

    async def pending_command(self, store: EventStore, stream: str, group: str) -> str:
        """Add a command entry to `stream`, deliver it to `group` and return its id."""
        raise NotImplementedError

    async def acknowledged(self, store: EventStore, stream: str, group: str, entry_id: str) -> bool:
        """True once `group` has acknowledged entry `entry_id` of `stream`."""
        raise NotImplementedError

    async def clock_ms(self, store: EventStore) -> int:
        """The store's own clock now, in ms (the Redis server's on Redis)."""
        raise NotImplementedError

    def commands(self, store: EventStore, match_id: str) -> str:
        return store.keys.commands(partition_of(match_id, store.partitions))

    def turns(self, store: EventStore, match_id: str) -> str:
        return store.keys.turns(partition_of(match_id, store.partitions))

    def deadlines(self, store: EventStore, match_id: str) -> str:
        tag = store.keys.tag(partition_of(match_id, store.partitions))
        return f"{store.prefix}:{tag}:deadlines"

    async def test_appended_events_read_back_in_order_with_their_versions(
        self, store: EventStore
    ) -> None:
        first = await store.append("m1", events("a", "b"), 0, "c1")
        second = await store.append("m1", events("c"), 2, "c2")

        assert first == AppendResult(1, 2)
        assert second == AppendResult(3, 3)
        assert await store.read("m1") == [
            Recorded("m1", 1, "a", b'{"type":"a"}'),
            Recorded("m1", 2, "b", b'{"type":"b"}'),
            Recorded("m1", 3, "c", b'{"type":"c"}'),
        ]
        assert await store.version("m1") == 3
        assert await store.exists("m1")

    async def test_a_new_match_has_version_zero_no_events_and_does_not_exist(
        self, store: EventStore
    ) -> None:
        assert await store.version("nobody") == 0
        assert await store.read("nobody") == []
        assert not await store.exists("nobody")

    async def test_reads_start_and_stop_at_any_version(self, store: EventStore) -> None:
        await store.append("m1", events("a", "b", "c", "d", "e"), 0, "c1")

        assert [r.version for r in await store.read("m1", 3)] == [3, 4, 5]
        assert [r.version for r in await store.read("m1", 2, 4)] == [2, 3, 4]
        assert [r.version for r in await store.read("m1", 5, 5)] == [5]
        assert await store.read("m1", 6) == []
        assert await store.read("m1", 4, 3) == []
        assert [r.version for r in await store.read("m1", 0, 1)] == [1]

    async def test_event_bytes_round_trip_unchanged(self, store: EventStore) -> None:
        payloads = [b"", b"\x00\xff\x80binary", bytes(range(256)) * 256]
        await store.append("m1", [NewEvent("blob", p) for p in payloads], 0, "c1")

        assert [r.data for r in await store.read("m1")] == payloads
        assert [r.data for _, r in await store.read_log(partition_of("m1", 8))] == payloads

    async def test_a_stale_expected_version_raises_and_writes_nothing(
        self, store: EventStore
    ) -> None:
        outbox = [OutboxEntry(self.turns(store, "m1"), b"turn")]
        schedule = [Schedule(self.deadlines(store, "m1"), "m1", 1_000)]
        await store.append("m1", events("a", "b"), 0, "c1", outbox, schedule)
        before = await self.snapshot(store)

        with pytest.raises(ConcurrencyError) as raised:
            await store.append("m1", events("late"), 1, "c2", outbox, schedule[:0])

        assert (raised.value.match_id, raised.value.expected, raised.value.actual) == ("m1", 1, 2)
        assert await self.snapshot(store) == before
        # The refused command id was not recorded: it can still be applied.
        assert await store.append("m1", events("c"), 2, "c2") == AppendResult(3, 3)

    async def test_an_expected_version_ahead_of_the_match_raises(self, store: EventStore) -> None:
        before = await self.snapshot(store)

        with pytest.raises(ConcurrencyError, match="at version 0, not 3"):
            await store.append("m1", events("a"), 3, "c1")

        assert await self.snapshot(store) == before

    async def test_a_repeated_command_id_returns_the_earlier_result_and_writes_nothing(
        self, store: EventStore
    ) -> None:
        outbox = [OutboxEntry(self.turns(store, "m1"), b"turn")]
        schedule = [Schedule(self.deadlines(store, "m1"), "m1", 1_000)]
        await store.append("m1", events("a", "b"), 0, "c1", outbox, schedule)
        await store.append("m1", events("c"), 2, "c2")
        before = await self.snapshot(store)

        again = await store.append("m1", events("a", "b"), 0, "c1", outbox, schedule)
        unschedule = [Schedule(self.deadlines(store, "m1"), "m1", None)]
        stale_and_different = await store.append("m1", events("x"), 7, "c2", outbox, unschedule)
        at_the_current_version = await store.append("m1", events("y"), 3, "c1", outbox)

        assert again == AppendResult(1, 2, duplicate=True)
        assert stale_and_different == AppendResult(3, 3, duplicate=True)
        assert at_the_current_version == AppendResult(1, 2, duplicate=True)
        assert await self.snapshot(store) == before

    async def test_command_ids_are_remembered_per_match(self, store: EventStore) -> None:
        await store.append("m1", events("a"), 0, "same")

        assert await store.append("m2", events("a"), 0, "same") == AppendResult(1, 1)

    async def test_outbox_entries_are_written_with_the_events_in_the_data_field(
        self, store: EventStore
    ) -> None:
        turns = self.turns(store, "m1")
        outbox = [OutboxEntry(turns, b'{"seat":1}'), OutboxEntry(turns, b"2")]
        await store.append("m1", events("a"), 0, "c1", outbox)

        entries = await store.read_stream(turns)
        assert [e.fields for e in entries] == [{b"__data__": b'{"seat":1}'}, {b"__data__": b"2"}]
        assert await store.read_stream(turns, entries[0].position) == entries[1:]

    async def test_an_outbox_stream_outside_the_partition_is_rejected(
        self, store: EventStore
    ) -> None:
        home = partition_of("m1", 8)
        elsewhere = store.keys.turns((home + 1) % 8)
        before = await self.snapshot(store)

        for stream in (elsewhere, "turns-without-tag"):
            with pytest.raises(InvalidAppend, match="outside partition"):
                await store.append("m1", events("a"), 0, "c1", [OutboxEntry(stream, b"x")])

        assert await self.snapshot(store) == before

    async def test_schedule_entries_are_set_moved_and_removed_with_appends(
        self, store: EventStore
    ) -> None:
        deadlines = self.deadlines(store, "m1")
        other = matches_in_partition(partition_of("m1", 8), 2)[1]

        await store.append("m1", events("a"), 0, "c1", schedule=[Schedule(deadlines, "m1", 900)])
        await store.append(other, events("a"), 0, "c1", schedule=[Schedule(deadlines, other, 500)])
        assert await store.scheduled(deadlines) == [(other, 500), ("m1", 900)]

        await store.append("m1", events("b"), 1, "c2", schedule=[Schedule(deadlines, "m1", 100)])
        assert await store.scheduled(deadlines) == [("m1", 100), (other, 500)]

        await store.append("m1", events("c"), 2, "c3", schedule=[Schedule(deadlines, "m1", None)])
        await store.append("m1", [], 3, "c4", schedule=[Schedule(deadlines, "never-set", None)])
        assert await store.scheduled(deadlines) == [(other, 500)]

    async def test_a_relative_schedule_counts_from_the_stores_own_clock(
        self, store: EventStore
    ) -> None:
        """A deadline is set on the store's clock when the append runs (on Redis, the
        server's TIME inside the script), never on the clock of the process asking."""
        deadlines = self.deadlines(store, "m1")
        before = await self.clock_ms(store)
        await store.append(
            "m1", events("a"), 0, "c1", schedule=[Schedule.after(deadlines, "m1", 6_000)]
        )
        after = await self.clock_ms(store)

        [(member, at)] = await store.scheduled(deadlines)
        assert member == "m1"
        assert before + 6_000 <= at <= after + 6_000

    async def test_an_append_answers_with_the_clock_its_relative_times_counted_from(
        self, store: EventStore
    ) -> None:
        m1, m2 = matches_in_partition(partition_of("m1", 8), 2)
        deadlines = self.deadlines(store, m1)
        before = await self.clock_ms(store)

        timed, untimed = await store.append_many(
            [
                AppendRequest(m1, events("a"), 0, "c1", (), [Schedule.after(deadlines, m1, 500)]),
                AppendRequest(m2, events("a"), 0, "c1", (), [Schedule(deadlines, m2, 7)]),
            ]
        )

        assert isinstance(timed, AppendResult) and isinstance(untimed, AppendResult)
        assert timed.server_ms is not None and before <= timed.server_ms
        assert dict(await store.scheduled(deadlines))[m1] == timed.server_ms + 500
        assert untimed.server_ms is None

    def turn_check(self, store: EventStore, match_id: str, arrived_ms: int | None) -> TurnCheck:
        """A check of ``match_id``'s turn clock in its partition, with a stall of 60 s."""
        p = partition_of(match_id, store.partitions)
        keys = store.keys
        return TurnCheck(
            keys.deadlines(p), keys.turn_began(p), keys.clock(p), match_id, arrived_ms, 60_000
        )

    async def test_a_turn_check_appends_a_move_only_if_it_arrived_within_the_stored_turn(
        self, store: EventStore
    ) -> None:
        """Lateness is judged where the deadline is kept: a move that arrived before the
        deadline as stored is appended; at or after it, or before the turn began, the append
        is refused with why, and writes nothing of the append."""
        p = partition_of("m1", store.partitions)
        keys = store.keys
        await store.append(
            "m1", events("a"), 0, "c0", schedule=[Schedule(keys.turn_began(p), "m1", 1_000)]
        )
        await store.append(
            "m1", events("b"), 1, "c1", schedule=[Schedule(keys.deadlines(p), "m1", 5_000)]
        )
        late, early = await store.append_many(
            [
                AppendRequest(
                    "m1", events("c"), 2, "late", turn=self.turn_check(store, "m1", 5_000)
                ),
                AppendRequest(
                    "m1", events("c"), 2, "early", turn=self.turn_check(store, "m1", 999)
                ),
            ]
        )

        assert isinstance(late, AppendResult) and late.refused == Refusal("late", 5_000)
        assert isinstance(early, AppendResult) and early.refused == Refusal("early", 1_000)
        assert await store.version("m1") == 2  # nothing written but the deadlines' clock
        assert await store.applied("m1", "late") is None
        [in_time] = await store.append_many(
            [AppendRequest("m1", events("c"), 2, "c2", turn=self.turn_check(store, "m1", 4_999))]
        )
        assert isinstance(in_time, AppendResult) and in_time.refused is None
        assert await store.version("m1") == 3

    async def test_a_turn_check_appends_a_timeout_only_once_the_stored_deadline_has_passed(
        self, store: EventStore
    ) -> None:
        p = partition_of("m1", store.partitions)
        now = await self.clock_ms(store)
        later = Schedule(store.keys.deadlines(p), "m1", now + 60_000)
        await store.append("m1", events("a"), 0, "c0", schedule=[later])
        timeout = self.turn_check(store, "m1", None)

        [early] = await store.append_many([AppendRequest("m1", events("t"), 1, "t1", turn=timeout)])
        assert isinstance(early, AppendResult) and early.refused == Refusal("not_due", now + 60_000)
        await store.append(
            "m1", events("b"), 1, "c1", schedule=[Schedule(later.key, "m1", now - 1)]
        )
        [due] = await store.append_many([AppendRequest("m1", events("t"), 2, "t2", turn=timeout)])
        assert isinstance(due, AppendResult) and due.refused is None

    async def test_a_turn_check_makes_up_for_a_stall_before_it_judges(
        self, store: EventStore
    ) -> None:
        """The partition's deadlines were last checked longer than a stall ago: the append
        pushes every deadline still running then back by the gap before it judges a move, so
        a move that arrived after the deadline as first set is in time."""
        p = partition_of("m1", store.partitions)
        keys = store.keys
        await store.append("m1", events("a"), 0, "c0")
        await store.append_many(  # a check of the deadlines, which starts the clock
            [AppendRequest("m1", [], 1, "tick", turn=self.turn_check(store, "m1", None))]
        )
        started = await self.clock_ms(store)
        await store.append(
            "m1", events("b"), 1, "c1", schedule=[Schedule(keys.deadlines(p), "m1", started + 100)]
        )
        await asyncio.sleep(0.4)
        stalled = TurnCheck(
            keys.deadlines(p), keys.turn_began(p), keys.clock(p), "m1", started + 200, 300
        )

        [result] = await store.append_many(
            [AppendRequest("m1", events("c"), 2, "c2", turn=stalled)]
        )

        assert isinstance(result, AppendResult) and result.refused is None
        [(_, pushed)] = await store.scheduled(keys.deadlines(p))
        assert pushed >= started + 100 + 400

    async def test_a_batch_changes_a_members_schedule_in_the_order_of_its_appends(
        self, store: EventStore
    ) -> None:
        """Appends of one partition share one script on Redis, which writes each schedule set
        once at its end: what holds is what the appends, one after the other, would leave."""
        m1, m2, m3 = matches_in_partition(partition_of("m1", 8), 3)
        deadlines = self.deadlines(store, m1)
        await store.append(m3, events("a"), 0, "c1", schedule=[Schedule(deadlines, m3, 3)])

        results = await store.append_many(
            [
                AppendRequest(m1, events("a"), 0, "c1", (), [Schedule(deadlines, m1, 42)]),
                AppendRequest(m2, events("a"), 0, "c1", (), [Schedule(deadlines, m2, 7)]),
                AppendRequest(m1, events("b"), 1, "c2", (), [Schedule(deadlines, m1, None)]),
                AppendRequest(m3, events("b"), 1, "c2", (), [Schedule(deadlines, m3, None)]),
                AppendRequest(m1, events("c"), 2, "c3", (), [Schedule(deadlines, m1, 99)]),
                AppendRequest(m2, events("b"), 5, "c2", (), [Schedule(deadlines, m2, 1)]),
                AppendRequest(m3, events("c"), 2, "c3", (), [Schedule(deadlines, m3, 8)]),
                AppendRequest(m3, events("d"), 3, "c4", (), [Schedule(deadlines, m3, None)]),
            ]
        )

        assert [isinstance(r, AppendResult) for r in results] == [True] * 5 + [False, True, True]
        assert await store.scheduled(deadlines) == [(m2, 7), (m1, 99)]

    async def test_a_batch_of_many_appends_in_one_partition_is_applied_whole(
        self, store: EventStore
    ) -> None:
        ids = matches_in_partition(partition_of("m1", 8), 250)
        stream = self.commands(store, ids[0])
        deadlines = self.deadlines(store, ids[0])
        entries = [await self.pending_command(store, stream, "referee") for _ in ids]

        results = await store.append_many(
            [
                AppendRequest(
                    match_id,
                    events("a"),
                    0,
                    "c1",
                    [OutboxEntry(self.turns(store, match_id), match_id.encode())],
                    [Schedule(deadlines, match_id, n)],
                    Ack(stream, "referee", entry),
                )
                for n, (match_id, entry) in enumerate(zip(ids, entries, strict=True))
            ]
        )

        assert results == [AppendResult(1, 1)] * len(ids)
        assert await store.scheduled(deadlines) == [(m, n) for n, m in enumerate(ids)]
        turns = await store.read_stream(self.turns(store, ids[0]))
        assert [t.fields[b"__data__"] for t in turns] == [m.encode() for m in ids]
        for entry in entries:
            assert await self.acknowledged(store, stream, "referee", entry)

    @pytest.mark.parametrize(
        "change",
        [
            Schedule("dom:{p99}:deadlines", "m1", 1),
            Schedule("deadlines", "m1", 1),
            Schedule("TAG", "", 1),
            Schedule("TAG", "m1", -1),
        ],
        ids=repr,
    )
    async def test_a_bad_schedule_entry_is_rejected(
        self, store: EventStore, change: Schedule
    ) -> None:
        key = change.key.replace("TAG", self.deadlines(store, "m1"))
        change = Schedule(key, change.member, change.at_ms)
        before = await self.snapshot(store)

        with pytest.raises(InvalidAppend):
            await store.append("m1", events("a"), 0, "c1", schedule=[change])

        assert await self.snapshot(store) == before

    async def test_an_empty_append_records_its_command_and_writes_its_outbox(
        self, store: EventStore
    ) -> None:
        turns = self.turns(store, "m1")
        await store.append("m1", events("a"), 0, "c1")

        result = await store.append("m1", [], 1, "nudge", [OutboxEntry(turns, b"again")])

        assert result == AppendResult(2, 1)
        assert await store.version("m1") == 1
        assert [e.fields for e in await store.read_stream(turns)] == [{b"__data__": b"again"}]
        assert await store.append("m1", [], 1, "nudge") == AppendResult(2, 1, duplicate=True)
        assert len(await store.read_stream(turns)) == 1

    async def test_the_notification_log_catches_up_from_a_saved_position(
        self, store: EventStore
    ) -> None:
        partition = 3
        m1, m2, m3 = matches_in_partition(partition, 3)
        other = next(m for m in (f"x{n}" for n in range(100)) if partition_of(m, 8) != partition)
        await store.append(m1, events("a", "b"), 0, "c1")
        await store.append(other, events("elsewhere"), 0, "c1")
        await store.append(m2, events("c"), 0, "c1")

        seen = await store.read_log(partition, START, 2)
        saved = seen[-1][0]
        await store.append(m3, events("d"), 0, "c1")
        await store.append(m1, events("e"), 2, "c2")
        while page := await store.read_log(partition, saved, 2):
            seen += page
            saved = page[-1][0]

        assert [(r.match_id, r.version, r.type) for _, r in seen] == [
            (m1, 1, "a"),
            (m1, 2, "b"),
            (m2, 1, "c"),
            (m3, 1, "d"),
            (m1, 3, "e"),
        ]
        positions = [p for p, _ in seen]
        assert len(set(positions)) == len(positions)
        assert await store.read_log(partition, saved, 10) == []
        assert [r.type for _, r in await store.read_log(partition_of(other, 8))] == ["elsewhere"]

    async def test_a_partition_lists_its_matches_and_its_logs_latest_position(
        self, store: EventStore
    ) -> None:
        """What a rebuild from the match logs starts from (docs/storage.md)."""
        partition = 5
        m1, m2 = matches_in_partition(partition, 2)
        assert await store.match_ids(partition) == []
        assert await store.last_position(partition) == START
        await store.append(m1, events("a", "b"), 0, "c1")
        await store.append(m2, events("c"), 0, "c1")
        assert sorted(await store.match_ids(partition)) == sorted([m1, m2])
        last = await store.last_position(partition)
        assert last == (await store.read_log(partition, START, 10))[-1][0]
        assert await store.match_ids((partition + 1) % 8) == []

    async def test_read_log_rejects_an_unknown_partition(self, store: EventStore) -> None:
        for partition in (-1, 8):
            with pytest.raises(ValueError, match="partition"):
                await store.read_log(partition)

    @pytest.mark.parametrize("bad", BAD_MATCH_IDS)
    async def test_bad_match_ids_are_rejected_with_a_typed_error(
        self, store: EventStore, bad: str
    ) -> None:
        before = await self.snapshot(store)

        with pytest.raises(InvalidMatchId):
            await store.append(bad, events("a"), 0, "c1")
        with pytest.raises(InvalidMatchId):
            await store.append_many([AppendRequest(bad, events("a"), 0, "c1")])
        with pytest.raises(InvalidMatchId):
            await store.read(bad)
        with pytest.raises(InvalidMatchId):
            await store.version(bad)

        assert await self.snapshot(store) == before

    async def test_a_longest_allowed_match_id_works(self, store: EventStore) -> None:
        match_id = "é" + "x" * 127

        await store.append(match_id, events("a"), 0, "c1")

        assert [r.match_id for r in await store.read(match_id)] == [match_id]

    async def test_a_negative_expected_version_or_empty_command_id_is_rejected(
        self, store: EventStore
    ) -> None:
        with pytest.raises(InvalidAppend):
            await store.append("m1", events("a"), -1, "c1")
        with pytest.raises(InvalidAppend):
            await store.append("m1", events("a"), 0, "")

    async def test_append_many_mixes_successes_conflicts_and_duplicates(
        self, store: EventStore
    ) -> None:
        turns = self.turns(store, "m3")
        await store.append("m1", events("a"), 0, "c1")
        await store.append("m2", events("a"), 0, "c1")

        results = await store.append_many(
            [
                AppendRequest("m1", events("b"), 1, "c2"),
                AppendRequest("m2", events("b"), 5, "c2"),
                AppendRequest("m1", events("a"), 0, "c1"),
                AppendRequest(
                    "m3",
                    events("a", "b"),
                    0,
                    "c1",
                    [OutboxEntry(turns, b"t")],
                    [Schedule(self.deadlines(store, "m3"), "m3", 42)],
                ),
                AppendRequest("m1", events("c"), 2, "c3"),
                AppendRequest("m1", events("late"), 2, "c4"),
            ]
        )

        assert results[0] == AppendResult(2, 2)
        assert isinstance(results[1], ConcurrencyError)
        assert (results[1].expected, results[1].actual) == (5, 1)
        assert results[2] == AppendResult(1, 1, duplicate=True)
        assert results[3] == AppendResult(1, 2)
        assert results[4] == AppendResult(3, 3)
        assert isinstance(results[5], ConcurrencyError)
        assert [r.type for r in await store.read("m1")] == ["a", "b", "c"]
        assert [r.type for r in await store.read("m2")] == ["a"]
        assert len(await store.read_stream(turns)) == 1
        assert await store.scheduled(self.deadlines(store, "m3")) == [("m3", 42)]

    async def test_append_many_of_nothing_returns_nothing(self, store: EventStore) -> None:
        assert await store.append_many([]) == []

    async def test_append_many_rejects_an_invalid_request_before_applying_any(
        self, store: EventStore
    ) -> None:
        before = await self.snapshot(store)

        with pytest.raises(InvalidMatchId):
            await store.append_many(
                [AppendRequest("m1", events("a"), 0, "c1"), AppendRequest("", events("a"), 0, "c")]
            )

        assert await self.snapshot(store) == before

    async def test_two_writers_racing_on_one_version_exactly_one_wins(
        self, store: EventStore, second_writer: EventStore
    ) -> None:
        match_ids = [f"race-{n}" for n in range(20)]
        for match_id in match_ids:
            await store.append(match_id, events("start"), 0, "create")

        outcomes = await asyncio.gather(
            *(
                writer.append(match_id, events(f"move-{w}"), 1, f"writer-{w}")
                for match_id in match_ids
                for w, writer in enumerate((store, second_writer))
            ),
            return_exceptions=True,
        )

        pairs = zip(outcomes[::2], outcomes[1::2], strict=True)
        for match_id, pair in zip(match_ids, pairs, strict=True):
            wins = [o for o in pair if isinstance(o, AppendResult)]
            losses = [o for o in pair if isinstance(o, ConcurrencyError)]
            assert (len(wins), len(losses)) == (1, 1), pair
            assert wins[0] == AppendResult(2, 2)
            assert await store.version(match_id) == 2
            assert await second_writer.version(match_id) == 2

    async def test_racing_batches_apply_each_version_once(
        self, store: EventStore, second_writer: EventStore
    ) -> None:
        match_ids = [f"race-{n}" for n in range(50)]
        batch_a = [AppendRequest(m, events("a"), 0, "writer-a") for m in match_ids]
        batch_b = [AppendRequest(m, events("b"), 0, "writer-b") for m in match_ids]

        results_a, results_b = await asyncio.gather(
            store.append_many(batch_a), second_writer.append_many(batch_b)
        )

        for a, b in zip(results_a, results_b, strict=True):
            assert isinstance(a, ConcurrencyError) != isinstance(b, ConcurrencyError)
        for match_id in match_ids:
            assert await store.version(match_id) == 1

    async def test_an_ack_is_made_with_a_successful_append(self, store: EventStore) -> None:
        stream = self.commands(store, "m1")
        entry_id = await self.pending_command(store, stream, "referee")
        other_id = await self.pending_command(store, stream, "referee")

        result = await store.append(
            "m1", events("a"), 0, "c1", ack=Ack(stream, "referee", entry_id)
        )

        assert result == AppendResult(1, 1)
        assert await self.acknowledged(store, stream, "referee", entry_id)
        assert not await self.acknowledged(store, stream, "referee", other_id)
        assert [r.type for r in await store.read("m1")] == ["a"]

    async def test_a_duplicate_command_is_acknowledged_and_writes_nothing_else(
        self, store: EventStore
    ) -> None:
        stream = self.commands(store, "m1")
        outbox = [OutboxEntry(self.turns(store, "m1"), b"turn")]
        await store.append("m1", events("a", "b"), 0, "c1", outbox)
        ids = [await self.pending_command(store, stream, "referee") for _ in range(3)]
        acks = [Ack(stream, "referee", entry_id) for entry_id in ids]
        before = await self.snapshot(store)

        # Redelivered as it was, resent with the match's current version, and sent with no
        # events at all: the command id decides, whatever the version says.
        results = [
            await store.append("m1", events("a", "b"), 0, "c1", outbox, ack=acks[0]),
            await store.append("m1", events("a", "b"), 2, "c1", outbox, ack=acks[1]),
            await store.append("m1", [], 2, "c1", ack=acks[2]),
        ]

        assert results == [AppendResult(1, 2, duplicate=True)] * 3
        for entry_id in ids:
            assert await self.acknowledged(store, stream, "referee", entry_id)
        assert await self.snapshot(store) == before

    async def test_a_conflict_acknowledges_nothing(self, store: EventStore) -> None:
        stream = self.commands(store, "m1")
        await store.append("m1", events("a"), 0, "c1")
        entry_id = await self.pending_command(store, stream, "referee")
        before = await self.snapshot(store)
        ack = Ack(stream, "referee", entry_id)

        with pytest.raises(ConcurrencyError):
            await store.append("m1", events("b"), 0, "c2", ack=ack)
        [conflict] = await store.append_many([AppendRequest("m1", events("b"), 5, "c2", ack=ack)])

        assert isinstance(conflict, ConcurrencyError)
        assert not await self.acknowledged(store, stream, "referee", entry_id)
        assert await self.snapshot(store) == before
        # The command is still pending; applied at the right version, it is acknowledged.
        assert await store.append("m1", events("b"), 1, "c2", ack=ack) == AppendResult(2, 2)
        assert await self.acknowledged(store, stream, "referee", entry_id)

    async def test_append_many_acknowledges_each_request_by_its_outcome(
        self, store: EventStore
    ) -> None:
        m1, m2, m3 = matches_in_partition(partition_of("m1", 8), 3)
        stream = self.commands(store, m1)
        await store.append(m2, events("a"), 0, "c1")
        ids = [await self.pending_command(store, stream, "referee") for _ in range(4)]
        acks = [Ack(stream, "referee", entry_id) for entry_id in ids]

        results = await store.append_many(
            [
                AppendRequest(m1, events("a"), 0, "c1", ack=acks[0]),
                AppendRequest(m2, events("b"), 0, "c2", ack=acks[1]),
                AppendRequest(m2, events("a"), 0, "c1", ack=acks[2]),
                AppendRequest(m3, [], 0, "c1", (), (), acks[3]),
            ]
        )

        assert results[0] == AppendResult(1, 1)
        assert isinstance(results[1], ConcurrencyError)
        assert results[2] == AppendResult(1, 1, duplicate=True)
        assert results[3] == AppendResult(1, 0)
        assert [await self.acknowledged(store, stream, "referee", i) for i in ids] == [
            True,
            False,
            True,
            True,
        ]

    def test_an_ack_id_may_be_given_as_bytes(self) -> None:
        assert Ack("s", "g", b"1712345-7") == Ack("s", "g", "1712345-7")
        assert Ack("s", "g", b"1712345-7").id == "1712345-7"

    @pytest.mark.parametrize(
        "ack",
        [
            Ack("dom:{p99}:cmd", "referee", "1-0"),
            Ack("cmd", "referee", "1-0"),
            Ack("TAG", "", "1-0"),
            Ack("TAG", "referee", ""),
            Ack("TAG", "referee", "abc"),
            Ack("TAG", "referee", "1-2-3"),
            Ack("TAG", "referee", "1-"),
            Ack("TAG", "referee", "-"),
            Ack("TAG", "referee", "+"),
            Ack("TAG", "referee", "-1-0"),
            Ack("TAG", "referee", "18446744073709551616-0"),
            Ack("TAG", "referee", "0-18446744073709551616"),
        ],
        ids=repr,
    )
    async def test_a_bad_ack_is_rejected(self, store: EventStore, ack: Ack) -> None:
        ack = Ack(ack.stream.replace("TAG", self.commands(store, "m1")), ack.group, ack.id)
        before = await self.snapshot(store)

        with pytest.raises(InvalidAppend):
            await store.append("m1", events("a"), 0, "c1", ack=ack)
        with pytest.raises(InvalidAppend):
            await store.append_many([AppendRequest("m1", events("a"), 0, "c1", ack=ack)])

        assert await self.snapshot(store) == before

    async def test_the_largest_entry_ids_are_accepted(self, store: EventStore) -> None:
        stream = self.commands(store, "m1")
        largest = "18446744073709551615-18446744073709551615"

        await store.append("m1", events("a"), 0, "c1", ack=Ack(stream, "referee", largest))
        await store.append("m1", events("b"), 1, "c2", ack=Ack(stream, "referee", "1712345"))

        assert await store.version("m1") == 2

    async def test_applied_tells_whether_a_command_id_was_recorded_and_what_it_made(
        self, store: EventStore
    ) -> None:
        assert await store.applied("m1", "c1") is None
        await store.append("m1", events("a", "b"), 0, "c1")
        await store.append("m1", [], 2, "c2")
        assert await store.applied("m1", "c1") == AppendResult(1, 2, duplicate=True)
        assert await store.applied("m1", "c2") == AppendResult(3, 2, duplicate=True)
        assert await store.applied("m1", "c3") is None
        assert await store.applied("m2", "c1") is None
