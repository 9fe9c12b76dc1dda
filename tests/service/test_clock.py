"""One clock for deadlines and heartbeats: the Redis server's (README: "Deadlines").

Real processes on a real Redis, on one node and on a Redis Cluster: referees and a gateway
run with their wall clocks set seconds off (libfaketime's ``faketime``), Redis is paused under
a referee (SIGSTOP), a referee dies holding partitions with moves queued. Every turn is
measured on the server's clock: a notification-log entry's id is when Redis wrote it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.rules import Rules
from engine.state import MatchState
from engine.views import view_for
from services.cli.clients import open_clients, service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.core.commands import command_message
from services.core.repository import fold as fold_records
from services.redis.servers import local_cluster, private_server
from services.store.keys import Keys
from services.store.redis import RedisEventStore
from services.transport.base import DATA
from tests.gateway.conftest import create, free_port, join, wait_healthy
from tests.gateway.test_protocol_fixes import body_of
from tests.service.conftest import fold, read_log
from tests.support.topology import TOPOLOGIES, client_for, mark_cluster, sync_client_for

pytestmark = pytest.mark.service

PARTITIONS = 4
SENDER = "clock-test"


def id_ms(entry_id: bytes) -> int:
    """When Redis added a stream entry, on its clock: the time in the entry's id."""
    return int(entry_id.split(b"-")[0])


def skewed(seconds: int) -> list[str]:
    """The command that runs a process with its wall clock ``seconds`` off: libfaketime
    preloaded (as the ``faketime`` command does, but without its fork, so that a signal to
    the child reaches the service itself). Its monotonic clock, which only times intervals,
    is left alone."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")) + sorted(
        glob.glob("/usr/lib/faketime/libfaketimeMT.so.1")
    )
    if not found:
        pytest.fail("these tests need libfaketime: apt-get install faketime")
    return [
        "env",
        f"LD_PRELOAD={found[0]}",
        f"FAKETIME={seconds:+d}s",
        "FAKETIME_DONT_FAKE_MONOTONIC=1",
    ]


def settings_for(url: str, prefix: str, **overrides: Any) -> Settings:
    """A stack's settings: four partitions, quick leases and claims."""
    values: dict[str, Any] = {
        "redis_url": url,
        "prefix": prefix,
        "partitions": PARTITIONS,
        "claim_idle_ms": 600,
        "lease_ms": 2_000,
        "log_level": "warning",
    } | overrides
    return Settings(**values)


def no_stack(url: str, settings: Settings, log_dir: Path) -> Stack:
    """A stack with no process of its own yet: each test spawns what it needs."""
    return Stack(url, settings, referees=0, pools={}, projector=False, log_dir=log_dir)


async def server_ms(url: str) -> int:
    """The Redis server's clock now (ms)."""
    client = client_for(url)
    try:
        return _ms(await client.time())
    finally:
        await client.aclose()


def _ms(reply: Any) -> int:
    """TIME's answer in ms (from a node, or from a cluster's nodes by node)."""
    if isinstance(reply, dict):
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


async def create_matches(url: str, settings: Settings, count: int, deadline_ms: int) -> list[str]:
    """``count`` two-player Express matches played from outside by seats that never move on
    their own: every turn times out unless the test moves (no forfeit, a far target)."""
    async with open_clients(url, settings) as (client, _):
        service = service_client(client, settings, sender=SENDER)
        rules = Rules.make("express", players=2, target=1000)
        return [
            await service.create_match(
                rules, [None, None], deadline_ms=deadline_ms, match_id=f"clock-{n:03d}"
            )
            for n in range(count)
        ]


def wait_for(what: str, condition: Any, timeout: float = 60.0) -> Any:
    """Poll ``condition()`` until it returns something true; fail after ``timeout``."""
    give_up = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > give_up:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.05)


@dataclass(frozen=True)
class Turn:
    """A match's turn as the store holds it: its version, when it began and is over."""

    version: int
    began_ms: int
    deadline_ms: int


async def turns_now(
    url: str, settings: Settings, ids: Sequence[str], limit_ms: int
) -> dict[str, Turn]:
    """Each match's current turn, from Redis: its version, when the append that began it
    was written (the server's clock) and that plus the time limit, the deadline it must have.
    """
    times = await written_at(url, settings)
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    try:
        out: dict[str, Turn] = {}
        for match_id in ids:
            version = await client.xlen(keys.match(match_id))
            began = times.get(match_id, {}).get(version)
            if began is not None:
                out[match_id] = Turn(version, began[0], began[0] + limit_ms)
        return out
    finally:
        await client.aclose()


