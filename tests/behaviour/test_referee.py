"""The referee's rules of engagement, on the in-memory backend and again on Redis.

A referee and a pool of house bots run in this process over one backend and are stepped by
hand, with a clock the test moves, so each behaviour is checked in milliseconds. The same code
runs as processes in tests/service.
"""

from __future__ import annotations

import asyncio

import pytest

from engine.game import apply, legal_moves
from engine.rules import Rules
from engine.views import view_for
from events.codec import JSON
from events.envelope import CommandEnvelope
from events.model import DealRound, DrawTile, PassTurn, TimeOutTurn
from services.store import AppendResult, EventStore, NewEvent
from tests.behaviour.table import Table
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


def tags(log: list[object]) -> list[str]:
    """The event types of a log, in order."""
    return [env.event.__struct_config__.tag for env in log]  # type: ignore[attr-defined]


async def test_a_created_match_is_dealt_and_its_first_turn_shows_only_that_seat(
    backend: Backend,
) -> None:
    """S1: the referee deals in the same append as the creation; C8: the turn message carries
    the view of the seat to play, its own hand and no other."""
    table = await Table(backend).start()
    state = await table.create("m-1")
    assert state.phase == "playing"
    assert tags(await table.log("m-1")) == ["match_created", "round_started"]
    [turn] = await table.turns()
    assert (turn.seat, turn.version, turn.view.seat) == (state.turn, state.version, state.turn)
    assert turn.view.hand == tuple(sorted(state.hands[state.turn]))
    other = state.hands[1 - state.turn]
    assert not set(other) & set(turn.view.hand or ())
    assert await table.rejections() == []


async def test_a_whole_match_is_played_to_its_end_by_house_bots(backend: Backend) -> None:
    """S5/C10: rounds are dealt by the referee until a side reaches the target."""
    table = await Table(backend).start()
    await table.create("m-1", Rules.make("straight", players=2, target=50))
    state = await table.play("m-1")
    assert state.phase == "over"
    assert max(state.scores) >= 50
    assert await table.rejections() == []


