"""Metrics, health and readiness of every process, and ``domino status``: a real stack (referee,
bot workers, two projectors, gateway) on the session's Redis, each process on its own metrics
port as ``domino up`` gives them, scraped over HTTP after it has played matches."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client import Histogram
from prometheus_client.parser import text_string_to_metric_families

from engine.rules import Rules
from services.cli.clients import service_client
from services.cli.supervisor import Stack, projector_name
from services.config import ENV, Settings
from services.metrics import LATENCY, observe_many
from tests.gateway.conftest import OPERATOR, create, free_port, join, wait_healthy
from tests.service.conftest import wait_until_over
from tests.support.cli import run_domino
from tests.support.ports import consecutive_free_ports
from tests.support.topology import client_for, sync_client_for

pytestmark = pytest.mark.service

POOLS = {"random": 1, "greedy": 1}
PROJECTORS = 2
"""Projectors of the stack, sharing its 4 partitions by lease: 2 each."""
OWN = {  # the metrics each kind of process serves, as the contract names them
    "referee": {
        "domino_moves_decided_total",
        "domino_commands_total",
        "domino_command_to_turn_seconds",
        "domino_decide_seconds",
        "domino_append_seconds",
        "domino_consumer_lag",
        "domino_consumer_pending",
        "domino_dead_letters",
        "domino_leases_held",
        "domino_live_matches",
    },
    "bots": {
        "domino_bot_turns_total",
        "domino_bot_think_seconds",
        "domino_consumer_lag",
        "domino_consumer_pending",
        "domino_leases_held",
    },
    "projector": {"domino_projector_events_total"},
    "gateway": {
        "domino_gateway_requests_total",
        "domino_gateway_request_seconds",
        "domino_gateway_open_streams",
        "domino_gateway_partitions_read",
        "domino_gateway_rate_limited_total",
        "domino_gateway_moves_total",
        "domino_gateway_connections",
        "domino_gateway_connections_closed_total",
    },
}


@dataclass
class Metered:
    """The running stack, each process's metrics URL, and what was played on it."""

    stack: Stack
    settings: Settings
    redis_url: str
    ports: dict[str, int]  # process -> its metrics port
    gateway: str  # the gateway's public URL
    matches: list[str]

    def url(self, process: str) -> str:
        return f"http://127.0.0.1:{self.ports[process]}"


def wait_ready(url: str, timeout: float = 30.0) -> None:
    """Wait until ``url``/readyz answers 200."""
    deadline = time.monotonic() + timeout
    answer = "no answer"
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            r = httpx.get(f"{url}/readyz", timeout=2.0)
            if r.status_code == 200:
                return
            answer = r.text
        time.sleep(0.1)
    pytest.fail(f"{url} was not ready in {timeout} s: {answer}")


