"""House bot workers, on the in-memory backend and on Redis."""

from __future__ import annotations

import pytest

from engine.views import View
from events.codec import JSON
from events.model import Move
from tests.behaviour.table import Table
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]


class Broken:
    """A strategy with a bug."""

    name = "broken"

    def choose(self, view: View) -> Move:
        raise RuntimeError("bug")


async def test_a_strategy_that_raises_still_answers_its_turn_with_the_first_legal_move(
    backend: Backend,
) -> None:
    """A bug in one strategy call must not stall the batch: the turn is answered and acked."""
    table = await Table(backend, strategy=Broken(), pool="broken").start()
    await table.create("m-1")
    [turn] = await table.turns()
    await table.bots.step()
    commands = table.keys.commands(table.keys.partition_of("m-1"))
    sent = [
        JSON.decode_command_envelope(e.fields[b"__data__"])
        for e in await backend.store.read_stream(commands)
    ]
    assert sent[-1].command == turn.view.legal[0]
    assert sent[-1].command_id == f"turn:{turn.version}:{turn.seat}"
    assert await table.bots.reader.read(pending=True) == []


async def test_a_turn_answered_twice_is_applied_once(backend: Backend) -> None:
    """The command id comes from the turn, so a turn sent again and answered again is
    deduplicated: applied once, and the second answer is neither applied nor rejected."""
    table = await Table(backend).start()
    await table.create("m-1")
    await table.bots.step()
    await table.referee.step()
    turn = (await table.turns())[-1]
    table.clock.advance(5)  # the turn is sent again (as if lost) and both are answered
    assert await table.referee.check_watched() == 1
    assert await table.bots.step() == 2
    await table.referee.step()
    answer = f"turn:{turn.version}:{turn.seat}"
    versions = [env.version for env in await table.log("m-1") if env.command_id == answer]
    assert versions and versions == list(range(turn.version + 1, turn.version + 1 + len(versions)))
    assert (await table.state("m-1")).version == versions[-1]
    assert await table.rejections() == []
