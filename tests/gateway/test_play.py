"""External bots built on the SDK, each its own process, play whole hosted matches over HTTP:
against house bots, against each other, and through a gateway that is killed mid-match."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from domino_sdk import SeatClient
from domino_sdk.protocol import ResignBody

from engine.verify import verify
from events.envelope import Envelope
from events.model import MatchCreated, MatchEnded
from tests.gateway.conftest import Gateways, create, free_port, join
from tests.service.conftest import fold, wait_until_over

pytestmark = pytest.mark.service

GREEDY = ["-m", "services.cli.main", "bot", "run", "--strategy", "greedy"]
RANDOM = ["-m", "services.cli.main", "bot", "run", "--strategy", "random"]
HEAVIEST = ["-m", "domino_sdk.examples.heaviest"]
BLOCKER = ["-m", "domino_sdk.examples.blocker"]


def bot(g: Gateways, url: str, match_id: str, program: list[str]) -> subprocess.Popen[bytes]:
    """Start an external bot process that joins the match's first open seat and plays it."""
    return subprocess.Popen(
        [sys.executable, *program, "--url", url, "--join", match_id],
        env=g.stack.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(bots: list[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Wait for every bot process; each must exit 0 having seen the match end."""
    deadline = time.monotonic() + timeout
    for p in bots:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"a bot did not finish: {err.decode()[-2000:]}")
        assert p.returncode == 0, err.decode()[-2000:]
        assert b"match over" in out, out.decode()


def assert_clean(log: list[Envelope]) -> None:
    """Versions 1..n with no gap or duplicate, and every event what the rules decide."""
    assert [e.version for e in log] == list(range(1, len(log) + 1))
    assert verify([e.event for e in log]) is None
    assert fold(log).result is not None


def test_sdk_bots_in_their_own_processes_play_whole_matches_against_house_bots_and_each_other(
    gateways: Gateways,
) -> None:
    """Express and Straight, 2-4 players, partners; strategies and the two example bots."""
    g = gateways
    matches: list[tuple[list[str | None], dict[str, Any], list[list[str]]]] = [
        (["random", None, "greedy", None], {"target": 40}, [GREEDY, HEAVIEST]),
        ([None, None], {"family": "straight", "target": 60}, [RANDOM, BLOCKER]),
        (
            [None, None, None],
            {"players": 3, "next_leader": "rotate", "target": 30},
            [HEAVIEST, BLOCKER, GREEDY],
        ),
        (["greedy", None], {"family": "straight", "top": 9, "target": 60}, [RANDOM]),
    ]
    ids: list[str] = []
    bots: list[subprocess.Popen[bytes]] = []
    for seats, rules, programs in matches:
        match_id = create(g.url, seats, rules=rules)
        ids.append(match_id)
        bots += [bot(g, g.url, match_id, program) for program in programs]
    finish(bots)
    logs = wait_until_over(g.redis_url, g.settings, ids, timeout=30)
    for (seats, _, programs), match_id in zip(matches, ids, strict=True):
        log = logs[match_id]
        assert_clean(log)
        created = log[0].event
        assert isinstance(created, MatchCreated)
        assert created.bots == tuple(seats)
        players = created.players
        external = [name for name, pool in zip(players, seats, strict=True) if pool is None]
        assert len(external) == len(programs)
        for program, name in ((HEAVIEST, "heaviest"), (BLOCKER, "blocker")):
            assert (program in programs) == (name in external)


def test_sdk_bots_finish_their_match_through_a_gateway_killed_and_restarted_mid_match(
    gateways: Gateways,
) -> None:
    """The gateway keeps nothing the bots need: they reconnect, resume and play on."""
    g = gateways
    port = free_port()
    url = g.spawn_gateway("gateway-doomed", port, {"DOMINO_GATEWAY_KEEPALIVE_S": "1"})
    match_id = create(url, [None, None, None, None], rules={"target": 150})
    bots = [bot(g, url, match_id, p) for p in (GREEDY, RANDOM, HEAVIEST, BLOCKER)]
    deadline = time.monotonic() + 20
    while len(g.log(match_id)) < 20:  # well into the match
        assert time.monotonic() < deadline, "the match did not start"
        time.sleep(0.05)
    g.stack.kill("gateway-doomed", signal.SIGKILL)
    before = len(g.log(match_id))
    time.sleep(0.5)
    assert len(g.log(match_id)) <= before + 2  # nothing moves without the gateway
    g.spawn_gateway("gateway-reborn", port, {"DOMINO_GATEWAY_KEEPALIVE_S": "1"})
    finish(bots)
    assert_clean(g.log(match_id))


def test_a_move_posted_while_the_gateway_is_down_goes_through_once_it_is_back(
    gateways: Gateways,
) -> None:
    """An SDK move meets no gateway for 12 s — longer than its retries' backoff adds up to —
    and is still applied, once, when the gateway comes back at its address: a move is tried
    again for 30 s while the gateway cannot be reached (a restart on a loaded host)."""
    match_id = create(gateways.url, ["random", None], rules={"players": 2}, deadline_ms=60000)
    _, token = join(gateways.url, match_id)
    port = free_port()
    env = {"DOMINO_GATEWAY_KEEPALIVE_S": "1"}

    async def run() -> int:
        client = SeatClient(f"http://127.0.0.1:{port}", token)
        try:
            await client.whoami()
            gateways.stack.kill("gateway-late", signal.SIGKILL)
            moved = asyncio.create_task(client.move(ResignBody(), key="resign"))
            await asyncio.sleep(12.0)
            assert not moved.done(), moved
            await asyncio.to_thread(gateways.spawn_gateway, "gateway-late", port, env)
            return (await asyncio.wait_for(moved, 30)).version
        finally:
            await client.aclose()

    gateways.spawn_gateway("gateway-late", port, env)
    try:
        version = asyncio.run(run())
    finally:
        if "gateway-late" in gateways.stack.processes:
            gateways.stack.kill("gateway-late", signal.SIGTERM)
    log = gateways.log(match_id)
    ended = log[-1]
    assert isinstance(ended.event, MatchEnded)
    # the resignation's events, from the version it was told, ended the match: applied once
    assert [e.command_id for e in log[version - 1 :]] == [ended.command_id] * (
        len(log) - version + 1
    )
