"""A stall is never charged to a seat: house bots play matches with 2 s turns while Redis is
paused (SIGSTOP) and resumed, under one referee and under two (docs/architecture.md,
"Deadlines and lost turns").

Every match must finish and verify (the rules re-checked, E1-E6 and C1-C10), and no turn may be
lost by a move that reached Redis in time. In time is measured from outside, on the server's
clock: a move's arrival is its command-stream entry's id; its turn's deadline is when the
append that began the turn was written (its notification-log entry's id) plus the time limit,
plus every pause longer than ``DOMINO_STALL_MS`` that began while the turn's time was still
running (the test's own reading of when Redis was stopped and resumed, shortened to what it is
sure of). A move in time must be the command that decided its turn: never refused as late,
never overtaken by a timeout.

The short form (24 matches, one pause of 5.5 s) runs in the default suite. Its pause is longer
than the 5 s a client waits for Redis's answer: the referee's deadline check then fails on the
client while Redis runs it on resuming and pushes the deadlines back, so the referee never
hears of the stall — the case that once had moves refused as late. The house bots answer
200 ms after reading their turns, so turns left unread when Redis stopped are answered just
after it resumes. The long form — 210 matches, ten pauses of 1.2 to 15 s, three of them just
past the client's wait — runs with ``DOMINO_STALL_LONG=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.rules import Rules
from engine.verify import verify
from events.codec import JSON
from events.envelope import Envelope
from events.model import TurnTimedOut
from services.cli.clients import open_clients, service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.servers import private_server
from services.store.keys import Keys
from services.transport.base import DATA
from tests.service.conftest import describe, read_log
from tests.service.test_clock import id_ms, written_at
from tests.support.topology import client_for, sync_client_for

pytestmark = pytest.mark.service

LONG = os.environ.get("DOMINO_STALL_LONG") == "1"
PARTITIONS = 4
STALL_MS = 1_000
"""DOMINO_STALL_MS: a pause longer than this is owed back to the turns it ate into."""


@dataclass(frozen=True)
class Plan:
    """How many matches, how long a turn, and the pauses of Redis (s), in order."""

    matches: int
    deadline_ms: int
    target: int
    pauses: Sequence[float]
    between_s: tuple[float, float]
    """How long Redis runs between two pauses (s): a random time in this range."""
    pace_ms: int
    """How long the house bots wait before answering a batch of turns (DOMINO_BOT_PACE_MS):
    turns appended meanwhile are still unread when Redis stops, and are answered that long
    after it resumes."""


SHORT = Plan(
    matches=24, deadline_ms=2_000, target=10, pauses=[5.5], between_s=(0.5, 0.5), pace_ms=200
)
LONG_PLAN = Plan(
    matches=210,
    deadline_ms=2_000,
    target=250,  # about 2 min of play: longer than the pauses and the time between them
    pauses=[5.5, 1.5, 15.0, 6.0, 3.0, 8.0, 1.2, 5.5, 11.0, 4.0],
    between_s=(2.0, 6.0),
    pace_ms=200,
)


@dataclass(frozen=True)
class Pause:
    """When Redis was surely stopped (ms, the machine's clock, which is the server's): from
    just after SIGSTOP was sent to just before SIGCONT was."""

    start_ms: int
    end_ms: int

    @property
    def length_ms(self) -> int:
        """How long it surely lasted."""
        return self.end_ms - self.start_ms


@dataclass
class Findings:
    """What the logs say of the moves and turns."""

    moves: int = 0
    timeouts: int = 0
    rescued: int = 0
    """Moves that reached Redis after their turn's deadline as first set, and before it as
    the pauses pushed it back: only a pushed-back deadline keeps these in time."""
    unfair: list[str] | None = None


@contextlib.contextmanager
def pausable_redis() -> Iterator[tuple[str, int]]:
    """A private Redis node no other test uses, and its pid (resumed on exit, whatever)."""
    with private_server(appendfsync="no") as url:
        with sync_client_for(url) as client:
            pid = int(client.info("server")["process_id"])
        try:
            yield url, pid
        finally:
            os.kill(pid, signal.SIGCONT)


def pause(pid: int, seconds: float) -> Pause:
    """Stop Redis for ``seconds`` (SIGSTOP, then SIGCONT)."""
    os.kill(pid, signal.SIGSTOP)
    start = int(time.time() * 1000)
    time.sleep(seconds)
    end = int(time.time() * 1000)
    os.kill(pid, signal.SIGCONT)
    return Pause(start, end)


async def create_matches(url: str, settings: Settings, plan: Plan) -> list[str]:
    """Two-player Express matches of house bots (random against greedy), each turn timed."""
    rules = Rules.make("express", players=2, target=plan.target)
    async with open_clients(url, settings) as (client, _):
        service = service_client(client, settings, sender="stall-test")
        return [
            await service.create_match(
                rules, ["random", "greedy"], deadline_ms=plan.deadline_ms, match_id=f"stall-{n:03d}"
            )
            for n in range(plan.matches)
        ]


async def unfinished(url: str, settings: Settings, ids: Sequence[str]) -> list[str]:
    """The matches whose log does not end with ``match_ended`` (one pipelined read)."""
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    try:
        pipe = client.pipeline(transaction=False)
        for match_id in ids:
            pipe.xrevrange(keys.match(match_id), count=1)
        lasts = await pipe.execute()
    finally:
        await client.aclose()
    return [
        m
        for m, last in zip(ids, lasts, strict=True)
        if not last or last[0][1][b"type"] != b"match_ended"
    ]


async def versions(url: str, settings: Settings, ids: Sequence[str]) -> list[int]:
    """Each match's version now (one pipelined read)."""
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    try:
        pipe = client.pipeline(transaction=False)
        for match_id in ids:
            pipe.xlen(keys.match(match_id))
        return [int(n) for n in await pipe.execute()]
    finally:
        await client.aclose()


