"""A referee's link to Redis delayed or cut, across a network of namespaces: no seat is charged
for the wait (docs/fairness.md).

Two referees share the partitions, each on a host of its own; Redis and the rest of the
service on theirs. Turns last 2 s. One referee's link is cut while the matches play — taken
down at the bridge, so its connections hang, as a script's answer lost on the way does — or,
in the other case, delayed by 100 ms each way throughout and then reset by its proxy. Its
leases run out, the other referee takes its partitions and decides the commands it left,
and when the link is back it takes its share again. Every match verifies, and every move of
a house bot that reached Redis before its turn's deadline as first set (a stall may only
push a deadline back) is the command that decided its turn: none refused as late, none
overtaken by a timeout. Redis's clock is the judge: a command's arrival is its stream
entry's id, a turn's beginning its append's entry in the notification log.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest

from engine.rules import Rules
from engine.verify import verify
from services.cli.clients import open_clients, service_client
from services.config import Settings
from services.store.keys import Keys
from tests.netns.conftest import LONG
from tests.netns.test_partitions import REDIS_PORT, owners, redis_host, referees_apart, wait_for
from tests.service.test_clock import written_at
from tests.service.test_failover import read_logs
from tests.service.test_stall_fairness import arrivals, judge, wait_until_finished
from tests.support.netns import Network

pytestmark = [pytest.mark.service, pytest.mark.netns]

DEADLINE_MS = 2_000
LEASE_MS = 3_000
"""Longer than a turn: the moves waiting on the referee cut off pass their first deadlines
before the other referee may take its partitions."""
DELAY_MS = 100
MATCHES = 48 if LONG else 16
CUT_S = 10.0 if LONG else 5.0
"""Longer than a lease: the other referee takes the partitions meanwhile."""


async def create_matches(settings: Settings) -> list[str]:
    """Matches of house bots with 2 s turns, to a low target: they end within a minute."""
    assert settings.redis_url is not None
    async with open_clients(settings.redis_url, settings) as (client, _):
        service = service_client(client, settings, sender="netns-stall")
        rules = Rules.make("express", target=20 if LONG else 10)
        return [
            await service.create_match(
                rules, ["random", "greedy", "random", "greedy"], deadline_ms=DEADLINE_MS
            )
            for _ in range(MATCHES)
        ]


@pytest.mark.timeout(600 if LONG else 300)
@pytest.mark.parametrize("fault", ["cut", "delayed"])
def test_a_referee_whose_link_is_delayed_or_cut_charges_no_seat_for_it(
    net: Network, tmp_path: Path, fault: str
) -> None:
    """Cut (or delay, then reset) one of two referees' link to Redis while matches with 2 s
    turns play: every match verifies, and no move that reached Redis before its turn's
    deadline lost its turn — among them, when the link hangs, moves that waited past their
    deadline for the other referee to take the partitions."""
    with redis_host(net) as (redis_at, url):
        first, second, service = net.host("referee-0"), net.host("referee-1"), net.host("service")
        proxy = None
        if fault == "delayed":
            proxy = net.delay(first, [], redis_at, [REDIS_PORT], DELAY_MS)
        settings = Settings(
            redis_url=url,
            prefix=f"f{uuid.uuid4().hex[:8]}",
            partitions=4,
            claim_idle_ms=LEASE_MS,
            lease_ms=LEASE_MS,
            stall_ms=1_000,
            bot_pace_ms=200,
            trim_every_s=3600,  # the command streams are the record of arrivals
            log_level="info",
        )
        keys = Keys(settings.prefix, settings.partitions)
        with referees_apart(settings, (first, second), service, tmp_path) as (client, stack):
            match_ids = asyncio.run(create_matches(settings))
            time.sleep(2.0)  # both referees play; the delayed one 100 ms from Redis
            if proxy is not None:
                proxy.cut()
            else:
                first.cut()
            wait_for(
                "the other referee holding every partition",
                lambda: set(owners(client, keys)) == {"referee-1"},
                timeout=10 * LEASE_MS / 1000,
            )
            time.sleep(CUT_S)
            if proxy is not None:
                proxy.heal()
            else:
                first.restore()
            wait_for(
                "the referee cut off holding partitions again",
                lambda: "referee-0" in owners(client, keys),
                timeout=30,
            )
            wait_until_finished(url, settings, match_ids, timeout=240 if LONG else 120)
            assert not stack.check(), f"processes died: {stack.check()}"
        logs = asyncio.run(read_logs(url, settings, match_ids))
        written = asyncio.run(written_at(url, settings))
        arrived = asyncio.run(arrivals(url, settings))
    wrong = {m: p for m, log in logs.items() if (p := verify([e.event for e in log]))}
    assert not wrong, f"matches that do not verify: {wrong}"
    found = judge(logs, written, arrived, [], DEADLINE_MS)
    waited = decided_after_their_deadline(written, arrived)
    report = {
        "check": "referee_link_fairness",
        "fault": fault,
        "matches": MATCHES,
        "cut_s": CUT_S,
        "moves": found.moves,
        "timed_out": found.timeouts,
        "in_time_decided_after_the_deadline": waited,
        "unfair": len(found.unfair or []),
    }
    print("\n" + json.dumps(report))
    if fault == "cut":  # a reset is quicker to see than a hang: whether one waits is chance
        assert waited, "no move in time waited past its deadline for a referee: none tested"
    assert not found.unfair, "\n".join(found.unfair or [])


def decided_after_their_deadline(
    written: dict[str, dict[int, tuple[int, str]]], arrived: dict[tuple[str, str], int]
) -> int:
    """The house bots' moves that reached Redis before their turn's deadline and were decided
    (their event written) only after it: those the fault made wait on a referee."""
    count = 0
    for (match_id, command_id), at in arrived.items():
        if not command_id.startswith("turn:"):  # a house bot's answer: turn:<version>:<seat>
            continue
        version = int(command_id.split(":")[1])
        began, decided = written[match_id].get(version), written[match_id].get(version + 1)
        if began is not None and decided is not None:
            deadline = began[0] + DEADLINE_MS
            count += at < deadline <= decided[0]
    return count