def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The samples of ``url``/metrics: sample name -> labels -> value."""
    r = httpx.get(f"{url}/metrics", timeout=5.0)
    assert r.status_code == 200, r.text
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def families(url: str) -> set[str]:
    """The metric names ``url``/metrics declares (a counter's with its ``_total``)."""
    text = httpx.get(f"{url}/metrics", timeout=5.0).text
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def total(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float:
    return sum(samples.get(name, {}).values())


def play(url: str, settings: Settings, seats: list[list[str | None]]) -> list[str]:
    """Open matches between house bots through the command streams; return their ids."""

    async def go() -> list[str]:
        redis = client_for(url)
        try:
            client = service_client(redis, settings, sender="test")
            rules = Rules.make("express", players=2)
            return [await client.create_match(rules, s) for s in seats]
        finally:
            await redis.aclose()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def metered(redis_url: str) -> Iterator[Metered]:
    """Referee, a random and a greedy bot worker, two projectors and gateway, each on its own
    metrics port (base + k, in the order they start), after two whole matches."""
    processes = 1 + len(POOLS) + PROJECTORS + 1
    base = consecutive_free_ports(processes)
    settings = Settings(
        redis_url=redis_url,
        prefix=f"t{random.getrandbits(48):012x}",
        partitions=4,
        claim_idle_ms=600,
        lease_ms=1500,
        log_level="warning",
        metrics_port=base,
    )
    public = free_port()
    saved = os.environ.get("DOMINO_OPERATOR_TOKEN")
    os.environ["DOMINO_OPERATOR_TOKEN"] = OPERATOR
    try:
        with Stack(redis_url, settings, pools=POOLS, projectors=PROJECTORS) as stack:
            stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(public))
            gateway = f"http://127.0.0.1:{public}"
            wait_healthy(gateway, stack.processes["gateway"])
            m = Metered(stack, settings, redis_url, dict(stack.metrics_ports), gateway, [])
            for process in m.ports:
                wait_ready(m.url(process))
            m.matches = play(redis_url, settings, [["greedy", "random"], ["random", "greedy"]])
            wait_until_over(redis_url, settings, m.matches)
            yield m
    finally:
        if saved is None:
            os.environ.pop("DOMINO_OPERATOR_TOKEN", None)
        else:
            os.environ["DOMINO_OPERATOR_TOKEN"] = saved


def domino(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``domino ARGS`` against the settings' Redis and prefix."""
    environ = {
        **os.environ,
        "REDIS_URL": settings.redis_url or "",
        ENV["prefix"]: settings.prefix,
        ENV["partitions"]: str(settings.partitions),
        **env,
    }
    return run_domino(*args, env=environ)


# -- the exporters -----------------------------------------------------------------------------


def test_the_supervisor_gives_each_process_the_next_port_in_the_order_they_start(
    metered: Metered,
) -> None:
    base = metered.settings.metrics_port
    names = ["referee-0", "bots-random-0", "bots-greedy-0", "projector", "projector-1", "gateway"]
    assert metered.ports == {name: base + k for k, name in enumerate(names)}


def test_every_process_serves_the_metrics_of_its_kind(metered: Metered) -> None:
    kinds = {
        "referee-0": "referee",
        "bots-random-0": "bots",
        "bots-greedy-0": "bots",
        "projector": "projector",
        "projector-1": "projector",
        "gateway": "gateway",
    }
    for process, kind in kinds.items():
        served = families(metered.url(process))
        assert OWN[kind] <= served, (process, OWN[kind] - served)
        others = set().union(*(OWN[k] for k in OWN if k != kind)) - OWN[kind]
        assert not others & served, (process, others & served)
        assert "process_cpu_seconds_total" in served  # the client's own process metrics


def test_the_counters_moved_with_the_matches_played(metered: Metered) -> None:
    referee = scrape(metered.url("referee-0"))
    applied = referee["domino_commands_total"][(("outcome", "applied"),)]
    assert applied > 20  # two whole matches
    decided = referee["domino_moves_decided_total"]
    assert set(decided) == {(("partition", str(p)),) for p in range(4)}
    assert sum(decided.values()) >= applied  # each applied command appends an event or more
    assert total(referee, "domino_command_to_turn_seconds_count") > 0
    assert total(referee, "domino_decide_seconds_count") > 0
    assert total(referee, "domino_append_seconds_count") > 0
    assert referee["domino_leases_held"] == {(("holder", "referee-0"),): 4.0}
    for pool in POOLS:
        bots = scrape(metered.url(f"bots-{pool}-0"))
        assert bots["domino_bot_turns_total"][(("pool", pool),)] > 0
        assert bots["domino_bot_think_seconds_count"][(("pool", pool),)] > 0
    folded = [scrape(metered.url(projector_name(k))) for k in range(PROJECTORS)]
    events = sum(p["domino_projector_events_total"][()] for p in folded)
    assert events >= sum(decided.values())  # each partition's events, by whoever held it


def test_the_groups_lag_and_pending_are_read_for_every_stream_a_process_reads(
    metered: Metered,
) -> None:
    keys = [f"{metered.settings.prefix}:{{p{p}}}" for p in range(4)]
    deadline = time.monotonic() + 30
    while True:  # the gauges are refreshed every two seconds, each on its own
        referee = scrape(metered.url("referee-0"))
        greedy = scrape(metered.url("bots-greedy-0"))
        pending = referee.get("domino_consumer_pending", {})
        settled = referee.get("domino_live_matches", {}).get(()) == 0
        acked = len(pending) == 4 and all(v == 0 for v in pending.values())
        bots_read = len(greedy.get("domino_consumer_pending", {})) == 4
        if (acked and settled and bots_read) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(pending) == {(("group", "referee"), ("stream", f"{k}:cmd")) for k in keys}
    assert all(v == 0 for v in pending.values())  # the matches are over: all acknowledged
    lags = referee["domino_consumer_lag"].values()
    assert all(v in (0, -1) for v in lags)  # -1: a Redis before 7.0 cannot count it
    turns = {(("group", "bots-greedy"), ("stream", f"{k}:turns:greedy")) for k in keys}
    assert set(greedy["domino_consumer_pending"]) == turns
    assert referee["domino_dead_letters"][()] == 0
    assert referee["domino_live_matches"][()] == 0


def test_health_and_readiness_answer_on_every_process(metered: Metered) -> None:
    for process in metered.ports:
        url = metered.url(process)
        health = httpx.get(f"{url}/healthz")
        assert (health.status_code, health.json()) == (200, {"ok": True}), process
        ready = httpx.get(f"{url}/readyz")
        assert (ready.status_code, ready.json()) == (200, {"ready": True}), process
        missing = httpx.get(f"{url}/nothing")
        assert missing.status_code == 404 and missing.json()["error"] == "not_found"
        assert httpx.post(f"{url}/metrics").status_code == 405
    ready = httpx.get(f"{metered.gateway}/readyz")
    assert (ready.status_code, ready.json()) == (200, {"ready": True})


def test_an_exporter_refuses_a_request_head_too_large_and_survives_it(metered: Metered) -> None:
    url = metered.url("projector")
    with socket.create_connection(("127.0.0.1", metered.ports["projector"]), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"x" * 20_000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431 ")
    assert httpx.get(f"{url}/healthz").status_code == 200


# -- the gateway -------------------------------------------------------------------------------


def test_the_gateway_counts_requests_by_route_moves_by_outcome_and_open_streams(
    metered: Metered,
) -> None:
    gateway = metered.gateway
    match_id = create(gateway, [None, "greedy"])
    seat, token = join(gateway, match_id)
    moved = httpx.post(
        f"{gateway}/api/v1/matches/{match_id}/seats/{seat}/moves",
        json={"type": "play_tile", "tile": [6, 9]},  # no such tile in a double-six set
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k1"},
        timeout=10,
    )
    assert moved.status_code == 409, moved.text
    with httpx.stream("GET", f"{gateway}/api/v1/matches/{match_id}/stream", timeout=10) as s:
        lines = s.iter_lines()  # kept: an iterator dropped closes the stream
        next(lines)  # open: its snapshot came
        streams = scrape(metered.url("gateway"))["domino_gateway_open_streams"]
        assert streams[(("kind", "public"),)] == 1
    samples = scrape(metered.url("gateway"))
    requests = samples["domino_gateway_requests_total"]
    moves = "POST /api/v1/matches/{match_id}/seats/{seat}/moves"
    assert requests[(("route", moves), ("status", "409"))] >= 1
    assert requests[(("route", "POST /api/v1/matches/{match_id}/join"), ("status", "201"))] >= 1
    assert all(match_id not in route for (_, route), _ in requests)  # templates, never paths
    assert samples["domino_gateway_moves_total"][(("outcome", "rejected"),)] >= 1
    deadline = time.monotonic() + 5
    while scrape(metered.url("gateway"))["domino_gateway_open_streams"][(("kind", "public"),)]:
        assert time.monotonic() < deadline, "the closed stream is still counted open"
        time.sleep(0.1)


def test_the_gateway_serves_its_metrics_publicly_only_with_the_operator_token(
    metered: Metered,
) -> None:
    url = f"{metered.gateway}/metrics"
    nobody = httpx.get(url)
    assert (nobody.status_code, nobody.json()["error"]) == (401, "unauthorized")
    stranger = httpx.get(url, headers={"Authorization": "Bearer not-the-operator"})
    assert (stranger.status_code, stranger.json()["error"]) == (403, "not_operator")
    operator = httpx.get(url, headers={"Authorization": f"Bearer {OPERATOR}"})
    assert operator.status_code == 200
    assert operator.headers["content-type"].startswith("text/plain")
    assert "domino_gateway_requests_total" in operator.text
    assert httpx.get(f"{metered.url('gateway')}/metrics").status_code == 200  # its own port


# -- readiness without Redis -------------------------------------------------------------------


def test_a_process_whose_redis_does_not_answer_runs_but_is_not_ready() -> None:
    """Pointed at a port where no Redis listens, each service waits for it: /healthz 200,
    /readyz 503 saying why."""
    nowhere = f"redis://127.0.0.1:{free_port()}"
    base = consecutive_free_ports(3)
    settings = Settings(redis_url=nowhere, prefix="nowhere", log_level="error", metrics_port=base)
    with Stack(nowhere, settings, pools={"random": 1}, projector=True, referees=1) as stack:
        for process, port in stack.metrics_ports.items():
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while True:
                try:
                    health = httpx.get(f"{url}/healthz", timeout=2)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, f"{process} never answered"
                    assert stack.check() == [], f"{process} exited"
                    time.sleep(0.1)
            assert health.status_code == 200, process
            ready = httpx.get(f"{url}/readyz", timeout=5)
            assert ready.status_code == 503, process
            assert ready.json() == {"ready": False, "reason": "starting: waiting for Redis"}


# -- domino status -----------------------------------------------------------------------------


def test_domino_status_reports_partitions_leases_heartbeats_and_the_groups_pending(
    metered: Metered,
) -> None:
    done = domino(metered.settings, "status", "--json", "--interval", "0.3")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["prefix"] == metered.settings.prefix
    partitions = status["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1, 2, 3]
    assert all(p["owner"] == "referee-0" and 0 < p["lease_left_s"] <= 1.5 for p in partitions)
    assert sum(p["log_entries"] for p in partitions) > 0
    assert all(p["events_per_s"] >= 0 and p["live_matches"] >= 0 for p in partitions)
    assert [r["name"] for r in status["referees"]] == ["referee-0"]
    assert {pool: [w["name"] for w in workers] for pool, workers in status["pools"].items()} == {
        "random": ["random-0"],
        "greedy": ["greedy-0"],
    }
    groups = {(g["group"], g["stream"]): g for g in status["groups"]}
    prefix = metered.settings.prefix
    for p in range(4):
        for group, stream in (
            ("referee", f"{prefix}:{{p{p}}}:cmd"),
            ("bots-random", f"{prefix}:{{p{p}}}:turns:random"),
            ("bots-greedy", f"{prefix}:{{p{p}}}:turns:greedy"),
        ):
            assert groups[group, stream]["pending"] == 0
            assert groups[group, stream]["lag"] in (0, -1)
    assert status["dead_letters"] == 0
    roles = {role["role"]: role for role in status["roles"]}
    assert list(roles)[:3] == ["referee", "projector", "archiver"]  # always, and first
    assert set(list(roles)[3:]) <= {f"bots-{pool}" for pool in POOLS}  # if its workers lease
    assert roles["referee"]["heartbeats"] == status["referees"]
    assert [(lease["partition"], lease["holder"]) for lease in roles["referee"]["leases"]] == [
        (p["partition"], p["owner"]) for p in partitions
    ]
    screen = domino(metered.settings, "status", "--interval", "0")
    assert screen.returncode == 0, screen.stderr
    assert "referee-0" in screen.stdout and "bots-greedy" in screen.stdout


def test_domino_status_shows_each_projector_holding_its_share_of_the_partitions(
    metered: Metered,
) -> None:
    """The two projectors' leases and heartbeats, read as the referees' are: each holds
    ⌈4 / 2⌉ partitions, the archivers beside them hold theirs under the role ``archiver``,
    and the screen gives each projector a line with the partitions it holds."""
    projectors = [projector_name(k) for k in range(PROJECTORS)]
    deadline = time.monotonic() + 30  # the second to start takes its share within rounds
    while True:
        roles = {role["role"]: role for role in status_of(metered.settings)["roles"]}
        held = Counter(lease["holder"] for lease in roles["projector"]["leases"])
        if held == dict.fromkeys(projectors, 2) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert held == dict.fromkeys(projectors, 2), roles["projector"]
    projector = roles["projector"]
    assert sorted(beat["name"] for beat in projector["heartbeats"]) == projectors
    assert all(0 <= beat["age_s"] <= 1.5 for beat in projector["heartbeats"])
    assert all(0 < lease["lease_left_s"] <= 1.5 for lease in projector["leases"])
    archiver = roles["archiver"]  # its rounds come every DOMINO_TRIM_EVERY_S: held or lapsed
    assert {beat["name"] for beat in archiver["heartbeats"]} <= set(projectors)
    assert {lease["holder"] for lease in archiver["leases"]} <= {*projectors, None}
    screen = domino(metered.settings, "status", "--interval", "0")
    assert screen.returncode == 0, screen.stderr
    role, shown = "", {}
    for line in screen.stdout.splitlines():
        if line[:1].strip():  # a role's first line names it, the lines of its others follow
            role = line.split()[0]
        row = re.fullmatch(r"\S*\s+(projector(?:-\d)?)\s+[\d.]+ s ago\s+[\d.]+ s  (.+)", line)
        if role == "projector" and row:
            shown[row[1]] = row[2]
    assert sorted(shown) == projectors, screen.stdout
    assert all(len(partitions_in(listed)) == 2 for listed in shown.values()), screen.stdout


def status_of(settings: Settings) -> dict[str, Any]:
    """``domino status --json`` at once (the logs not sampled)."""
    done = domino(settings, "status", "--json", "--interval", "0")
    assert done.returncode == 0, done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def partitions_in(ranges: str) -> list[int]:
    """The partitions a status line lists: ``0-2 5`` is 0, 1, 2 and 5."""
    out = []
    for run in ranges.split():
        first, _, last = run.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


@pytest.mark.both_topologies
def test_domino_status_finds_every_role_by_its_heartbeats_and_shows_what_nobody_holds(
    redis_url: str, key_prefix: str
) -> None:
    """Any role with heartbeats under the prefix (``<prefix>:holders:<role>``) is found, on
    every master of a cluster, and shown after the referee, projector and archiver (which are
    shown always); each partition's lease for it, a holder whose heartbeat ran out before its
    lease did, and the partitions no process holds, as nobody's. Another prefix's roles, and a
    key that names no role, are not shown."""
    settings = Settings(redis_url=redis_url, prefix=key_prefix, partitions=3)
    with sync_client_for(redis_url) as redis:
        seconds, micros = redis.time()
        now_ms = seconds * 1000 + micros / 1000  # heartbeats are on the server's clock
        redis.zadd(f"{key_prefix}:holders:bots-search", {"search-0": now_ms, "search-1": now_ms})
        for p in (0, 2):
            redis.set(f"{key_prefix}:{{p{p}}}:lease:bots-search", "search-0", px=60_000)
        redis.zadd(f"{key_prefix}:holders:projector", {"projector-1": now_ms - 400})
        redis.set(f"{key_prefix}:{{p1}}:lease:projector", "gone", px=60_000)
        redis.zadd(f"{key_prefix}x:holders:elsewhere", {"other": now_ms})
        redis.zadd(f"{key_prefix}:holders:no role", {"other": now_ms})
    status = status_of(settings)
    roles = {role["role"]: role for role in status["roles"]}
    assert list(roles) == ["referee", "projector", "archiver", "bots-search"]
    bots = roles["bots-search"]
    assert sorted(beat["name"] for beat in bots["heartbeats"]) == ["search-0", "search-1"]
    assert [lease["holder"] for lease in bots["leases"]] == ["search-0", None, "search-0"]
    assert [lease["lease_left_s"] is None for lease in bots["leases"]] == [False, True, False]
    assert all(0 < lease["lease_left_s"] <= 60 for lease in bots["leases"] if lease["holder"])
    (beat,) = roles["projector"]["heartbeats"]
    assert beat["name"] == "projector-1" and 0.4 <= beat["age_s"] < 30
    assert [lease["holder"] for lease in roles["projector"]["leases"]] == [None, "gone", None]
    for role in ("referee", "archiver"):
        assert roles[role]["heartbeats"] == []
        assert [lease["holder"] for lease in roles[role]["leases"]] == [None, None, None]
    assert [p["owner"] for p in status["partitions"]] == [None, None, None]
    screen = domino(settings, "status", "--interval", "0")
    assert screen.returncode == 0, screen.stderr
    lines = [" ".join(line.split()) for line in screen.stdout.splitlines()]
    for expected in (
        "referee nobody - - 0-2",
        r"projector gone none [\d.]+ s 1",  # its heartbeat gone, its lease not yet
        r"projector-1 [\d.]+ s ago - -",  # alive, holding nothing
        "nobody - - 0 2",
        "archiver nobody - - 0-2",
        r"bots-search search-0 [\d.]+ s ago [\d.]+ s 0 2",
        r"search-1 [\d.]+ s ago - -",
        "nobody - - 1",
    ):
        assert any(re.fullmatch(expected, line) for line in lines), (expected, screen.stdout)
    assert "elsewhere" not in screen.stdout and "no role" not in screen.stdout


def test_domino_status_prints_what_it_read_from_redis_escaped(
    redis_url: str, key_prefix: str
) -> None:
    """Referee names, lease holders and dead letters' reasons are whatever was written: a
    terminal's escape sequences among them are shown, never sent."""
    settings = Settings(redis_url=redis_url, prefix=key_prefix, partitions=2)
    hostile = "evil\x1b[2J\x1b]0;pwned\x07\u202e"
    with sync_client_for(redis_url) as redis:
        redis.zadd(f"{key_prefix}:referees", {hostile: time.time() * 1000})
        redis.set(f"{key_prefix}:{{p0}}:owner", hostile, px=60_000)  # outlives two commands
        redis.xadd(
            f"{key_prefix}:dead",
            {"stream": hostile, "id": "1-0", "group": hostile, "reason": hostile},
        )
    screen = domino(settings, "status", "--interval", "0")
    assert screen.returncode == 0, screen.stderr
    for control in ("\x1b", "\x07", "\u202e"):
        assert control not in screen.stdout
    assert screen.stdout.count("evil\\x1b[2J\\x1b]0;pwned\\x07\\u202e") >= 3
    machine = domino(settings, "status", "--json", "--interval", "0")
    assert machine.returncode == 0, machine.stderr
    assert machine.stdout.isascii() and "\x1b" not in machine.stdout
    status = json.loads(machine.stdout)
    assert status["referees"][0]["name"] == hostile  # the JSON carries it as it is, escaped
    assert status["partitions"][0]["owner"] == hostile
    assert status["latest_dead_letters"][0]["reason"] == hostile


# -- the metrics module ------------------------------------------------------------------------


def test_a_batch_observed_at_once_counts_as_the_same_amounts_observed_one_by_one() -> None:
    one_by_one = Histogram("one", "one", registry=None, buckets=LATENCY)
    batched = Histogram("batched", "batched", registry=None, buckets=LATENCY)
    amounts = [0.0, 0.0005, 0.0004, 0.003, 0.01, 0.7, 9.9, 10.0, 12.0, 1e6, *LATENCY]
    for amount in amounts:
        one_by_one.observe(amount)
    observe_many(batched, amounts)
    observe_many(batched, [])

    def samples(h: Histogram) -> list[tuple[str, dict[str, str], float]]:
        return [(s.name.split("_", 1)[1], s.labels, s.value) for s in h.collect()[0].samples]

    assert samples(batched) == samples(one_by_one)