def owners(url: str, settings: Settings) -> set[str]:
    """The referees holding a partition now."""
    keys = Keys(settings.prefix, settings.partitions)
    with sync_client_for(url) as client:
        held = [client.get(keys.owner(p)) for p in range(settings.partitions)]
    return {h.decode() for h in held if h is not None}


def wait_until_playing(url: str, settings: Settings, ids: Sequence[str], referees: int) -> None:
    """Wait until every match is under way (its bots have moved) and every referee holds
    partitions, 60 s at most."""
    give_up = time.monotonic() + 60
    while (
        min(asyncio.run(versions(url, settings, ids))) < 4 or len(owners(url, settings)) < referees
    ):
        if time.monotonic() > give_up:
            pytest.fail("the matches did not get under way, or a referee held nothing, in 60 s")
        time.sleep(0.1)


def wait_until_finished(url: str, settings: Settings, ids: Sequence[str], timeout: float) -> None:
    """Wait until every match has ended; fail, saying where some stand, after ``timeout``."""
    give_up = time.monotonic() + timeout
    while left := asyncio.run(unfinished(url, settings, ids)):
        if time.monotonic() > give_up:
            stuck = "; ".join(describe(url, settings, m) for m in left[:3])
            pytest.fail(f"{len(left)} matches did not finish in {timeout} s: {stuck}")
        time.sleep(0.2)


async def arrivals(url: str, settings: Settings) -> dict[tuple[str, str], int]:
    """When each command reached Redis, on the server's clock: (match, command id) -> ms, from
    the command streams (not trimmed in this test)."""
    keys = Keys(settings.prefix, settings.partitions)
    client = client_for(url)
    out: dict[tuple[str, str], int] = {}
    try:
        for p in range(settings.partitions):
            for entry_id, fields in await client.xrange(keys.commands(p)):
                env = JSON.decode_command_envelope(fields[DATA])
                out.setdefault((env.match_id, env.command_id), id_ms(entry_id))
    finally:
        await client.aclose()
    return out


def fair_deadline(began_ms: int, limit_ms: int, pauses: Sequence[Pause]) -> int:
    """A turn's deadline as a seat is owed it: its time limit from when it began, plus each
    stall (a pause longer than DOMINO_STALL_MS) that began while its time was still running."""
    deadline = began_ms + limit_ms
    for p in sorted(pauses, key=lambda p: p.start_ms):
        if p.length_ms > STALL_MS and began_ms <= p.start_ms < deadline:
            deadline += p.length_ms
    return deadline