async def written_at(url: str, settings: Settings) -> dict[str, dict[int, tuple[int, str]]]:
    """When each event was written, on the server's clock: match -> version -> (ms, type),
    from the ids of the notification logs' entries."""
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    try:
        out: dict[str, dict[int, tuple[int, str]]] = {}
        for p in range(settings.partitions):
            for entry_id, fields in await client.xrange(keys.log(p)):
                versions = out.setdefault(fields[b"match"].decode(), {})
                versions[int(fields[b"version"])] = (id_ms(entry_id), fields[b"type"].decode())
        return out
    finally:
        await client.aclose()


def owners(url: str, settings: Settings) -> dict[int, str | None]:
    """Who holds each partition's lease now."""
    keys = Keys(settings.prefix, settings.partitions)
    with sync_client_for(url) as client:
        raw = {p: client.get(keys.owner(p)) for p in range(settings.partitions)}
    return {p: None if v is None else v.decode() for p, v in raw.items()}


def taken_over(url: str, settings: Settings, partitions: set[int], taker: str) -> dict[int, int]:
    """Wait (30 s at most) until ``taker`` holds every one of ``partitions``; return for each
    the server's clock the last time it was read not yet held by ``taker``: it was taken, and
    its deadlines first checked again, after that (a lower bound however slow the polling; a
    partition already taken at the first reading has none)."""
    keys = Keys(settings.prefix, settings.partitions)
    seen: dict[int, int] = {}
    pending = set(partitions)
    give_up = time.monotonic() + 30
    with sync_client_for(url) as client:
        while pending:
            now = _ms(client.time())
            for p in sorted(pending):
                owner = client.get(keys.owner(p))
                if owner is not None and owner.decode() == taker:
                    pending.discard(p)
                else:
                    seen[p] = now
            if time.monotonic() > give_up:
                pytest.fail(f"{taker} did not take partitions {sorted(pending)} within 30 s")
            time.sleep(0.02)
    return seen


async def queue_moves(
    url: str, settings: Settings, ids: Sequence[str], *, deliver_to: str | None = None
) -> dict[str, tuple[str, int]]:
    """Queue the move of the seat to play in each match, as an outside player would: match ->
    (command id, when it reached the command stream, ms). With ``deliver_to``, each is then
    read by that consumer of the referees' group (it took them and never answered)."""
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    store = RedisEventStore(client, partitions=settings.partitions, prefix=settings.prefix)
    queued: dict[str, tuple[str, int]] = {}
    try:
        states = {m: fold_records(await store.read(m)) for m in ids}
        for match_id, state in states.items():
            assert state is not None
            move = view_for(state, state.turn).legal[0]
            command_id = f"queued:{state.version}"
            message = command_message(keys, match_id, command_id, move, keys.replies(SENDER))
            entry = await client.xadd(message.stream, {DATA: message.payload})
            queued[match_id] = (command_id, id_ms(entry))
        if deliver_to is not None:
            streams = {keys.commands(keys.partition_of(m)) for m in ids}
            for stream in streams:
                await client.xreadgroup("referee", deliver_to, {stream: ">"}, count=1000)
        return queued
    finally:
        await client.aclose()


# -- skewed clocks ------------------------------------------------------------------------------


