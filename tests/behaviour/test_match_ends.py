"""A match ended early through the referee, on the in-memory backend and again on Redis: a seat
that never moves forfeits on the referee's deadlines, a seat aborts before its side has moved,
the operator cancels (README: "Rules: choices where RULES.md is silent")."""

from __future__ import annotations

import pytest

from engine.game import legal_moves
from engine.rules import Rules
from engine.verify import verify
from events.model import Abort, CancelMatch, CreateMatch, MatchEnded, PassTurn, TurnTimedOut
from tests.behaviour.table import Table
from tests.support.backends import Backend

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio]

DEADLINE_MS = 5_000


async def open_match(
    table: Table,
    match_id: str,
    bots: tuple[str | None, ...],
    *,
    forfeit_after: int = 0,
    deadline_ms: int = DEADLINE_MS,
) -> None:
    """Create a two-player Straight match (None: a seat played from outside) and let the
    referee deal it."""
    rules = Rules.make("straight", players=2, target=250)
    command = CreateMatch(
        rules=rules,
        players=("outsider", "greedy") if bots[1] else ("ann", "bob"),
        bots=bots,
        deadline_ms=deadline_ms,
        forfeit_after=forfeit_after,
    )
    await table.send(match_id, command, f"create:{match_id}")
    await table.referee.step()


async def ended(table: Table, match_id: str) -> MatchEnded:
    """How the match ended, checked against the rules event by event."""
    state = await table.state(match_id)
    assert state.result is not None, f"{match_id} has not ended"
    assert verify([env.event for env in await table.log(match_id)]) is None
    return state.result


async def test_a_seat_that_never_moves_forfeits_after_forfeit_after_timeouts(
    backend: Backend,
) -> None:
    """README (forfeit): an outside seat that never answers times out on each of its turns;
    the referee plays for it the first two times and its third timeout in a row forfeits the
    match, which the house bot's side wins. The match leaves the deadline set."""
    table = await Table(backend).start()
    # on Redis the deadlines pass on the server's clock: short ones keep the test short
    await open_match(table, "m-gone", (None, "greedy"), forfeit_after=3, deadline_ms=2_000)
    for _ in range(200):
        state = await table.state("m-gone")
        if state.phase == "over":
            break
        if state.turn == 0:
            await table.until(await table.deadline("m-gone"))
            assert await table.referee.fire_deadlines() == 1
        else:
            await table.bots.step()
            await table.referee.step()
    result = await ended(table, "m-gone")
    assert (result.winner, result.reason, result.resigned) == (1, "forfeit", 0)
    timeouts = [e.event for e in await table.log("m-gone") if isinstance(e.event, TurnTimedOut)]
    assert [t.seat for t in timeouts] == [0, 0, 0]
    deadlines = table.keys.deadlines(table.keys.partition_of("m-gone"))
    assert await backend.store.scheduled(deadlines) == []
    assert await table.rejections() == []


async def test_a_seat_may_abort_until_its_side_moves_and_the_match_ends_with_no_winner(
    backend: Backend,
) -> None:
    """README (abort): the leader moves and may no longer abort (the refusal goes back to the
    sender); the other seat has not moved and aborts; later commands find the match over."""
    table = await Table(backend).start()
    await open_match(table, "m-abort", (None, None))
    state = await table.state("m-abort")
    leader, other = state.turn, 1 - state.turn
    await table.send("m-abort", legal_moves(state)[0], "lead")
    await table.referee.step()
    await table.send("m-abort", Abort(seat=leader), "abort-late")
    await table.send("m-abort", Abort(seat=other), "abort")
    await table.send("m-abort", PassTurn(seat=other), "after")
    await table.referee.step()
    result = await ended(table, "m-abort")
    assert (result.winner, result.reason, result.resigned) == (None, "aborted", other)
    tags = [env.event.__struct_config__.tag for env in await table.log("m-abort")]
    assert tags[-2:] == ["round_ended", "match_ended"]
    rejected = {r.command_id: r.rejection.reason for r in await table.rejections()}
    assert rejected == {"abort-late": "too_late_to_abort", "after": "match_over"}
    deadlines = table.keys.deadlines(table.keys.partition_of("m-abort"))
    assert await backend.store.scheduled(deadlines) == []


async def test_the_operator_cancels_a_match_being_played(backend: Backend) -> None:
    """README (cancel): house bots have been playing; the cancel ends it with no winner and
    no more turns are answered."""
    table = await Table(backend).start()
    await open_match(table, "m-cancel", ("greedy", "greedy"))
    for _ in range(4):
        await table.bots.step()
        await table.referee.step()
    assert (await table.state("m-cancel")).phase == "playing"
    await table.send("m-cancel", CancelMatch(), "cancel")
    await table.referee.step()
    result = await ended(table, "m-cancel")
    assert (result.winner, result.reason, result.resigned) == (None, "cancelled", None)
    version = (await table.state("m-cancel")).version
    await table.bots.step()
    await table.referee.step()
    assert (await table.state("m-cancel")).version == version
