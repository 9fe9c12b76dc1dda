"""Bad commands get typed rejections (or are parked), and never change a match log."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.game import legal_moves
from engine.rules import Rules
from engine.tiles import full_set
from events.codec import JSON
from events.envelope import CommandEnvelope
from events.model import (
    CreateMatch,
    DealRound,
    MatchEnded,
    PassTurn,
    PlayTile,
    Resign,
    RoundEnded,
    TilePlayed,
    TimeOutTurn,
)
from events.wire import Rejected
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.core.commands import ServiceClient
from tests.service.conftest import fold, read_log
from tests.support.topology import client_for

pytestmark = pytest.mark.service


async def _rejections(client: ServiceClient, count: int, timeout: float = 10.0) -> list[Rejected]:
    out: list[Rejected] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        out += await client.rejections(block_ms=200)
    return out


def test_bad_commands_are_rejected_with_a_reason_and_leave_the_log_unchanged(
    redis_url: str, settings: Settings
) -> None:
    """Out of turn, illegal, malformed, oversized, unknown type and replayed commands."""

    async def scenario() -> None:
        redis = client_for(redis_url)
        client = service_client(redis, settings, sender="tester")
        try:
            match_id = await client.create_match(Rules.make("express", players=2), [None, None])
            for _ in range(100):
                log = await read_log(redis_url, settings, match_id)
                if len(log) >= 2:
                    break
                await asyncio.sleep(0.05)
            state = fold(log)
            turn, other = state.turn, 1 - state.turn
            foreign = next(iter(state.hands[other]))
            legal = legal_moves(state)[0]
            assert isinstance(legal, PlayTile)

            await client.send(match_id, PlayTile(seat=other, tile=foreign), "c-out-of-turn")
            await client.send(match_id, PlayTile(seat=turn, tile=foreign), "c-not-in-hand")
            await client.send(
                match_id, CreateMatch(rules=state.rules, players=("a", "b")), "c-create-again"
            )
            bad_type = CommandEnvelope(
                match_id=match_id, command_id="c-wrong-type", command=legal, reply_to=client.replies
            )
            raw = JSON.encode(bad_type).replace(b'"seat":', b'"seat":"zero","x":')
            await client.send_raw(match_id, raw)
            unknown = JSON.encode(bad_type).replace(b'"play_tile"', b'"teleport"')
            await client.send_raw(match_id, unknown)
            huge = JSON.encode(bad_type).replace(b'"c-wrong-type"', b'"' + b"x" * 20_000 + b'"')
            await client.send_raw(match_id, huge)
            await client.send_raw(match_id, b"\xff not json at all")
            await client.send(match_id, TimeOutTurn(seat=other, version=len(log)), "c-clock")
            await client.send(
                match_id, DealRound(order=tuple(full_set(6)), first_leader=0), "c-deal"
            )
            hijack = CommandEnvelope(
                match_id=match_id,
                command_id="c-hijack",
                command=PlayTile(seat=other, tile=foreign),
                reply_to=f"{settings.prefix}:{{p0}}:m:{match_id}",
            )
            await client.send_raw(match_id, JSON.encode(hijack))  # a reply stream it is not
            rejected = await _rejections(client, 8)
            reasons = sorted((r.command_id[:20], r.rejection.reason) for r in rejected)
            assert reasons == sorted(
                [
                    ("c-out-of-turn", "not_your_turn"),
                    ("c-not-in-hand", "tile_not_in_hand"),
                    ("c-create-again", "match_exists"),
                    ("c-wrong-type", "bad_command"),  # a string where a seat number goes
                    ("c-wrong-type", "bad_command"),  # an unknown command type
                    ("x" * 20, "bad_command"),  # over the size limit
                    ("c-clock", "bad_command"),  # only the referee times turns out
                    ("c-deal", "bad_command"),  # only the referee deals
                ]
            ), rejected
            assert sum(r.rejection.reason == "bad_command" for r in rejected) == 5
            assert len(await read_log(redis_url, settings, match_id)) == len(log)
            dead = await redis.xrange(f"{settings.prefix}:dead")
            assert any(b"not json" in fields[b"__data__"] for _, fields in dead)

            # the same legal move twice: applied once, the replay neither applied nor refused
            await client.send(match_id, legal, "c-legal")
            await client.send(match_id, legal, "c-legal")
            await client.send(match_id, legal, "c-marker")  # refused: the turn moved on
            replayed = await _rejections(client, 1)
            assert [r.command_id for r in replayed] == ["c-marker"]
            after = await read_log(redis_url, settings, match_id)
            applied = [e for e in after if e.command_id == "c-legal"]
            assert isinstance(applied[0].event, TilePlayed), applied
            # one append: the play, and the round's end with it (and the match's, at its target)
            # when the line is blocked at once (a double no other tile matches, C10); the next
            # deal is the referee's own
            first = len(log) + 1
            assert [e.version for e in applied] == list(range(first, first + len(applied)))
            assert all(isinstance(e.event, RoundEnded | MatchEnded) for e in applied[1:]), applied
        finally:
            await redis.aclose()

    with Stack(redis_url, settings, pools={}, projector=False):
        asyncio.run(scenario())


def test_a_resignation_through_the_service_ends_the_match_for_the_other_side(
    redis_url: str, settings: Settings
) -> None:
    """Resign is a command like any other: the log ends with the round and the match."""

    async def scenario() -> list[str]:
        redis = client_for(redis_url)
        client = service_client(redis, settings, sender="resigner")
        try:
            match_id = await client.create_match(Rules.make("straight", players=2), [None, None])
            await client.send(match_id, Resign(seat=1), "c-resign")
            for _ in range(100):
                log = await read_log(redis_url, settings, match_id)
                if log and log[-1].event.__struct_config__.tag == "match_ended":
                    break
                await asyncio.sleep(0.05)
            ended = log[-1].event
            assert isinstance(ended, MatchEnded)
            assert (ended.reason, ended.resigned, ended.winner) == ("resigned", 1, 0)
            return [e.event.__struct_config__.tag for e in log]
        finally:
            await redis.aclose()

    with Stack(redis_url, settings, pools={}, projector=False):
        tags = asyncio.run(scenario())
    assert tags == ["match_created", "round_started", "round_ended", "match_ended"]


def test_a_match_whose_log_is_corrupt_is_parked_and_the_others_go_on(
    redis_url: str, settings: Settings
) -> None:
    """A command the referee cannot handle is dead-lettered with the reason, alone."""

    async def scenario() -> None:
        redis = client_for(redis_url)
        client = service_client(redis, settings, sender="corrupt")
        try:
            rules = Rules.make("express", players=2)
            broken = await client.create_match(rules, [None, None])
            healthy = await client.create_match(rules, [None, None])
            for _ in range(100):
                sizes = [len(await read_log(redis_url, settings, m)) for m in (broken, healthy)]
                if min(sizes) >= 2:
                    break
                await asyncio.sleep(0.05)
            key = client.keys.match(broken)
            await redis.xadd(
                key, {"type": "tile_played", "__data__": b"{not an envelope"}, id="0-3"
            )
            await redis.delete(f"{settings.prefix}:replies:corrupt")
            move = legal_moves(fold(await read_log(redis_url, settings, healthy)))[0]
            stack.kill("referee-0")  # a fresh referee: nothing cached, the log is read again
            stack.spawn("referee-1", "referee", "--name", "referee-1")
            await client.send(broken, PassTurn(seat=0), "c-broken")
            await client.send(healthy, move, "c-healthy")
            for _ in range(200):
                log = await read_log(redis_url, settings, healthy)
                if log[-1].command_id == "c-healthy":
                    break
                await asyncio.sleep(0.05)
            assert log[-1].command_id == "c-healthy"
            for _ in range(100):
                dead = await redis.xrange(f"{settings.prefix}:dead")
                if dead:
                    break
                await asyncio.sleep(0.05)
            assert any(b"c-broken" in fields[b"__data__"] for _, fields in dead)
        finally:
            await redis.aclose()

    with Stack(redis_url, settings, pools={}, projector=False) as stack:
        asyncio.run(scenario())