def judge(
    logs: dict[str, list[Envelope]],
    written: dict[str, dict[int, tuple[int, str]]],
    arrived: dict[tuple[str, str], int],
    pauses: Sequence[Pause],
    limit_ms: int,
) -> Findings:
    """Every bot move against its turn's fair deadline: one that reached Redis before it must
    be the command that decided its turn (not refused as late, not overtaken by a timeout)."""
    found = Findings(unfair=[])
    moves: dict[str, list[tuple[str, int]]] = {}
    for (match_id, command_id), at in arrived.items():
        if command_id.startswith("turn:"):  # a house bot's answer: turn:<version>:<seat>
            moves.setdefault(match_id, []).append((command_id, at))
    for match_id, log in logs.items():
        found.timeouts += sum(isinstance(e.event, TurnTimedOut) for e in log)
        for command_id, at in moves.get(match_id, []):
            found.moves += 1
            version = int(command_id.split(":")[1])
            began = written[match_id].get(version)
            if began is None:
                continue  # a turn not of this log (never the case for a bot's answer)
            deadline = fair_deadline(began[0], limit_ms, pauses)
            found.rescued += began[0] + limit_ms <= at < deadline
            if at >= deadline:
                continue  # late, fairly: whatever the referee did is right
            decided = log[version] if version < len(log) else None  # the event after the turn
            if decided is None or decided.command_id != command_id:
                what = "nothing" if decided is None else decided.event.__struct_config__.tag
                assert found.unfair is not None
                found.unfair.append(
                    f"{match_id} v{version}: {command_id} reached Redis at {at}, "
                    f"{deadline - at} ms before its deadline; the turn went to {what}"
                    f" ({'-' if decided is None else decided.command_id})"
                )
    return found


def run(plan: Plan, referees: int, key_prefix: str, tmp_path: Path) -> Findings:
    """Play ``plan`` under ``referees`` referees while Redis is paused; check every match and
    every move; return what was found."""
    rng = random.Random(7)
    with pausable_redis() as (url, pid):
        settings = Settings(
            redis_url=url,
            prefix=key_prefix,
            partitions=PARTITIONS,
            claim_idle_ms=500,
            stall_ms=STALL_MS,
            bot_pace_ms=plan.pace_ms,
            trim_every_s=3600,  # the command streams are the record of arrivals
            log_level="info",
        )
        with Stack(
            url,
            settings,
            referees=referees,
            pools={"random": 1, "greedy": 1},
            projector=False,
            log_dir=tmp_path,
        ):
            ids = asyncio.run(create_matches(url, settings, plan))
            wait_until_playing(url, settings, ids, referees)
            pauses: list[Pause] = []
            for seconds in plan.pauses:
                time.sleep(rng.uniform(*plan.between_s))
                pauses.append(pause(pid, seconds))
            wait_until_finished(url, settings, ids, timeout=300 if LONG else 60)
        logs = {m: asyncio.run(read_log(url, settings, m)) for m in ids}
        written = asyncio.run(written_at(url, settings))
        arrived = asyncio.run(arrivals(url, settings))
    wrong = {m: d for m, log in logs.items() if (d := verify([e.event for e in log]))}
    assert not wrong, f"matches that do not verify: {wrong}"
    found = judge(logs, written, arrived, pauses, plan.deadline_ms)
    stalled = ", ".join(f"{p.length_ms} ms" for p in pauses)
    print(
        f"\n{referees} referee(s), {len(ids)} matches, Redis paused {stalled}: "
        f"{found.moves} moves, {found.timeouts} turns timed out, {found.rescued} moves in time"
        f" only by a pushed-back deadline, {len(found.unfair or [])} unfair"
    )
    return found


@pytest.mark.timeout(900 if LONG else 300)
@pytest.mark.parametrize("referees", [1, 2])
def test_a_move_that_reached_redis_before_its_pushed_back_deadline_is_never_charged_late(
    referees: int, key_prefix: str, tmp_path: Path
) -> None:
    """Matches of house bots with 2 s turns while Redis is paused past every deadline in
    flight: every match finishes and verifies, and every move that reached Redis before its
    turn's deadline as the pause pushed it back decided its turn (none refused as late, no
    turn timed out in its place), under one referee and under two."""
    plan = LONG_PLAN if LONG else SHORT
    found = run(plan, referees, key_prefix, tmp_path)
    assert found.rescued, "no move arrived after its first deadline: the pause tested nothing"
    assert not found.unfair, "\n".join(found.unfair or [])
