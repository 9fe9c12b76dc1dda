"""Lists in pages on a real gateway process: GET /matches and a player's recent matches read at
most a page of each partition's index (seen in Redis's MONITOR, on every master of a cluster),
and their cursors walk every match exactly once, equal scores included.

The gateway here has a key prefix of its own, with finished matches' summaries planted in its
projection's keys as the projector writes them: many more than a page.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
import redis

from services.core.commands import new_match_id
from services.projections.projector import Summary
from services.projections.ratings import MatchResult
from services.store.keys import Keys
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, wait_healthy
from tests.gateway.test_openapi_accounts import Spec
from tests.support.topology import is_cluster_url, sync_client_for

pytestmark = [pytest.mark.service, pytest.mark.both_topologies]

PLANTED = 600
STRAIGHT_EVERY = 7  # one planted match in 7 is Straight, the others Express
TIED = 40  # the first 40 share one score: a page boundary falls among them


@dataclass
class Listed:
    url: str
    prefix: str
    partitions: int
    finished: dict[str, Summary]  # match id -> its planted summary


@pytest.fixture(scope="module")
def listed(gateways: Gateways) -> Listed:
    """A gateway of its own prefix, and PLANTED finished matches in its summaries."""
    prefix = f"l{uuid.uuid4().hex[:10]}"
    partitions = gateways.settings.partitions
    keys = Keys(prefix, partitions)
    finished: dict[str, Summary] = {}
    base = time.time() - 10_000
    with sync_client_for(gateways.redis_url) as r:
        pipe = r.pipeline(transaction=False)
        for i in range(PLANTED):
            match_id = new_match_id()
            summary = Summary(
                match_id=match_id,
                status="finished",
                family="straight" if i % STRAIGHT_EVERY == 0 else "express",
                players=("ann", "bob"),
                round=1,
                version=20,
                scores=(i, 0),
                turn=None,
                ends=(),
                winner=0,
                updated=base if i < TIED else base + i * 0.25,
            )
            p = i % partitions
            projection = keys.projection("summary", p)
            pipe.hset(f"{projection}:matches", match_id, msgspec.json.encode(summary))
            pipe.zadd(f"{projection}:finished", {match_id: summary.updated})
            finished[match_id] = summary
        pipe.execute()
    port = free_port()
    env = {**PLAY_LIMITS, "DOMINO_PREFIX": prefix}
    process = gateways.stack.spawn(
        "gateway-lists", "gateway", "--host", "127.0.0.1", "--port", str(port), env=env
    )
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, process)
    return Listed(url, prefix, partitions, finished)


def walk(url: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Every page of GET /matches with ``params``, following ``next``."""
    cursor = None
    while True:
        asked = {**params, **({} if cursor is None else {"cursor": cursor})}
        r = httpx.get(f"{url}/api/v1/matches", params=asked)
        assert r.status_code == 200, r.text
        body = r.json()
        yield body
        cursor = body["next"]
        if cursor is None:
            return


