"""Processes of two schemas on the same partitions, as in a rolling deploy (docs/store.md,
"Mixed versions"), on the in-memory backend and on Redis.

The newer process reads everything the older wrote: a match begun in schema 0 (the worked
example of events/upcast.py) is played on by today's referee and projected by today's
projector. The older process never misreads and never acknowledges what it cannot read: an
event of a newer schema parks the command sent to its match, leaves its clock to a process
that can read it (without holding up the other matches' clocks), parks the projections of
its partition, and a newer turn is parked by the bot worker rather than answered.
"""

from __future__ import annotations

import msgspec
import pytest

from engine.strategy import make_strategy
from engine.views import view_for
from events.codec import JSON
from events.envelope import SCHEMA, CommandEnvelope, Envelope
from events.model import MatchEnded, TurnTimedOut
from services.projections.projector import Projector
from services.transport.base import Message
from tests.behaviour.table import Table
from tests.behaviour.test_projector import checkpoints_for
from tests.service.conftest import fold
from tests.support import schema0
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


def _mid_round(log: list[Envelope]) -> int:
    """How many events of ``log`` to keep so the match stands mid-round, after a pass."""
    passes = [e.version for e in log if e.event.__struct_config__.tag == "turn_passed"]
    cut = next(v for v in passes if fold(log[:v]).phase == "playing")
    return cut


async def test_a_match_an_older_release_began_is_played_on_and_projected_by_this_one(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    begun = schema0.played("m-old")
    kept = _mid_round(begun)
    await table.store.append("m-old", schema0.stored(begun[:kept]), 0, "written-by-schema-0")
    bot = make_strategy("greedy")
    for n in range(500):
        state = await table.state("m-old")
        if state.phase == "over":
            break
        await table.send("m-old", bot.choose(view_for(state, state.turn)), f"move-{n}")
        await table.referee.step()
    log = await table.log("m-old")
    assert isinstance(log[-1].event, MatchEnded)
    assert log[:kept] == begun[:kept]  # the older events read as the current shape, exactly
    assert [e.version for e in log] == list(range(1, len(log) + 1))
    raw = [msgspec.json.decode(r.data) for r in await table.store.read("m-old")]
    assert {r["schema"] for r in raw[:kept]} == {0}  # stored as they were written
    assert {r["schema"] for r in raw[kept:]} == {SCHEMA}  # a writer writes only its own
    projector = Projector(backend.store, checkpoints_for(backend))
    assert await projector.catch_up() == len(log)
    summary = await projector.matches.load("m-old")
    assert summary is not None and summary.phase == "over"


async def test_a_command_to_a_match_holding_a_newer_event_is_parked_and_nothing_appended(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    log = schema0.played("m-new")
    kept = _mid_round(log)
    await table.store.append("m-new", schema0.current(log[: kept - 1]), 0, "written-by-schema-1")
    await table.store.append(
        "m-new", [schema0.stored_newer(log[kept - 1])], kept - 1, "written-by-schema-2"
    )
    state = fold(log[:kept])
    await table.send("m-new", make_strategy("greedy").choose(view_for(state, state.turn)), "c1")
    for _ in range(4):  # the deliveries a command gets before it is parked for good
        await table.referee.step()
        table.clock.advance(1)
    assert len(await table.store.read("m-new")) == kept  # nothing decided on a misread state
    dead = await backend.store.read_stream(table.keys.dead_letters)
    assert len(dead) == 1
    reason = dead[0].fields[b"reason"].decode()
    assert f"schema {SCHEMA + 1} is newer than this reader's ({SCHEMA})" in reason
    assert await table.rejections() == []


async def test_a_match_holding_a_newer_event_keeps_its_clock_and_not_the_others(
    backend: Backend,
) -> None:
    """E.g. a newer referee had the partition and wrote a turn: this one cannot read the match,
    so it leaves that deadline to a process that can; the other matches still time out."""
    table = await Table(backend).start()
    partition = table.keys.partition_of("m-newer")
    other = next(
        f"m-other{n}" for n in range(1000) if table.keys.partition_of(f"m-other{n}") == partition
    )
    await table.create(other, bots=(None, None), deadline_ms=1_000)
    await table.create("m-newer", bots=(None, None), deadline_ms=1_000)
    [stored] = await table.store.read("m-newer", 2, 2)
    newer = schema0.stored_newer(JSON.decode_envelope(stored.data))
    version = len(await table.store.read("m-newer"))
    await table.store.append("m-newer", [newer], version, "written-by-schema-2")
    table.referee.matches.forget("m-newer")
    await table.until(await table.deadline(other) + 1)
    await table.until(await table.deadline("m-newer") + 1)
    assert await table.referee.fire_deadlines() == 1
    assert any(isinstance(e.event, TurnTimedOut) for e in await table.log(other))
    assert len(await table.store.read("m-newer")) == version + 1  # left as it was
    assert await table.referee.fire_deadlines() == 0  # and left again, not failed


async def test_the_projector_parks_a_partition_at_a_newer_event_and_goes_on_with_the_rest(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    partition = table.keys.partition_of("m-newer")
    elsewhere = next(
        f"m-else{n}" for n in range(1000) if table.keys.partition_of(f"m-else{n}") != partition
    )
    log = schema0.played("m-newer")
    await table.store.append("m-newer", schema0.current(log[:5]), 0, "written-by-schema-1")
    await table.store.append("m-newer", [schema0.stored_newer(log[5])], 5, "written-by-schema-2")
    await table.create(elsewhere)
    checkpoints = checkpoints_for(backend)
    projector = Projector(backend.store, checkpoints)
    before = await checkpoints.position("summary", partition)
    await projector.catch_up()
    await projector.catch_up()  # tried again: still parked, not passed over
    assert await checkpoints.position("summary", partition) == before
    assert await checkpoints.position("summary", table.keys.partition_of(elsewhere)) != before
    assert await projector.matches.load(elsewhere) is not None


async def test_a_bot_worker_parks_a_turn_of_a_newer_schema_instead_of_answering_it(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    await table.create("m-1")
    [turn] = await table.turns()
    newer = schema0.newer(turn)
    stream = table.keys.turns(table.keys.partition_of("m-1"), table.pool)
    await backend.transport.publish([Message(stream, newer)])
    commands = table.keys.commands(table.keys.partition_of("m-1"))
    before = len(await backend.store.read_stream(commands))
    assert await table.bots.step() == 2  # the referee's turn and the newer copy of it
    assert len(await backend.store.read_stream(commands)) == before + 1  # one answer only
    [dead] = await backend.store.read_stream(table.keys.dead_letters)
    assert b"newer than this reader" in dead.fields[b"reason"]
    assert dead.fields[b"__data__"] == newer  # parked whole, to be read


async def test_a_command_envelope_of_a_newer_schema_is_rejected_to_its_sender(
    backend: Backend,
) -> None:
    table = await Table(backend).start()
    await table.create("m-1", bots=(None, None))
    state = await table.state("m-1")
    move = make_strategy("greedy").choose(view_for(state, state.turn))
    envelope = CommandEnvelope(
        match_id="m-1", command_id="c-newer", command=move, reply_to=table.replies
    )
    await table.send_raw("m-1", schema0.newer(envelope))
    await table.referee.step()
    [rejected] = await table.rejections()
    assert (rejected.command_id, rejected.rejection.reason) == ("c-newer", "bad_command")
    assert f"schema {SCHEMA + 1} is newer" in rejected.rejection.message
    assert (await table.state("m-1")).version == state.version  # nothing appended
