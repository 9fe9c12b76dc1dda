"""Bulk reads (replays, spectator streams from the first event, lists, ratings, players) never
crowd out play: a burst of them against a long finished match is answered 200 or 429 with a
``retry_after`` (never 503 while Redis answers), and two bots playing through the same gateway
meanwhile keep their pace."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from services.store.keys import Keys
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port
from tests.service.conftest import wait_until_over
from tests.support.topology import client_for

pytestmark = [pytest.mark.service]

BULK = {
    **PLAY_LIMITS,
    "DOMINO_GATEWAY_STREAMS_PER_CLIENT": "100000",  # the burst comes from one address here
    "DOMINO_GATEWAY_MAX_TARGET": "1000000",  # the bots' match lasts as long as the test
    "DOMINO_GATEWAY_MAX_ROUNDS": "100000",
    "DOMINO_GATEWAY_BULK_READS": "4",
    "DOMINO_GATEWAY_BULK_READS_PER_S": "100",
    "DOMINO_GATEWAY_BULK_WAIT_S": "1",
}
BURST = 1500
Answer = tuple[int, dict[str, str], bytes]
"""A status, the headers and the body (empty for a 200: its long body is read and dropped)."""
BOT = [sys.executable, "-m", "services.cli.main", "bot", "run"]


@pytest.fixture(scope="module")
def admitting(gateways: Gateways) -> Iterator[str]:
    """A gateway of its own with a small bound on bulk reads."""
    with gateways.spawned("gateway-bulk", free_port(), BULK) as url:
        yield url


@pytest.fixture(scope="module")
def long_match(gateways: Gateways, admitting: str) -> str:
    """A finished match of over a thousand events, played by house bots."""
    match_id = create(admitting, ["greedy", "random"], rules={"players": 2, "target": 1500})
    log = wait_until_over(gateways.redis_url, gateways.settings, [match_id], timeout=120)
    assert len(log[match_id]) > 1000
    return match_id


async def get(port: int, path: str) -> Answer:
    """GET ``path`` on a connection of its own: the status, the headers and (unless 200: a
    long body is read and dropped) the body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n".encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v for k, _, v in (x.partition(": ") for x in lines[1:] if x)}
        if status == 200:
            while await reader.read(1 << 16):
                pass
            return status, headers, b""
        return status, headers, await reader.read()
    finally:
        writer.close()


def paths(match_id: str) -> list[str]:
    """The bulk reads of a burst: spectator streams from the first event, and replays."""
    m = f"/api/v1/matches/{match_id}"
    return [f"{m}/stream?after=0", f"{m}/replay", f"{m}/stream?after=0&format=sse"]


async def burst(port: int, match_id: str, n: int) -> list[Answer]:
    """``n`` bulk reads at once."""
    ways = paths(match_id)
    return await asyncio.gather(*(get(port, ways[i % len(ways)]) for i in range(n)))


def check_answers(answers: list[Answer]) -> Counter[int]:
    """Every answer is 200, or 429 with a typed body whose retry_after the Retry-After
    header rounds up; how many of each."""
    statuses = Counter(status for status, _, _ in answers)
    assert set(statuses) <= {200, 429}, statuses
    for status, headers, body in answers:
        if status == 429:
            data = json.loads(body)
            assert data["error"] == "rate_limited" and data["limit"] == "bulk_reads", data
            assert 0 < data["retry_after"] <= int(headers["retry-after"]), (data, headers)
    return statuses


def test_a_burst_of_replays_of_a_long_finished_match_is_answered_200_or_429_never_503(
    admitting: str, long_match: str
) -> None:
    port = int(admitting.rsplit(":", 1)[1])
    answers = asyncio.run(burst(port, long_match, 600))
    statuses = check_answers(answers)
    assert statuses[200] >= 4, statuses


async def version(redis_url: str, keys: Keys, match_id: str) -> int:
    """How many events the match has."""
    redis = client_for(redis_url)
    try:
        return int(await redis.xlen(keys.match(match_id)))
    finally:
        await redis.aclose()


def moves_in(g: Gateways, keys: Keys, match_id: str, seconds: float) -> float:
    """The match's events a second over ``seconds``."""
    first = asyncio.run(version(g.redis_url, keys, match_id))
    time.sleep(seconds)
    return (asyncio.run(version(g.redis_url, keys, match_id)) - first) / seconds


async def hammer(port: int, ways: list[str], n: int, give_up_s: float) -> list[Answer]:
    """``n`` reads at once, each tried again after a 429 once its ``retry_after`` has passed,
    until it is answered or ``give_up_s`` seconds have; every answer."""
    end = time.monotonic() + give_up_s
    answers: list[Answer] = []

    async def reader(i: int) -> None:
        while True:
            answer = await get(port, ways[i % len(ways)])
            answers.append(answer)
            if answer[0] != 429:
                return
            retry = float(json.loads(answer[2])["retry_after"])
            if time.monotonic() + retry > end:
                return
            await asyncio.sleep(retry)

    await asyncio.gather(*(reader(i) for i in range(n)))
    return answers


def test_two_bots_keep_their_pace_while_a_burst_of_replays_is_opened_beside_them(
    gateways: Gateways, admitting: str, long_match: str
) -> None:
    """The bots' moves a second while 1500 bulk reads are opened beside them (and opened
    again for a few seconds) are at least half what they are without them, just before and
    just after (the slower of the two: the machine may be busy with more than this test)."""
    g = gateways
    keys = Keys(g.settings.prefix, g.settings.partitions)
    port = int(admitting.rsplit(":", 1)[1])
    match_id = create(admitting, [None, None], rules={"players": 2, "target": 100000})
    bots = [
        subprocess.Popen(
            [*BOT, "--strategy", strategy, "--url", admitting, "--join", match_id],
            env=g.stack.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for strategy in ("greedy", "random")
    ]
    try:
        deadline = time.monotonic() + 30
        while asyncio.run(version(g.redis_url, keys, match_id)) < 50:
            assert time.monotonic() < deadline, "the bots did not start playing"
            time.sleep(0.1)

        async def beside() -> tuple[float, list[Answer]]:
            first = await version(g.redis_url, keys, match_id)
            started = time.monotonic()
            answers = await hammer(port, paths(long_match), BURST, 5.0)
            moves = await version(g.redis_url, keys, match_id) - first
            return moves / (time.monotonic() - started), answers

        # the suite's other worker may load the machine through one window and not the next:
        # the burst is measured again once if the first measure falls short (every answer of
        # both is checked)
        for trial in range(2):
            before = moves_in(g, keys, match_id, 3.0)
            during, answers = asyncio.run(beside())
            after = moves_in(g, keys, match_id, 3.0)
            statuses = Counter(status for status, _, _ in answers)
            assert all(bot.poll() is None for bot in bots), "a bot stopped"
            check_answers(answers)
            alone = min(before, after)
            assert alone > 10, (before, after)
            if during >= alone / 2 or trial == 1:
                break
        assert during >= alone / 2, (before, during, after, statuses)
    finally:
        for bot in bots:
            bot.kill()
            bot.wait()