def test_the_pages_of_finished_matches_hold_each_exactly_once_newest_pages_first(
    listed: Listed,
) -> None:
    pages = list(walk(listed.url, status="finished", limit=50))
    assert len(pages) in (PLANTED // 50, PLANTED // 50 + 1)  # the last may be empty
    seen = [m["match_id"] for page in pages for m in page["matches"]]
    assert len(seen) == len(set(seen)) == PLANTED
    assert set(seen) == set(listed.finished)
    for page in pages:
        order = [(m["updated"], m["match_id"]) for m in page["matches"]]
        assert order == sorted(order), "a page lists its matches oldest first"
    for newer, older in itertools.pairwise(pages):
        if older["matches"]:
            assert max(m["updated"] for m in older["matches"]) <= min(
                m["updated"] for m in newer["matches"]
            )


def test_a_filtered_walk_finds_every_match_the_filter_picks(listed: Listed) -> None:
    seen = [
        m["match_id"]
        for page in walk(listed.url, status="finished", limit=30, family="straight")
        for m in page["matches"]
    ]
    wanted = {i for i, s in listed.finished.items() if s.family == "straight"}
    assert len(seen) == len(set(seen)) and set(seen) == wanted


class Monitor:
    """The commands Redis runs on keys of ``prefix`` that hold ``within`` (a projection's),
    while it watches (the gateway's background loops touch other keys meanwhile)."""

    def __init__(self, url: str, prefix: str, within: str = ":proj:summary:") -> None:
        self.url = url
        self.prefix = prefix
        self.within = within
        self.marker = f"{prefix}:marker:{uuid.uuid4().hex}"
        self.commands: list[list[str]] = []
        self._ready = threading.Event()

    def __enter__(self) -> Monitor:
        self._clients = _masters(self.url)
        self._monitors = [client.monitor() for client in self._clients]
        self._threads = []
        for monitor in self._monitors:
            monitor.__enter__()
            self._threads.append(
                threading.Thread(target=self._listen, args=(monitor,), daemon=True)
            )
            self._threads[-1].start()
        return self

    def _listen(self, monitor: redis.client.Monitor) -> None:
        for event in monitor.listen():
            command = str(event["command"])
            if self.marker in command:
                return
            if f"{self.prefix}:" in command and self.within in command:
                self.commands.append(command.split())

    def __exit__(self, *exc: object) -> None:
        for client in self._clients:  # each master's watch ends when it sees the marker
            client.echo(self.marker)  # a command of no key: any node runs it
        for thread, monitor, client in zip(
            self._threads, self._monitors, self._clients, strict=True
        ):
            thread.join(timeout=10)
            monitor.__exit__(None, None, None)
            client.close()


def _masters(url: str) -> list[redis.Redis]:
    """A client of each master at ``url``: the node itself, or every master of the cluster."""
    if not is_cluster_url(url):
        return [redis.Redis.from_url(url)]
    with redis.RedisCluster.from_url(url) as cluster:
        password = cluster.get_connection_kwargs().get("password")
        nodes = [(n.host, n.port) for n in cluster.get_primaries()]
    return [redis.Redis(host=h, port=p, password=password) for h, p in nodes]


def test_a_page_reads_only_a_page_of_each_partition(gateways: Gateways, listed: Listed) -> None:
    limit = 5
    first = httpx.get(
        f"{listed.url}/api/v1/matches", params={"status": "finished", "limit": limit}
    ).json()
    with Monitor(gateways.redis_url, listed.prefix) as watched:
        r = httpx.get(
            f"{listed.url}/api/v1/matches",
            params={"status": "finished", "limit": limit, "cursor": first["next"]},
        )
    assert r.status_code == 200, r.text
    assert len(r.json()["matches"]) == limit and r.json()["next"]
    commands = watched.commands
    assert commands, "MONITOR saw none of the gateway's commands"
    names = [c[0].upper() for c in commands]
    assert set(names) <= {"ZREVRANGEBYSCORE", "ZRANGEBYSCORE", "HMGET"}, names
    assert len(commands) <= 3 * listed.partitions, commands
    for command in commands:
        name = command[0].upper()
        if name == "ZREVRANGEBYSCORE":
            words = [w.upper() for w in command]
            assert "LIMIT" in words, command
            assert int(words[words.index("LIMIT") + 2]) <= limit, command  # LIMIT 0 <count>
        elif name == "HMGET":
            assert len(command) - 2 <= limit, command  # HMGET key field...
    assert sum(len(c) - 2 for c in commands if c[0].upper() == "HMGET") == limit


def test_open_matches_come_in_pages_oldest_first(gateways: Gateways, listed: Listed) -> None:
    created = [create(listed.url, [None, None], rules={"players": 2}) for _ in range(7)]
    seen = [
        m["match_id"] for page in walk(listed.url, status="open", limit=3) for m in page["matches"]
    ]
    assert seen == created


def test_a_cursor_no_page_answered_is_refused_as_the_document_says(listed: Listed) -> None:
    spec = Spec(listed.url)
    path = "/api/v1/matches"
    for cursor in ("x", "nan:m-1", "1.5:", "1.5:{m}", "inf:" + new_match_id(), "1" * 300):
        r = httpx.get(f"{listed.url}{path}", params={"status": "finished", "cursor": cursor})
        spec.check(path, "get", r, 422, "invalid_query")
    r = httpx.get(f"{listed.url}{path}", params={"status": "finished", "limit": 2})
    assert spec.check(path, "get", r, 200)["next"] is not None


PLAYED = 300
PLAYER = "house:planted"


@pytest.fixture(scope="module")
def planted_player(gateways: Gateways, listed: Listed) -> dict[str, MatchResult]:
    """PLAYED results of PLAYER's matches in the listed gateway's ratings projection, each
    in its partition's results and in PLAYER's index there, as the projector writes them."""
    keys = Keys(listed.prefix, listed.partitions)
    results: dict[str, MatchResult] = {}
    base = time.time() - 50_000
    with sync_client_for(gateways.redis_url) as r:
        pipe = r.pipeline(transaction=False)
        for i in range(PLAYED):
            result = MatchResult(
                match_id=new_match_id(),
                ended=base + (i // 3) * 1.5,  # three at a time end together
                family="express",
                players=("planted", "random"),
                sides=(0, 1),
                winner=0,
                scores=(10, i % 10),
                bots=("planted", "random"),
                reason="target",
            )
            projection = keys.projection("ratings", i % listed.partitions)
            pipe.hset(f"{projection}:results", result.match_id, msgspec.json.encode(result))
            identities = result.keys()  # a method: each seat's identity
            for identity in identities:
                pipe.zadd(f"{projection}:played:{identity}", {result.match_id: result.ended})
            results[result.match_id] = result
        pipe.execute()
    return results


def test_a_players_recent_matches_come_in_pages_each_exactly_once(
    listed: Listed, planted_player: dict[str, MatchResult]
) -> None:
    url = f"{listed.url}/api/v1/players/{PLAYER}"
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        r = httpx.get(url, params={"limit": 20, **({} if cursor is None else {"cursor": cursor})})
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["recent"]) <= 20
        seen.extend(body["recent"])
        cursor = body["next"]
        if cursor is None:
            break
    ids = [m["match_id"] for m in seen]
    assert len(ids) == len(set(ids)) == PLAYED and set(ids) == set(planted_player)
    order = [(m["ended"], m["match_id"]) for m in seen]
    assert order == sorted(order, reverse=True), "newest first, page after page"
    assert all(m["seats"] == [0] for m in seen)


def test_a_players_page_reads_only_its_own_index_and_results(
    gateways: Gateways, listed: Listed, planted_player: dict[str, MatchResult]
) -> None:
    url = f"{listed.url}/api/v1/players/{PLAYER}"
    first = httpx.get(url, params={"limit": 5}).json()
    with Monitor(gateways.redis_url, listed.prefix, ":proj:ratings:") as watched:
        r = httpx.get(url, params={"limit": 5, "cursor": first["next"]})
    assert r.status_code == 200 and len(r.json()["recent"]) == 5, r.text
    # what the page reads; the ratings' shared fold (an HGETALL of the results and an HGET of
    # the compacted table, at most once in STANDINGS_FRESH_S, for every caller) is not the page's
    fold = [c for c in watched.commands if c[0].upper() == "HGET" and c[2] == "table"]
    paged = [c for c in watched.commands if c[0].upper() != "HGETALL" and c not in fold]
    assert paged, "MONITOR saw none of the page's reads"
    for command in paged:
        name = command[0].upper()
        if name == "HGET":  # where the compacted results' pages begin: one small field
            assert command[1].endswith(":compacted") and command[2] == "indexed", command
            continue
        assert name in {"ZREVRANGEBYSCORE", "ZRANGEBYSCORE", "HMGET"}, command
        if name == "ZREVRANGEBYSCORE":
            words = [w.upper() for w in command]
            assert int(words[words.index("LIMIT") + 2]) <= 5, command
    assert sum(len(c) - 2 for c in paged if c[0].upper() == "HMGET") == 5


def test_a_finished_match_enters_its_players_recent_matches(gateways: Gateways) -> None:
    """The projector writes each player's index as a match ends (no planting here)."""
    match_id = create(gateways.url, ["random", "greedy"], rules={"players": 2})
    deadline = time.monotonic() + 60
    while True:
        r = httpx.get(f"{gateways.url}/api/v1/players/house:greedy", params={"limit": 20})
        if r.status_code == 200 and match_id in [m["match_id"] for m in r.json()["recent"]]:
            break
        assert time.monotonic() < deadline, "the finished match is not in its player's list"
        time.sleep(0.2)


def test_an_accounts_challenges_list_reads_its_latest_hundred_only(
    gateways: Gateways, listed: Listed
) -> None:
    """Challenges are sent by others: a list of an account that got thousands reads 100."""
    r = httpx.post(f"{listed.url}/api/v1/accounts", json={"name": f"chal{uuid.uuid4().hex[:6]}"})
    assert r.status_code == 201, r.text
    account, token = r.json()["account"]["id"], r.json()["token"]
    index = f"{Keys(listed.prefix, listed.partitions).account(account)}:challenges"
    with sync_client_for(gateways.redis_url) as admin:
        later = time.time() + 600
        admin.zadd(index, {f"c-planted{i:04d}": later + i for i in range(400)})
    with Monitor(gateways.redis_url, listed.prefix, "c-planted") as watched:
        r = httpx.get(
            f"{listed.url}/api/v1/challenges", headers={"authorization": f"Bearer {token}"}
        )
    assert r.status_code == 200, r.text
    reads = [c for c in watched.commands if c[0].upper() == "HGETALL"]
    assert 0 < len(reads) <= 100, len(reads)