async def test_a_command_id_seen_before_is_applied_once_and_never_rejected(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    await table.create("m-1")
    [turn] = await table.turns()
    move = turn.view.legal[0]
    await table.send("m-1", move, "move-1")
    await table.send("m-1", move, "move-1")  # in the same batch
    await table.referee.step()
    await table.send("m-1", move, "move-1")  # and in a later one
    await table.referee.step()
    assert len(await table.log("m-1")) == turn.version + 1
    assert await table.rejections() == []


async def test_an_illegal_move_is_rejected_to_its_sender_with_the_rule_and_changes_nothing(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    state = await table.create("m-1")
    before = await table.log("m-1")
    await table.send("m-1", PassTurn(seat=state.turn), "pass")  # S3: draw before passing
    await table.send("m-1", DrawTile(seat=1 - state.turn), "draw")  # not its turn
    await table.referee.step()
    assert await table.log("m-1") == before
    reasons = [(r.command_id, r.rejection.reason) for r in await table.rejections()]
    assert [c for c, _ in reasons] == ["pass", "draw"]
    assert all(r.rejection.rule != "" for r in await table.rejections())


async def test_a_rejection_goes_only_to_the_senders_own_reply_stream(backend: Backend) -> None:
    table = await Table(backend).start()
    state = await table.create("m-1")
    log_key = table.keys.log(table.keys.partition_of("m-1"))
    envelope = CommandEnvelope(
        match_id="m-1",
        command_id="aimed",
        command=DrawTile(seat=1 - state.turn),
        reply_to=log_key,  # a reply aimed at a notification log is never written there
    )
    before = await backend.store.read_stream(log_key)
    await table.send_raw("m-1", JSON.encode(envelope))
    await table.referee.step()
    assert await backend.store.read_stream(log_key) == before
    assert await table.rejections() == []


async def test_deals_and_timeouts_from_a_command_stream_are_refused(backend: Backend) -> None:
    """The referee alone deals (randomness enters the log there) and keeps the clock."""
    table = await Table(backend).start()
    state = await table.create("m-1")
    await table.send("m-1", DealRound(order=((0, 0),)), "forged-deal")
    await table.send("m-1", TimeOutTurn(seat=state.turn, version=state.version), "forged-clock")
    await table.referee.step()
    assert len(await table.log("m-1")) == state.version
    rejected = {r.command_id: r.rejection.reason for r in await table.rejections()}
    assert rejected == {"forged-deal": "bad_command", "forged-clock": "bad_command"}


async def test_an_unreadable_command_is_rejected_if_its_sender_can_be_read_else_parked(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    await table.create("m-1")
    readable = b'{"match_id": "m-1", "command_id": "x", "reply_to": "%s", "command": 5}'
    await table.send_raw("m-1", readable % table.replies.encode())
    await table.send_raw("m-1", b"\xff not json")
    await table.referee.step()
    [rejected] = await table.rejections()
    assert (rejected.command_id, rejected.rejection.reason) == ("x", "bad_command")
    dead = await backend.store.read_stream(table.keys.dead_letters)
    assert [e.fields[b"__data__"] for e in dead] == [b"\xff not json"]


async def test_a_turn_past_its_deadline_is_played_for_the_seat_and_a_stale_timeout_dropped(
    backend: Backend,
) -> None:
    """Timeouts (README): the referee records TurnTimedOut and plays the default move, once
    the turn's deadline has passed on the store's clock (on Redis the server's)."""
    table = await Table(backend).start()
    state = await table.create("m-1", deadline_ms=3_000)
    p = table.keys.partition_of("m-1")
    [(_, began)] = await backend.store.scheduled(table.keys.turn_began(p))
    deadline = await table.deadline("m-1")
    assert deadline == began + 3_000
    assert await table.referee.fire_deadlines() == 0
    await table.until(deadline - 100)
    if backend.name == "memory":  # the stepped clock stops right before the deadline
        assert await table.referee.fire_deadlines() == 0
    await table.until(deadline)
    assert await table.referee.fire_deadlines() == 1
    after = await table.state("m-1")
    assert tags(await table.log("m-1"))[state.version] == "turn_timed_out"
    assert after.version > state.version
    # A timeout for a turn that moved on changes nothing and answers nobody.
    await table.referee.decide_and_append(
        [
            table.referee_work(
                "m-1", TimeOutTurn(seat=state.turn, version=state.version), "timeout:old"
            )
        ]
    )
    assert (await table.state("m-1")).version == after.version
    assert await table.rejections() == []


async def test_a_move_queued_before_its_deadline_is_decided_before_the_turn_times_out(
    backend: Backend,
) -> None:
    """README (deadlines): the move reached the command stream in time; the referee gets to
    it only after the deadline has passed, and its check holds the timeout until then."""
    table = await Table(backend).start()
    state = await table.create("m-1", bots=(None, None), deadline_ms=2_000)
    move = view_for(state, state.turn).legal[0]
    await table.send("m-1", move, "in-time")
    await table.until(await table.deadline("m-1"))
    assert await table.referee.fire_deadlines() == 0  # the move waits, unread
    await table.referee.step()
    [applied] = [e for e in await table.log("m-1") if e.version == state.version + 1]
    assert applied.command_id == "in-time"
    assert await table.rejections() == []


async def test_a_move_that_reached_the_stream_after_its_deadline_is_refused_as_late(
    backend: Backend,
) -> None:
    """However soon the referee reads it: the turn is timed out instead, and the seat is
    told why."""
    table = await Table(backend).start()
    state = await table.create("m-1", bots=(None, None), deadline_ms=1_000)
    move = view_for(state, state.turn).legal[0]
    await table.until(await table.deadline("m-1"))
    await table.send("m-1", move, "late")
    await table.referee.step()
    [rejected] = await table.rejections()
    assert (rejected.command_id, rejected.rejection.reason) == ("late", "late")
    assert await table.referee.fire_deadlines() == 1
    assert tags(await table.log("m-1"))[state.version] == "turn_timed_out"


async def test_a_gap_in_the_deadline_checks_longer_than_a_stall_is_given_back_to_the_turns(
    backend: Backend,
) -> None:
    """Nobody checked the deadlines for 1.5 s (the referee stalled, say) and the turn's
    deadline passed meanwhile: the next check pushes it back by the gap instead of timing
    the turn out, and the turn times out once that time has passed too."""
    table = await Table(backend, stall_ms=1_000).start()
    await table.create("m-1", bots=(None, None), deadline_ms=1_000)
    assert await table.referee.fire_deadlines() == 0  # a check just before the gap
    deadline = await table.deadline("m-1")
    await table.until(deadline + 500)
    assert await table.referee.fire_deadlines() == 0
    pushed = await table.deadline("m-1")
    assert pushed >= deadline + 1_000
    for _ in range(300):  # checking all along, as the referee does: no more gaps
        if await table.referee.fire_deadlines():
            break
        await table.pass_time(0.05)
    assert "turn_timed_out" in tags(await table.log("m-1"))
    if backend.name == "memory":
        assert table.clock.now * 1000 >= pushed


async def test_a_stall_before_anyone_checked_a_new_partition_is_given_back_too(
    backend: Backend,
) -> None:
    """The referee stalls right after the first turn of a partition nobody served before
    began, before its clock loop ever checked that partition: taking the partition started
    its clock, so the gap is given back all the same."""
    table = await Table(backend, stall_ms=1_000).start()
    await table.create("m-1", bots=(None, None), deadline_ms=1_000)
    deadline = await table.deadline("m-1")
    await table.until(deadline + 500)
    assert await table.referee.fire_deadlines() == 0
    assert await table.deadline("m-1") >= deadline + 1_000
    assert "turn_timed_out" not in tags(await table.log("m-1"))


async def test_a_stall_the_referee_never_heard_of_still_keeps_a_move_in_time(
    backend: Backend,
) -> None:
    """The check that pushed the deadlines back ran, but its answer never reached the referee
    (its client gave up on a paused Redis, which ran the check on resuming); the referee's
    next check finds no gap. A move that reached the stream after the turn's deadline as
    first set, and before it as pushed back, is applied: its append judges it against the
    deadline as stored, not against what the referee knew."""
    table = await Table(backend, stall_ms=1_000).start()
    state = await table.create("m-1", bots=(None, None), deadline_ms=1_000)
    assert await table.referee.fire_deadlines() == 0
    deadline = await table.deadline("m-1")
    await table.until(deadline + 500)
    p = table.keys.partition_of("m-1")
    [lost] = await backend.transport.deadlines_due([p], "referee", 10, 1_000)  # answer lost
    assert lost.shifted_ms >= 1_000 and not lost.matches
    assert await table.referee.fire_deadlines() == 0  # no gap left to find
    await table.send("m-1", view_for(state, state.turn).legal[0], "in-time")
    await table.referee.step()
    assert await table.rejections() == []
    [applied] = [e for e in await table.log("m-1") if e.version == state.version + 1]
    assert applied.command_id == "in-time"


async def test_a_timeout_is_appended_only_once_the_deadline_as_stored_has_passed(
    backend: Backend,
) -> None:
    """A timeout decided before a stall pushed its deadline back (found due, then Redis
    paused before its append ran) is dropped by its append, and fires again at the deadline
    as stored."""
    table = await Table(backend).start()
    state = await table.create("m-1", bots=(None, None), deadline_ms=30_000)
    timeout = TimeOutTurn(seat=state.turn, version=state.version)
    work = table.referee_work("m-1", timeout, f"timeout:{state.version}")
    await table.referee.decide_and_append([work])
    assert (await table.state("m-1")).version == state.version
    assert "turn_timed_out" not in tags(await table.log("m-1"))
    assert await table.rejections() == []


async def test_a_command_that_breaks_the_referee_is_parked_alone(backend: Backend) -> None:
    """A corrupt log (an event that cannot follow) dead-letters its command; the rest of the
    batch is applied."""
    table = await Table(backend).start()
    await table.create("m-good")
    [turn] = await table.turns()
    await backend.store.append(
        "m-bad", [NewEvent("garbage", b'{"not": "an envelope"}')], 0, "corrupt"
    )
    await table.send("m-bad", DrawTile(seat=0), "doomed")
    await table.send("m-good", turn.view.legal[0], "fine")
    await table.referee.step()
    assert (await table.state("m-good")).version == turn.version + 1
    dead = await backend.store.read_stream(table.keys.dead_letters)
    assert len(dead) == 1 and b"doomed" in dead[0].fields[b"__data__"]


async def test_a_match_moved_by_another_writer_is_decided_against_what_is_stored(
    backend: Backend,
) -> None:
    """The expected version: an append that conflicts is decided again on the stored state,
    and a command refused by a stale cache is checked against the store before it is."""
    table = await Table(backend).start()
    await table.create("m-1")
    [turn] = await table.turns()
    other = table.new_referee("r2")  # another writer, behind this referee's back
    await other.decide_and_append([table.referee_work("m-1", turn.view.legal[0], "elsewhere")])
    moved = await table.state("m-1")
    assert moved.version > turn.version
    # The next seat's move is illegal on the cached state, legal on the stored one.
    next_move = (await table.turns())[-1].view.legal[0]
    await table.send("m-1", next_move, "next")
    await table.referee.step()
    assert await table.rejections() == []
    assert (await table.state("m-1")).version > moved.version


async def test_batches_side_by_side_never_decide_one_match_in_both(backend: Backend) -> None:
    """While one batch's append is on its way the next batch is decided: a match it does not
    hold goes ahead at once, a match it holds waits for that append and is decided on the
    state it stored (C4: the next seat's move is legal only there), never on the one before."""
    store = GatedStore(backend.store)
    table = await Table(Backend(backend.name, store, backend.transport)).start()
    one = await table.create("m-1")
    two = await table.create("m-2")
    store.blocked = "m-1"
    at, other_at = one.version, two.version
    first = legal_moves(one)[0]
    after, _ = apply(one, first)
    second = legal_moves(after)[0]
    referee = table.referee
    handled = referee.handled
    earlier = asyncio.create_task(
        referee.decide_and_append([table.referee_work("m-1", first, "first")])
    )
    await asyncio.wait_for(store.entered.wait(), 10)  # the first batch is appending
    later = asyncio.create_task(
        referee.decide_and_append(
            [
                table.referee_work("m-1", second, "second"),
                table.referee_work("m-2", legal_moves(two)[0], "other"),
            ]
        )
    )
    for _ in range(200):  # the other match is not held up by the append on its way
        if (await table.state("m-2")).version > other_at:
            break
        await asyncio.sleep(0.01)
    assert (await table.state("m-2")).version > other_at
    assert not later.done()
    assert (await table.state("m-1")).version == at
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(earlier, later), 10)
    ids = [env.command_id for env in await table.log("m-1")]
    assert ids.index("first") < ids.index("second")
    assert referee.handled == handled + 3 and not referee._holding


async def test_a_match_whose_append_failed_is_read_again_and_goes_on(backend: Backend) -> None:
    """Stuck case 1: an append lost on the way (a dropped connection, a Redis restart) must
    not leave the referee deciding on a state that was never stored."""
    store = FailingStore(backend.store)
    table = await Table(Backend(backend.name, store, backend.transport)).start()
    await table.create("m-1")
    [turn] = await table.turns()
    await table.send("m-1", turn.view.legal[0], f"turn:{turn.version}:{turn.seat}")
    store.fail_next = True
    with pytest.raises(ConnectionError):
        await table.referee.step()
    assert (await table.state("m-1")).version == turn.version  # nothing was stored
    assert "m-1" not in table.referee.matches.cache.ids()  # nor cached
    claimed = await table.referee.reader.claim(0)  # the command stayed pending
    assert len(claimed) == 1
    await table.referee.handle(claimed)
    assert await table.rejections() == []
    assert (await table.state("m-1")).version == turn.version + 1
    assert (await table.turns())[-1].version == turn.version + 1
    assert (await table.play("m-1")).phase == "over"


async def test_a_partition_handed_over_and_back_is_read_afresh(backend: Backend) -> None:
    """Stuck case 2: while another referee held the partition the match moved on; the
    referee that takes it back must not decide on what it cached before."""
    table = await Table(backend).start()
    await table.create("m-1")
    first = table.referee
    assert "m-1" in first.matches.cache.ids()
    await first.leases.release_all()  # its lease ran out; another referee takes over
    other = table.new_referee("r2")
    await other.prepare()
    for _ in range(4):
        await table.bots.step()
        await other.step()
    moved = await table.state("m-1")
    await other.leases.release_all()
    await first.own()  # and the partition comes back
    assert "m-1" not in first.matches.cache.ids()
    await table.bots.step()
    await first.step()
    assert await table.rejections() == []
    assert (await table.state("m-1")).version > moved.version
    assert (await table.play("m-1")).phase == "over"


async def test_a_lost_turn_is_found_on_the_watch_list_and_sent_again(backend: Backend) -> None:
    """A live match waiting on a house bot whose turn was lost (read and never answered,
    or gone with a restarted Redis) gets the same turn again after ``watch_ms``."""
    table = await Table(backend, watch_ms=1_000).start()
    await table.create("m-1")
    lost = await table.bots.reader.read()
    await table.bots.reader.ack(lost)  # a bot took it and died without answering
    table.clock.advance(0.5)
    assert await table.referee.check_watched() == 0
    table.clock.advance(0.6)
    assert await table.referee.check_watched() == 1
    first, again = await table.turns()
    assert (again.seat, again.version, again.view) == (first.seat, first.version, first.view)
    assert (await table.play("m-1")).phase == "over"
    watch = table.keys.watch(table.keys.partition_of("m-1"))
    assert await backend.store.scheduled(watch) == []  # a finished match leaves the list


async def test_a_match_that_keeps_moving_is_never_sent_its_turn_again(backend: Backend) -> None:
    table = await Table(backend, watch_ms=1_000).start()
    await table.create("m-1")
    for _ in range(8):
        table.clock.advance(0.6)
        await table.bots.step()
        await table.referee.step()
        assert await table.referee.check_watched() == 0
    turns = await table.turns()
    assert len({t.version for t in turns}) == len(turns)  # no turn was sent twice


async def test_a_referee_new_to_a_watched_match_gives_it_one_more_period(
    backend: Backend,
) -> None:
    """After a restart or a hand-over the referee has not seen the match move: it waits a
    whole period before sending a turn again."""
    table = await Table(backend, watch_ms=1_000).start()
    await table.create("m-1")
    await table.bots.reader.ack(await table.bots.reader.read())  # the turn is lost
    await table.referee.leases.release_all()
    fresh = table.new_referee("r2", watch_ms=1_000)
    await fresh.prepare()
    table.clock.advance(1.1)
    assert await fresh.check_watched() == 0
    table.clock.advance(0.5)
    assert await fresh.check_watched() == 0
    table.clock.advance(0.6)
    assert await fresh.check_watched() == 1
    assert len(await table.turns()) == 2


async def test_an_outside_seat_gets_no_turn_message(backend: Backend) -> None:
    """Outside players follow the log through the gateway; only house bots get turns."""
    table = await Table(backend).start()
    state = await table.create("m-1", bots=(None, None))
    assert state.phase == "playing"
    assert await table.turns("external") == []


class FailingStore(EventStore):
    """A store whose next batch of appends is lost on the way (a dropped connection)."""

    def __init__(self, inner: EventStore) -> None:
        self.inner = inner
        self.keys = inner.keys
        self.fail_next = False

    async def append_many(self, batch):  # type: ignore[no-untyped-def]
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("connection lost during the append")
        return await self.inner.append_many(batch)

    async def append(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return await self.inner.append(*args, **kwargs)

    async def read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return await self.inner.read(*args, **kwargs)

    async def version(self, match_id: str) -> int:
        return await self.inner.version(match_id)

    async def applied(self, match_id: str, command_id: str) -> AppendResult | None:
        return await self.inner.applied(match_id, command_id)

    async def read_log(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return await self.inner.read_log(*args, **kwargs)

    async def scheduled(self, key: str) -> list[tuple[str, int]]:
        return await self.inner.scheduled(key)

    async def last_position(self, partition: int) -> str:
        return await self.inner.last_position(partition)

    async def match_ids(self, partition: int) -> list[str]:
        return await self.inner.match_ids(partition)

    async def read_stream(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return await self.inner.read_stream(*args, **kwargs)


class GatedStore(FailingStore):
    """A store whose appends touching one match wait until the test opens the gate."""

    def __init__(self, inner: EventStore) -> None:
        super().__init__(inner)
        self.blocked: str | None = None
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_many(self, batch):  # type: ignore[no-untyped-def]
        if any(request.match_id == self.blocked for request in batch):
            self.entered.set()
            await self.gate.wait()
        return await self.inner.append_many(batch)