@pytest.mark.both_topologies
def test_a_turn_lasts_its_time_limit_on_the_servers_clock_whatever_the_referees_clocks_say(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """A referee 4 s behind and one 4 s ahead hand the partitions to and fro (one joins, one
    leaves, it comes back) while every turn times out: each lasts its 2 s, from the append
    that began it to the one that timed it out, measured on the server's clock. (With each
    referee's own clock, a turn set by one and fired by the other lasted 10 s, or next to
    nothing.) The hand-overs here are clean, and short: no stall to make up for."""
    settings = settings_for(redis_url, key_prefix, stall_ms=60_000)

    def held_by(*names: str) -> bool:
        return set(owners(redis_url, settings).values()) == set(names)

    with no_stack(redis_url, settings, tmp_path) as stack:
        stack.spawn("behind", "referee", "--name", "behind", wrapper=skewed(-4))
        ids = asyncio.run(create_matches(redis_url, settings, 16, deadline_ms=2_000))
        wait_for("the referee behind holds everything", lambda: held_by("behind"))
        time.sleep(3)
        stack.spawn("ahead", "referee", "--name", "ahead", wrapper=skewed(+4))
        wait_for("both referees hold partitions", lambda: held_by("ahead", "behind"))
        time.sleep(4)
        stack.kill("ahead", signal.SIGTERM)  # gives its partitions back as it stops
        wait_for("the referee behind holds everything again", lambda: held_by("behind"))
        time.sleep(4)
        stack.spawn("ahead-again", "referee", "--name", "ahead-again", wrapper=skewed(+4))
        wait_for("both hold partitions again", lambda: held_by("ahead-again", "behind"))
        time.sleep(4)
    lasted: list[int] = []
    for match_id, versions in asyncio.run(written_at(redis_url, settings)).items():
        assert match_id in ids
        for version, (at, kind) in versions.items():
            if kind == "turn_timed_out":
                lasted.append(at - versions[version - 1][0])
    assert len(lasted) >= 16 * 6
    print(f"\n{len(lasted)} turns lasted {min(lasted)} to {max(lasted)} ms")
    wrong = sorted(d for d in lasted if not 1_995 <= d <= 4_500)
    assert not wrong, f"{len(wrong)} of {len(lasted)} turns did not last 2 s: {wrong[:10]}"


def test_a_referee_that_died_is_not_counted_alive_for_its_clock_or_the_survivors(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """Heartbeats are on the server's clock: a referee 4 s ahead dies, and the one 4 s behind
    takes its partitions once the lease and the heartbeat have run out (2 s), not 8 s later;
    then one ahead again shares them, the one behind dies, and the same holds the other way.
    (Counted on their own clocks, a dead referee ahead stayed alive to one behind for 10 s,
    its partitions unserved, and a live one behind was never counted alive at all.)"""
    settings = settings_for(redis_url, key_prefix)

    def held_by(*names: str) -> bool:
        return set(owners(redis_url, settings).values()) == set(names)

    took: list[int] = []
    with no_stack(redis_url, settings, tmp_path) as stack:
        stack.spawn("ahead", "referee", "--name", "ahead", wrapper=skewed(+4))
        wait_for("the referee ahead holds everything", lambda: held_by("ahead"))
        for dying, living, skew in (("ahead", "behind", -4), ("behind", "ahead-again", +4)):
            stack.spawn(living, "referee", "--name", living, wrapper=skewed(skew))
            both = functools.partial(held_by, dying, living)
            wait_for("both referees hold partitions", both, 30)
            killed = asyncio.run(server_ms(redis_url))
            stack.kill(dying)
            wait_for("the survivor holds everything", functools.partial(held_by, living), 30)
            took.append(asyncio.run(server_ms(redis_url)) - killed)
    print(f"\na dead referee's partitions were taken after {took} ms")
    assert max(took) < 6_000, f"the survivor took a dead referee's partitions after {took} ms"


def test_the_gateway_tells_a_seat_its_deadline_and_time_left_on_the_servers_clock(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """A gateway 4 s ahead and a referee 4 s behind: a seat's turn lines carry the deadline
    the referee's append set on the server's clock, and the milliseconds left by that clock,
    whether the gateway read the match from its stream or followed it live."""
    settings = settings_for(redis_url, key_prefix)
    with no_stack(redis_url, settings, tmp_path) as stack:
        stack.spawn("referee", "referee", "--name", "referee", wrapper=skewed(-4))
        port = free_port()
        gateway = stack.spawn(
            "gateway", "gateway", "--host", "127.0.0.1", "--port", str(port), wrapper=skewed(+4)
        )
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, gateway, timeout=60)
        match_id = create(url, [None, None], rules={"players": 2}, deadline_ms=20_000)
        tokens = dict(join(url, match_id) for _ in range(2))

        def dealt() -> MatchState | None:
            log = asyncio.run(read_log(redis_url, settings, match_id))
            state = fold(log) if log else None
            return state if state is not None and state.phase == "playing" else None

        state = wait_for("the match is dealt", dealt)

        async def turn_line(seat: int, move: bool) -> tuple[dict[str, Any], int, int]:
            """The seat's turn line, read from its stream (after the other seat moves, with
            ``move``), and the server's clock just before and after."""
            path = f"/api/v1/matches/{match_id}/seats/{seat}/stream"
            headers = {"authorization": f"Bearer {tokens[seat]}"}
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                before = await server_ms(redis_url)
                async with http.stream("GET", path, headers=headers) as stream:
                    lines = stream.aiter_lines()
                    if move:
                        other = 1 - seat
                        current = fold(await read_log(redis_url, settings, match_id))
                        answer = await http.post(
                            f"/api/v1/matches/{match_id}/seats/{other}/moves",
                            json=body_of(view_for(current, other).legal[0]),
                            headers={
                                "authorization": f"Bearer {tokens[other]}",
                                "idempotency-key": "first",
                            },
                        )
                        assert answer.status_code == 200, answer.text
                    async for raw in lines:
                        line = json.loads(raw) if raw else None
                        if isinstance(line, dict) and line.get("type") == "turn":
                            return line, before, await server_ms(redis_url)
            raise AssertionError("the stream ended without a turn line")

        for seat, move in ((state.turn, False), (1 - state.turn, True)):
            line, before, after = asyncio.run(turn_line(seat, move))
            [turn] = asyncio.run(turns_now(redis_url, settings, [match_id], 20_000)).values()
            assert line["id"] == turn.version
            assert abs(line["deadline"] * 1000 - turn.deadline_ms) <= 5, (line, turn)
            left = line["remaining_ms"]
            assert turn.deadline_ms - after - 50 <= left <= turn.deadline_ms - before + 50, line


# -- Redis paused, a referee failing over ------------------------------------------------------


@dataclass
class Pausable:
    """A Redis of the test's own (a node, or a cluster's masters) it may stop and resume."""

    url: str
    pids: list[int]

    def pause(self) -> None:
        """SIGSTOP every master: Redis answers nothing, its clock runs on."""
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT every master."""
        for pid in self.pids:
            os.kill(pid, signal.SIGCONT)


@pytest.fixture(params=TOPOLOGIES)
def pausable(request: pytest.FixtureRequest) -> Iterator[Pausable]:
    """A private Redis node, or a private cluster of 3 masters (no replicas, and a node
    timeout longer than any pause: a pause is not a failure), that no other test uses."""
    with contextlib.ExitStack() as servers:
        if request.param == "node":
            url = servers.enter_context(private_server(appendfsync="no"))
            with sync_client_for(url) as client:
                server = Pausable(url, [int(client.info("server")["process_id"])])
        else:
            cluster = servers.enter_context(local_cluster(3, node_timeout_ms=120_000))
            mark_cluster(cluster.urls)
            server = Pausable(cluster.urls[0], [node.process.pid for node in cluster.masters])
        try:
            yield server
        finally:
            server.resume()


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """A process stopped (SIGSTOP) for the block: it stalls, as a starved event loop does."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed meanwhile
            os.kill(pid, signal.SIGCONT)


def playing(url: str, settings: Settings, ids: Sequence[str]) -> bool:
    """Whether every match is in play, its first turn begun."""
    return len(asyncio.run(turns_now(url, settings, ids, 0))) == len(ids)


def settled(url: str, settings: Settings, before: dict[str, Turn], timeout: float) -> None:
    """Wait until every match has moved on from the turn it was at."""

    def moved() -> bool:
        now = asyncio.run(turns_now(url, settings, list(before), 0))
        return all(m in now and now[m].version > turn.version for m, turn in before.items())

    wait_for("every turn in flight was decided", moved, timeout=timeout)


def check_turns(
    url: str,
    settings: Settings,
    before: dict[str, Turn],
    queued: dict[str, tuple[str, int]],
    unserved_ms: dict[str, int],
    slack_ms: int,
) -> int:
    """Each move queued during the stall was applied, never timed out: whether it reached the
    stream before its turn's deadline or after it, that deadline was pushed back by the whole
    stall, which began before the move was queued and ended after. Each other turn in flight
    lasted its deadline and then the time nobody served it (``unserved_ms``, by match; less
    ``slack_ms`` for the readings of the clock). Returns how many moves were queued before
    the deadline their turn had when the stall began."""
    times = asyncio.run(written_at(url, settings))
    wrong: list[str] = []
    in_time = 0
    for match_id, turn in before.items():
        logged = asyncio.run(read_log(url, settings, match_id))
        decided = logged[turn.version]  # the event after the turn in flight
        at, kind = times[match_id][turn.version + 1]
        if match_id in queued:
            command_id, arrived = queued[match_id]
            in_time += arrived < turn.deadline_ms
            if decided.command_id != command_id:
                wrong.append(
                    f"{match_id}: queued at {arrived} (deadline {turn.deadline_ms}), got {kind}"
                )
        elif kind != "turn_timed_out":
            wrong.append(f"{match_id}: nobody moved, and yet {kind}")
        elif at < turn.deadline_ms + unserved_ms[match_id] - slack_ms:
            charged = turn.deadline_ms + unserved_ms[match_id] - at
            wrong.append(f"{match_id}: timed out at {at}, charged {charged} ms of the stall")
    assert not wrong, "\n".join(wrong)
    return in_time


def test_a_redis_pause_times_out_no_move_queued_in_time_and_charges_no_turn_for_it(
    pausable: Pausable, key_prefix: str, tmp_path: Path
) -> None:
    """Forty matches whose outside seats answer late: half of them have their move queued on
    the command stream, Redis stops (SIGSTOP) for 3 s, past every deadline, and comes back.
    Every queued move is applied, and every other turn gets the pause back before it times
    out. The referee is held still while the moves are queued, so none is decided before
    the pause: they wait for it, unread, as moves stuck in a paused Redis's buffers would.
    The stall begins when the referee stops: a move queued after its turn's deadline, on a
    slow machine, is still in time, as the deadline is pushed back by all of it."""
    url = pausable.url
    settings = settings_for(url, key_prefix, lease_ms=30_000, claim_idle_ms=1_000)
    with no_stack(url, settings, tmp_path) as stack, sync_client_for(url) as clock:
        referee = stack.spawn("referee", "referee", "--name", "referee")
        ids = asyncio.run(create_matches(url, settings, 40, deadline_ms=2_000))
        _ms(clock.time())  # connected before the pause

        wait_for("every match is in play", lambda: playing(url, settings, ids))
        stalled = asyncio.run(server_ms(url))
        with stopped(referee.pid):
            before = asyncio.run(turns_now(url, settings, ids, 2_000))
            queued = asyncio.run(queue_moves(url, settings, ids[::2]))
            pausable.pause()
        # asked while Redis is stopped, TIME is answered the moment it resumes
        resumed_at: list[int] = []
        asking = threading.Thread(target=lambda: resumed_at.append(_ms(clock.time())))
        asking.start()
        time.sleep(3.0)
        pausable.resume()
        asking.join(timeout=30)
        [resumed] = resumed_at
        assert len(before) == len(ids)
        settled(url, settings, before, timeout=60)
    unserved = dict.fromkeys(before, resumed - stalled)
    in_time = check_turns(url, settings, before, queued, unserved, slack_ms=100)
    print(f"\nstalled {resumed - stalled} ms: {in_time} moves queued before the deadline")
    late = [m for m, turn in before.items() if turn.deadline_ms >= resumed]
    assert not late, f"the pause ended before these turns were over: {late}"


@pytest.mark.both_topologies
def test_a_referee_that_dies_with_moves_queued_leaves_none_timed_out_and_the_turns_their_time(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """Two referees share the partitions; one stalls with moves queued for its matches —
    some unread, some read by it and never answered — and is killed (SIGKILL). The other
    takes its partitions once the leases run out: every queued move is applied, none timed
    out, and the turns in flight get back the time nobody served them."""
    settings = settings_for(redis_url, key_prefix, stall_ms=1_000)
    keys = Keys(settings.prefix, settings.partitions)
    with no_stack(redis_url, settings, tmp_path) as stack:
        dying = stack.spawn("dying", "referee", "--name", "dying")
        ids = asyncio.run(create_matches(redis_url, settings, 40, deadline_ms=3_000))
        stack.spawn("taking", "referee", "--name", "taking")

        def shared() -> dict[int, str | None] | None:
            held = owners(redis_url, settings)
            return held if set(held.values()) == {"dying", "taking"} else None

        held = wait_for("both referees hold partitions", shared, timeout=30)
        theirs = [m for m in ids if held[keys.partition_of(m)] == "dying"]
        assert len(theirs) >= 10

        wait_for("their matches are in play", lambda: playing(redis_url, settings, theirs))
        stalled = asyncio.run(server_ms(redis_url))
        with stopped(dying.pid):
            before = asyncio.run(turns_now(redis_url, settings, theirs, 3_000))
            unread = asyncio.run(queue_moves(redis_url, settings, theirs[0::4]))
            taken = asyncio.run(queue_moves(redis_url, settings, theirs[1::4], deliver_to="dying"))
            stack.kill("dying")
        free = taken_over(redis_url, settings, {keys.partition_of(m) for m in theirs}, "taking")
        settled(redis_url, settings, before, timeout=60)
    queued = unread | taken
    # a partition nobody served from the stall until at least the last moment it was seen
    # not yet taken: its turns are owed that much at the very least
    unserved = {m: free.get(keys.partition_of(m), stalled) - stalled for m in before}
    in_time = check_turns(redis_url, settings, before, queued, unserved, slack_ms=500)
    print(f"\ntaken over after {sorted(set(unserved.values()))} ms: {in_time} moves in time")
