"""Parts of the service cut off from Redis by the network, and coming back.

Loopback never cuts one process off while the others carry on. Here Redis, each referee and
the gateway have network namespaces of their own, and a cut is a link taken down at the
bridge: packets dropped, connections hanging, nothing refused, as when a switch port or a
zone's link fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis
from redis.connection import parse_url

from engine.verify import verify
from events.envelope import Envelope
from services.cli.supervisor import Stack
from services.config import Settings
from services.redis.servers import Placement, private_server
from services.store.keys import Keys
from services.store.redis import APPEND
from tests.gateway.conftest import UNCAPPED, wait_healthy
from tests.netns.conftest import LONG
from tests.service.test_failover import create_matches, read_logs
from tests.support.netns import Host, Network

pytestmark = [pytest.mark.service, pytest.mark.netns]

REDIS_PORT = 6379
GATEWAY_PORT = 8080
LEASE_MS = 1000
PACE_MS = 100
"""Bots take this long a move, so that the matches outlast the cut."""
MATCHES = 40 if LONG else 12
CUT_S = 12.0 if LONG else 3.0
"""How long a referee stays cut off: several leases, so the other takes and serves its
partitions, and claims the commands it was given just before the cut."""


def wait_for(what: str, check: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    """Wait until ``check()`` holds; fail saying ``what`` was not seen within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(every)


@contextlib.contextmanager
def redis_host(net: Network) -> Iterator[tuple[Host, str]]:
    """A Redis node on a host of its own."""
    host = net.host("redis")
    placement = Placement(host.address, host.wrapper, REDIS_PORT)
    with private_server(appendfsync="no", placement=placement) as url:
        yield host, url


@contextlib.contextmanager
def referees_apart(
    settings: Settings, hosts: Sequence[Host], service: Host, log_dir: Path
) -> Iterator[tuple[redis.Redis, Stack]]:
    """The house bots on ``service``'s host (no projector: the logs are what is checked) and a
    referee on each of ``hosts`` (referee-0, referee-1, ...), once each holds partitions: a
    client of Redis, and the stack."""
    assert settings.redis_url is not None
    url, keys = settings.redis_url, Keys(settings.prefix, settings.partitions)
    with (
        redis.Redis.from_url(url) as client,
        Stack(
            url,
            settings,
            referees=0,
            pools={"random": 1, "greedy": 1},
            projector=False,
            wrapper=service.wrapper,
            log_dir=log_dir,
        ) as stack,
    ):
        names = {f"referee-{k}" for k in range(len(hosts))}
        for k, host in enumerate(hosts):
            name = f"referee-{k}"
            stack.spawn(name, "referee", "--name", name, wrapper=host.wrapper)
        wait_for(
            "every referee holding partitions",
            lambda: set(owners(client, keys)) == names,
            timeout=30,
        )
        yield client, stack


@dataclass
class Append:
    """An append script call as Redis ran it: when, from where, on what it counted."""

    at: float
    client: str
    match_id: str
    expected: int
    command_id: str
    events: int


@dataclass
class Take:
    """A referee's attempt to take a partition's lease (``SET owner name NX``)."""

    at: float
    client: str
    lease: str


@dataclass
class Watch:
    """Every append and lease taken that Redis runs while watched (MONITOR), in its order."""

    url: str
    appends: list[Append] = field(default_factory=list)
    takes: list[Take] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        connection = redis.Connection(**parse_url(self.url))
        connection.connect()
        connection.send_command("MONITOR")
        connection.read_response()
        self._thread = threading.Thread(target=self._read, args=(connection,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _read(self, connection: redis.Connection) -> None:
        line = re.compile(r"([\d.]+) \[\d+ ([^\]]+)\] (.*)")
        quoted = re.compile(r'"((?:[^"\\]|\\.)*)"')
        try:
            while not self._stop.is_set():
                if not connection.can_read(timeout=0.2):
                    continue
                raw = connection.read_response()
                text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
                found = line.match(text)
                if found is not None:
                    self._note(float(found[1]), found[2].split(":")[0], quoted.findall(found[3]))
        finally:
            connection.disconnect()

    def _note(self, at: float, client: str, args: list[str]) -> None:
        name = args[0].upper() if args else ""
        if name == "EVALSHA" and args[1] == APPEND.sha:
            # ARGV: match id, expected version, command id, event count (services/store)
            argv = args[3 + int(args[2]) :]
            self.appends.append(Append(at, client, argv[0], int(argv[1]), argv[2], int(argv[3])))
        elif name == "SET" and args[1].endswith(":owner") and "NX" in (a.upper() for a in args):
            self.takes.append(Take(at, client, args[1]))

    def written(self) -> list[Append]:
        """The appends that wrote, found by running them again in order as the script does:
        one counting on the match's version, of a command not yet applied."""
        version: dict[str, int] = {}
        applied: set[tuple[str, str]] = set()
        wrote = []
        for a in self.appends:
            if a.expected != version.get(a.match_id, 0) or (a.match_id, a.command_id) in applied:
                continue
            version[a.match_id] = a.expected + a.events
            applied.add((a.match_id, a.command_id))
            wrote.append(a)
        return wrote


def owners(client: redis.Redis, keys: Keys) -> list[str | None]:
    """Which referee holds each partition's lease now."""
    return [
        None if (v := client.get(keys.owner(p))) is None else v.decode()
        for p in range(keys.partitions)
    ]


def versions(url: str, settings: Settings, match_ids: list[str]) -> dict[str, int]:
    """Each match's version now."""
    return {m: len(log) for m, log in asyncio.run(read_logs(url, settings, match_ids)).items()}


def commands_written_twice(log: list[Envelope]) -> list[str]:
    """Command ids whose events are in the log in two places: a command applied twice."""
    runs = [
        e.command_id for k, e in enumerate(log) if k == 0 or log[k - 1].command_id != e.command_id
    ]
    return sorted({c for c in runs if runs.count(c) > 1})


def test_a_referee_cut_off_from_redis_loses_its_partitions_and_writes_nothing_when_back(
    net: Network, tmp_path: Path
) -> None:
    """Cut one of two referees off the network while matches play: its leases run out, the
    other takes every partition and serves them, claiming the commands left pending with the
    one cut off. When the link is back, what the first had in flight reaches Redis late, and
    the append script refuses it: it counted on a version the match has moved past (the
    expected version fences a referee that lost its lease). The first writes nothing until it
    has taken a partition's lease again, which it does by itself; every match verifies and
    holds no command applied twice."""
    with redis_host(net) as (_, url):
        first, second, service = net.host("referee-0"), net.host("referee-1"), net.host("service")
        settings = Settings(
            redis_url=url,
            prefix=f"n{uuid.uuid4().hex[:8]}",
            partitions=4,
            claim_idle_ms=LEASE_MS,
            lease_ms=LEASE_MS,
            bot_pace_ms=PACE_MS,
            log_level="warning",
        )
        keys = Keys(settings.prefix, settings.partitions)
        with referees_apart(settings, (first, second), service, tmp_path) as (client, stack):

            def now() -> float:
                seconds, micros = client.time()
                return float(seconds) + micros / 1e6

            with Watch(url) as watch:
                match_ids = asyncio.run(create_matches(settings, MATCHES))
                time.sleep(0.5)  # both play
                first.cut()
                cut_at = now()
                wait_for(
                    "the other referee holding every partition",
                    lambda: set(owners(client, keys)) == {"referee-1"},
                    timeout=10 * LEASE_MS / 1000,
                )
                moving = versions(url, settings, match_ids)
                time.sleep(CUT_S)
                at_restore = versions(url, settings, match_ids)
                first.restore()
                wait_for(
                    "the referee cut off holding partitions again",
                    lambda: "referee-0" in owners(client, keys),
                    timeout=30,
                )
                wait_for(
                    "the referee cut off writing again",
                    lambda: any(
                        a.client == first.address and a.at > cut_at for a in watch.written()
                    ),
                    timeout=30,
                )
            logs = asyncio.run(read_logs(url, settings, match_ids))
            assert not stack.check(), f"processes died: {stack.check()}"
    moved = sum(at_restore.values()) - sum(moving.values())
    assert moved > 0, f"no match moved while a referee was cut off: {moving} {at_restore}"
    for match_id, log in logs.items():
        problem = verify([e.event for e in log])
        assert problem is None, f"{match_id} v{problem.version}: {problem.message}"
        assert not commands_written_twice(log), f"{match_id}: {commands_written_twice(log)}"
    late = [a for a in watch.appends if a.client == first.address and a.at > cut_at]
    wrote = [a for a in watch.written() if a.client == first.address and a.at > cut_at]
    unleased = [
        a
        for a in wrote
        if not any(
            t.client == first.address
            and cut_at < t.at < a.at
            and t.lease == keys.owner(keys.partition_of(a.match_id))
            for t in watch.takes
        )
    ]
    assert not unleased, f"written by the referee cut off before it took a lease: {unleased[:3]}"
    report = {
        "check": "referee_cut_off",
        "matches": MATCHES,
        "cut_s": CUT_S,
        "events_while_cut": moved,
        "appends_after_the_cut": len(late),
        "refused": len(late) - len(wrote),
        "written_after_a_lease_taken": len(wrote),
    }
    print("\n" + json.dumps(report))


def test_a_gateway_cut_off_from_redis_answers_503_and_recovers_by_itself(
    net: Network, tmp_path: Path
) -> None:
    """Cut Redis off the network under a running gateway: its requests answer 503 with the
    gateway's typed error body, in bounded time (no request hangs on the dead link), and
    once the link is back the same gateway process answers again, restarted by nobody."""
    with redis_host(net) as (redis_on, url):
        front = net.host("gateway")
        settings = Settings(redis_url=url, prefix=f"n{uuid.uuid4().hex[:8]}", log_level="warning")
        with Stack(url, settings, referees=0, pools={}, projector=False, log_dir=tmp_path) as stack:
            env = {**UNCAPPED, "DOMINO_GATEWAY_ALLOWED_HOSTS": front.address}
            gateway = stack.spawn(
                "gateway",
                "gateway",
                "--host",
                front.address,
                "--port",
                str(GATEWAY_PORT),
                env=env,
                wrapper=front.wrapper,
            )
            base = f"http://{front.address}:{GATEWAY_PORT}"
            wait_healthy(base, gateway)
            paths = ["/api/v1/matches", "/api/v1/matches/m-0123456789", "/healthz"]
            assert httpx.get(f"{base}/api/v1/matches", timeout=10).status_code == 200
            redis_on.cut()
            try:
                answers = asyncio.run(_get_all(base, paths))
            finally:
                redis_on.restore()
            for path, (status, body, took) in zip(paths, answers, strict=True):
                assert status == 503, (path, status, body)
                assert body.get("error") == "unavailable", (path, body)
                assert isinstance(body.get("message"), str) and body["message"], (path, body)
                assert took < 30, (path, took)
            wait_for(
                "the gateway answering again",
                lambda: _status(f"{base}/api/v1/matches") == 200,
                timeout=30,
                every=0.2,
            )
            assert gateway.poll() is None, "the gateway exited"
    print(
        "\n" + json.dumps({"check": "gateway_cut_off", "seconds_to_503": [a[2] for a in answers]})
    )


async def _get_all(base: str, paths: list[str]) -> list[tuple[int, dict[str, object], float]]:
    """GET every path at once; each one's status, JSON body and seconds taken."""
    async with httpx.AsyncClient(timeout=60) as http:

        async def get(path: str) -> tuple[int, dict[str, object], float]:
            started = time.monotonic()
            response = await http.get(base + path)
            return response.status_code, response.json(), round(time.monotonic() - started, 2)

        return list(await asyncio.gather(*(get(p) for p in paths)))


def _status(url: str) -> int | None:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=5).status_code
    return None
