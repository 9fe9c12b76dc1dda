"""Chaos under many concurrent matches, and the checks that must hold afterwards.

A run starts its own Redis (append-only file, ``appendfsync always``) and the whole service on
it as processes — two referees, two workers for each house bot pool, the projector and a
gateway — and keeps matches going: house bots against each other (created on the command
streams, some watched through the gateway's public stream) and outside players who play their
seats over HTTP, as any bot would. Meanwhile it injects faults at random moments (seeded):
SIGKILL of a referee, a bot worker, the projector or the gateway, each started again; SIGKILL
of Redis, started again from its append-only file; SIGSTOP of Redis, then SIGCONT.

When the chaos stops every check is one result (``Check``; ``python -m tests.chaos`` prints
each as a JSON line): every match finished; no process died that was not killed; every log
passes the rules and the fairness check (what ``domino verify --fairness`` runs, and the
command itself on some of them); nothing is pending in any consumer group; nothing was
dead-lettered; the projections, caught up, equal a rebuild from the logs; and nothing anyone
was told is lost — every move the gateway answered ``accepted`` is in its match's log at the
version it was given, with its command id, and every event a seat's or a spectator's stream
showed is in the log, exactly as shown (redacted for that seat: C8).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engine.fairness import check as fairness_check
from engine.rules import Rules
from engine.verify import verify
from events.codec import JSON
from events.envelope import Envelope
from services.cli.clients import open_clients, service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.core.commands import new_match_id
from tests.gateway.conftest import UNCAPPED, free_port
from tests.support.checks import (
    dead_letters,
    pending,
    projection_snapshot,
    projections_behind,
)
from tests.support.cli import run_domino
from tests.support.restartable import RestartableRedis
from tests.support.watch import Watched, lost_events, spectate

API = "/api/v1"
FAULTS = ("referee", "bots", "projector", "gateway", "redis-kill", "redis-stop")
GATEWAY_ENV = {
    **UNCAPPED,
    "DOMINO_GATEWAY_STREAMS_PER_CLIENT": "10000",
    "DOMINO_GATEWAY_STREAMS_PER_TOKEN": "8",
    "DOMINO_GATEWAY_LOBBY_PER_S": "10000",
    "DOMINO_GATEWAY_LOBBY_BURST": "10000",
    "DOMINO_GATEWAY_KEEPALIVE_S": "1",
    "DOMINO_GATEWAY_FORFEIT_AFTER": "1000",  # a seat whose turns a fault timed out plays on
}
HOUSE_SPECS: list[tuple[Rules, list[str | None]]] = [
    (Rules.make("express", target=100), ["greedy", "random", "greedy", "random"]),
    (Rules.make("straight", players=2, target=100), ["random", "greedy"]),
    (Rules.make("express", players=3, target=100), ["random", "greedy", "random"]),
]
OUTSIDE_SPECS: list[dict[str, Any]] = [
    {"seats": [None, "greedy"], "rules": {"family": "straight", "players": 2, "target": 60}},
    {"seats": [None, "random", None, "greedy"], "rules": {"family": "express", "target": 60}},
]


@dataclass(frozen=True)
class Config:
    """What a run does; every number can come from the environment (``from_env``)."""

    seed: int = 1
    chaos_s: float = 12.0  # how long faults are injected
    house: int = 24  # matches of house bots, created while the chaos goes on
    outside: int = 6  # tables of outside players (seats played over HTTP), a match after another
    watched: int = 8  # house matches followed by a spectator
    fault_gap_s: tuple[float, float] = (0.4, 1.2)  # the pause between two faults
    finish_s: float = 120.0  # how long the matches have to end once the chaos stops
    pace_ms: int = 15  # house bots wait this long before answering: matches last a while
    verify_commands: int = 1  # logs also checked by ``domino verify --fairness`` itself
    faults: tuple[str, ...] = FAULTS
    workdir: Path | None = None  # where Redis's files and the processes' logs go

    @classmethod
    def from_env(cls, **overrides: Any) -> Config:
        """The defaults, then DOMINO_CHAOS_* variables, then ``overrides``."""
        env = os.environ
        values: dict[str, Any] = {}
        for name, kind in (
            ("seed", int),
            ("chaos_s", float),
            ("house", int),
            ("outside", int),
            ("watched", int),
            ("finish_s", float),
            ("verify_commands", int),
        ):
            raw = env.get(f"DOMINO_CHAOS_{name.upper()}")
            if raw:
                values[name] = kind(raw)
        if raw := env.get("DOMINO_CHAOS_FAULTS"):
            values["faults"] = tuple(f for f in raw.split(",") if f)
        values.update(overrides)
        return cls(**values)


@dataclass
class Check:
    """One check's verdict and what it found."""

    check: str
    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """The check as one JSON line."""
        return json.dumps({"check": self.check, "ok": self.ok, **self.detail}, sort_keys=True)


@dataclass
class Seat:
    """An outside player's seat: what its stream showed, and the moves the gateway accepted."""

    match_id: str
    seat: int
    token: str
    seen: dict[int, Any] = field(default_factory=dict)
    accepted: dict[int, str] = field(default_factory=dict)  # version -> command id
    rejected: int = 0
    over: bool = False


@dataclass
class Run:
    """What happened during a run: the matches, the players and watchers, the faults."""

    house: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)  # created while Redis was failing
    seats: list[Seat] = field(default_factory=list)
    watched: list[Watched] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)
    killed: Counter[str] = field(default_factory=Counter)
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds it took


class Chaos:
    """A Redis, the service on it, and the faults; ``run()`` returns the checks."""

    def __init__(self, config: Config, workdir: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.workdir = workdir
        (workdir / "redis").mkdir(parents=True, exist_ok=True)
        self.redis = RestartableRedis(workdir / "redis", appendfsync="always")
        self.settings = Settings(
            redis_url=self.redis.url,
            prefix="chaos",
            partitions=4,
            claim_idle_ms=600,
            lease_ms=1500,
            watch_ms=1000,
            bot_pace_ms=config.pace_ms,
            log_level="warning",
            log_format="json",
        )
        self.port = free_port()
        self.gateway = f"http://127.0.0.1:{self.port}"
        self.stack = Stack(
            self.redis.url,
            self.settings,
            referees=2,
            pools={"random": 2, "greedy": 2},
            log_dir=workdir / "logs",
        )
        self.state = Run()
        self.crashed: list[str] = []
        self._lock = threading.Lock()  # the fault thread and the checks share the stack

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> list[Check]:
        """Start everything, play under faults, stop the faults, and check."""
        self.redis.start()
        try:
            self.stack.start()
            self._spawn_gateway()
            try:
                asyncio.run(self._play())
                began = time.monotonic()
                checks = self._checks()
                self.state.phases["checks"] = time.monotonic() - began  # all of them
                phases = {k: round(v, 1) for k, v in self.state.phases.items()}
                return [*checks, Check("timing", True, {"seconds": phases})]
            finally:
                self.stack.stop()
        finally:
            self.redis.kill()

    def _spawn_gateway(self) -> None:
        self.stack.spawn(
            "gateway", "gateway", "--host", "127.0.0.1", "--port", str(self.port), env=GATEWAY_ENV
        )

    async def _play(self) -> None:
        config = self.config
        phases, began = self.state.phases, time.monotonic()
        await self._until_healthy(60.0)
        phases["start"] = time.monotonic() - began
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, read=30.0),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        stop = asyncio.Event()  # the chaos is over
        done = asyncio.Event()  # the spectators may go
        tasks: list[asyncio.Task[None]] = []
        try:
            players = [
                asyncio.create_task(self._outside_player(http, k)) for k in range(config.outside)
            ]
            tasks += players
            creating = asyncio.create_task(self._create_house(http, done, tasks))
            faults = asyncio.create_task(asyncio.to_thread(self._inject, stop))
            await asyncio.sleep(config.chaos_s)
            stop.set()
            await faults
            await creating
            phases["chaos"] = time.monotonic() - began - phases["start"]
            self._heal()
            await self._until_healthy(60.0)
            finish = time.monotonic() + config.finish_s
            if players:  # their last matches, created as the chaos stopped, to their ends
                await asyncio.wait(players, timeout=config.finish_s)
            await self._until_over(max(1.0, finish - time.monotonic()))
            phases["finish"] = time.monotonic() - began - phases["start"] - phases["chaos"]
            deadline = time.monotonic() + 30.0  # the players and spectators see the ends
            while time.monotonic() < deadline and not all(
                x.over for x in [*self.state.seats, *self.state.watched]
            ):
                await asyncio.sleep(0.2)
        finally:
            done.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await http.aclose()

    async def _until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{self.gateway}/healthz")).status_code == 200:
                        return
                gateway = self.stack.processes.get("gateway")
                if gateway is not None and gateway.poll() is not None:
                    raise RuntimeError(f"the gateway exited (see {self.workdir}/logs)")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the gateway did not answer in {timeout} s")
                await asyncio.sleep(0.1)

    def _creating_s(self) -> float:
        """How long new matches are started: most of the chaos, so that faults meet matches at
        every stage, and the last ones still play when the faults stop."""
        chaos = self.config.chaos_s
        return max(chaos / 2, chaos - 20.0)

    async def _create_house(
        self, http: httpx.AsyncClient, done: asyncio.Event, tasks: list[asyncio.Task[None]]
    ) -> None:
        """The house matches, half at once and the rest spread over the time matches are
        started; the first ones get a spectator each."""
        config = self.config
        first = config.house // 2
        gap = self._creating_s() / max(1, config.house - first)
        for k in range(config.house):
            if k >= first:
                await asyncio.sleep(gap)
            rules, seats = HOUSE_SPECS[k % len(HOUSE_SPECS)]
            match_id = new_match_id()
            try:
                async with open_clients(self.redis.url, self.settings) as (client, _):
                    sender = service_client(client, self.settings, sender="chaos")
                    await sender.create_match(rules, seats, match_id=match_id)
            except Exception:  # Redis was down: the command may or may not be in
                self.state.unsure.append(match_id)
                continue
            self.state.house.append(match_id)
            if len(self.state.watched) < config.watched:
                watched = Watched(match_id)
                self.state.watched.append(watched)
                tasks.append(asyncio.create_task(spectate(http, self.gateway, watched, done)))

    async def _outside_player(self, http: httpx.AsyncClient, k: int) -> None:
        """One outside table: a match after another, while matches are started."""
        until = time.monotonic() + self._creating_s()
        while True:
            await self._outside(http, k)
            if time.monotonic() > until:
                return

    async def _outside(self, http: httpx.AsyncClient, k: int) -> None:
        """Create a lobby match through the gateway, take its open seats, and play them."""
        body = OUTSIDE_SPECS[k % len(OUTSIDE_SPECS)]
        created = await _retrying(lambda: http.post(f"{self.gateway}{API}/matches", json=body))
        if created is None or created.status_code != 201:
            return
        match_id = created.json()["match"]["match_id"]
        seats: list[Seat] = []
        for _ in range(body["seats"].count(None)):
            joined = await _retrying(
                lambda: http.post(f"{self.gateway}{API}/matches/{match_id}/join", json={})
            )
            if joined is None or joined.status_code != 201:
                break
            data = joined.json()
            seats.append(Seat(match_id, data["seat"], data["token"]))
        if len(seats) < body["seats"].count(None):
            return  # a seat nobody holds: the match waits in the lobby, it never starts
        self.state.outside.append(match_id)
        self.state.seats.extend(seats)
        await asyncio.gather(*(self._play_seat(http, seat) for seat in seats))

    async def _play_seat(self, http: httpx.AsyncClient, seat: Seat) -> None:
        """Follow the seat's stream (resuming after any drop) and answer each turn with its
        first legal move, under an idempotency key of the turn's version."""
        url = f"{self.gateway}{API}/matches/{seat.match_id}/seats/{seat.seat}"
        auth = {"authorization": f"Bearer {seat.token}"}
        answered: set[int] = set()
        while not seat.over:
            params = {"after": str(max(seat.seen))} if seat.seen else {}
            try:
                async with http.stream(
                    "GET", f"{url}/stream", params=params, headers=auth
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        await asyncio.sleep(0.3)
                        continue
                    async for raw in response.aiter_lines():
                        if not raw:
                            continue
                        line = json.loads(raw)
                        kind = line.get("type")
                        if kind == "event":
                            seat.seen[line["id"]] = line["event"]
                            if line["event"].get("type") == "match_ended":
                                seat.over = True
                        elif kind == "turn" and line["id"] not in answered:
                            view = line["view"]
                            if view.get("legal"):
                                answered.add(line["id"])
                                await self._move(http, url, auth, seat, line["id"], view)
                        elif kind == "snapshot" and (line.get("view") or {}).get("phase") == "over":
                            seat.over = True
            except httpx.HTTPError:
                await asyncio.sleep(0.3)

    async def _move(
        self,
        http: httpx.AsyncClient,
        url: str,
        auth: dict[str, str],
        seat: Seat,
        version: int,
        view: dict[str, Any],
    ) -> None:
        """Post a move until the gateway says what became of it (accepted or rejected)."""
        key = f"v{version}"
        headers = {**auth, "idempotency-key": key}
        for _ in range(40):
            try:
                r = await http.post(f"{url}/moves", json=view["legal"][0], headers=headers)
            except httpx.HTTPError:
                await asyncio.sleep(0.3)
                continue
            if r.status_code == 200:
                seat.accepted[int(r.json()["version"])] = f"gw:{seat.seat}:{key}"
                return
            if r.status_code in (429, 502, 503, 504):
                await asyncio.sleep(0.3)
                continue
            seat.rejected += 1  # e.g. the turn timed out meanwhile: the stream goes on
            return

    # -- faults --------------------------------------------------------------------------------

    def _inject(self, stop: asyncio.Event) -> None:
        """Faults until ``stop``: every kind in turn, in an order the seed shuffles."""
        config = self.config
        began = time.monotonic()
        order: list[str] = []
        while not stop.is_set():
            time.sleep(self.rng.uniform(*config.fault_gap_s))
            if stop.is_set():
                break
            if not order:
                order = list(config.faults)
                self.rng.shuffle(order)
            fault = order.pop()
            with self._lock:
                self._fault(fault)
            self.state.faults.append((round(time.monotonic() - began, 2), fault))

    def _fault(self, fault: str) -> None:
        rng, stack = self.rng, self.stack
        if fault == "redis-kill":
            self.redis.kill()
            time.sleep(rng.uniform(0.05, 0.5))
            self.redis.start()
            return
        if fault == "redis-stop":
            self.redis.pause()
            time.sleep(rng.uniform(0.3, 2.0))
            self.redis.resume()
            return
        prefix = {"referee": "referee-", "bots": "bots-", "projector": "projector"}.get(
            fault, "gateway"
        )
        names = sorted(n for n in stack.processes if n.startswith(prefix))
        if not names:
            return
        name = rng.choice(names)
        stack.kill(name, signal.SIGKILL)
        self.state.killed[name] += 1
        time.sleep(rng.uniform(0.0, 0.5))
        self._respawn(name)

    def _respawn(self, name: str) -> None:
        if name == "gateway":
            self._spawn_gateway()
        elif name == "projector":
            self.stack.spawn("projector", "projector")
        elif name.startswith("referee-"):
            self.stack.spawn(name, "referee", "--name", name)
        else:  # bots-<pool>-<k>, consumer <pool>-<k>: its own pending turns are read again
            pool, k = name.removeprefix("bots-").rsplit("-", 1)
            self.stack.spawn(
                name, "bots", "--strategy", pool, "--workers", "1", "--name", f"{pool}-{k}"
            )

    def _heal(self) -> None:
        """After the chaos: Redis running and every process of the stack up."""
        with self._lock:
            if self.redis.process is None:
                self.redis.start()
            self.redis.resume()
            self.crashed = self.stack.check()  # exited with nobody killing them
            for name in self.crashed:
                self.stack.processes.pop(name)
                self._respawn(name)

    # -- the end -------------------------------------------------------------------------------

    def _matches(self) -> list[str]:
        return [*self.state.house, *self.state.outside]

    async def _logs(self, match_ids: list[str]) -> dict[str, list[Envelope]]:
        async with open_clients(self.redis.url, self.settings) as (_, store):
            return {
                m: [JSON.decode_envelope(r.data) for r in await store.read(m)] for m in match_ids
            }

    async def _until_over(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = self._matches()
        while waiting and time.monotonic() < deadline:
            logs = await self._logs(waiting)
            waiting = [m for m, log in logs.items() if not _over(log)]
            if waiting:
                await asyncio.sleep(0.25)

    def _checks(self) -> list[Check]:
        state = self.state
        logs = asyncio.run(self._logs(self._matches()))
        unsure = asyncio.run(self._logs(state.unsure))
        logs.update({m: log for m, log in unsure.items() if log})  # created after all
        checks = [
            Check(
                "faults",
                bool(state.faults) and {f for _, f in state.faults} == set(self.config.faults),
                {
                    "seed": self.config.seed,
                    "count": len(state.faults),
                    "by_kind": dict(Counter(f for _, f in state.faults)),
                    "killed": dict(state.killed),
                },
            ),
            Check(
                "finished",
                all(_over(log) for log in logs.values()),
                {
                    "matches": len(logs),
                    "house": len(state.house),
                    "outside": len(state.outside),
                    "unfinished": [m for m, log in logs.items() if not _over(log)][:10],
                },
            ),
            Check("crashed", not self.crashed, {"exited_unkilled": self.crashed}),
        ]
        for name, check in (
            ("verify", lambda: self._verify(logs)),
            ("pending", lambda: asyncio.run(self._settled("pending", self._pending, 20.0))),
            ("dead_letters", self._dead),
            ("projections", self._projections),
            ("acknowledged", lambda: self._acknowledged(logs)),
        ):
            began = time.monotonic()
            checks.append(check())
            state.phases[f"check_{name}"] = time.monotonic() - began
        return checks

    async def _pending(self) -> dict[str, int]:
        return await pending(self.redis.url, self.settings.prefix)

    def _verify(self, logs: dict[str, list[Envelope]]) -> Check:
        """The rules and the fairness check on every log, in this process (what ``domino
        verify --fairness`` runs), and the command itself on a few."""
        failed: dict[str, str] = {}
        for match_id, log in logs.items():
            versions = [e.version for e in log]
            if versions != list(range(1, len(log) + 1)):
                failed[match_id] = "versions are not 1..n"
                continue
            events = [e.event for e in log]
            problem = verify(events)
            if problem is not None:
                failed[match_id] = f"v{problem.version}: {problem.message}"
                continue
            unfair = fairness_check(events)
            if unfair is not None:
                failed[match_id] = f"round {unfair.round}: {unfair.message}"
        commands = sorted(logs)[: self.config.verify_commands]
        env = self.stack.env()
        for match_id in commands:
            done = run_domino("verify", match_id, "--fairness", env=env, timeout=120)
            if done.returncode != 0:
                failed[match_id] = f"domino verify --fairness: {done.stdout}{done.stderr}"[:500]
        return Check(
            "verify",
            not failed,
            {
                "logs": len(logs),
                "by_command": len(commands),
                "failed": dict(list(failed.items())[:5]),
            },
        )

    async def _settled(self, name: str, read: Any, timeout: float) -> Check:
        """A reading that must come to nothing (pending entries are claimed and answered by
        the survivors after the claim idle time): waited for, up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            found = await read()
            if not found or time.monotonic() > deadline:
                return Check(name, not found, {"found": found})
            await asyncio.sleep(0.5)

    def _dead(self) -> Check:
        dead = asyncio.run(dead_letters(self.redis.url, self.settings.prefix))
        return Check("dead_letters", not dead, {"count": len(dead), "first": dead[:5]})

    def _projections(self) -> Check:
        """Once the projector has caught up: its projections, then the same rebuilt from the
        logs (the projector stopped) with ``domino projections rebuild``."""
        url, prefix, partitions = self.redis.url, self.settings.prefix, self.settings.partitions
        caught_up = asyncio.run(
            self._settled("caught_up", lambda: projections_behind(url, prefix, partitions), 30.0)
        )
        if not caught_up.ok:
            return Check("projections", False, {"behind": caught_up.detail["found"][:5]})
        live = asyncio.run(projection_snapshot(url, prefix))
        with self._lock:
            self.stack.kill("projector", signal.SIGTERM)
        done = run_domino("projections", "rebuild", env=self.stack.env(), timeout=120)
        rebuilt = asyncio.run(projection_snapshot(url, prefix))
        differ = sorted(
            k.decode() for k in set(live) | set(rebuilt) if live.get(k) != rebuilt.get(k)
        )
        return Check(
            "projections",
            done.returncode == 0 and not differ and bool(live),
            {"keys": len(live), "differ": differ[:5], "rebuild": done.returncode},
        )

    def _acknowledged(self, logs: dict[str, list[Envelope]]) -> Check:
        """Every accepted move in its log with its command id; every event shown to a seat or
        a spectator in its log, as shown."""
        lost: list[str] = []
        accepted = shown = 0
        for seat in self.state.seats:
            log = logs.get(seat.match_id, [])
            for version, command_id in seat.accepted.items():
                accepted += 1
                if version > len(log) or log[version - 1].command_id != command_id:
                    lost.append(f"{seat.match_id} move v{version} ({command_id})")
            shown += len(seat.seen)
            lost += [
                f"{seat.match_id} seat {seat.seat} v{v}"
                for v in lost_events(log, seat.seen, seat.seat)
            ]
        for watched in self.state.watched:
            log = logs.get(watched.match_id, [])
            shown += len(watched.seen)
            lost += [f"{watched.match_id} v{v}" for v in lost_events(log, watched.seen)]
        return Check(
            "acknowledged",
            not lost and accepted > 0 and shown > 0,
            {"accepted_moves": accepted, "events_shown": shown, "lost": lost[:10]},
        )


def _over(log: list[Envelope]) -> bool:
    return bool(log) and log[-1].event.__struct_config__.tag == "match_ended"


async def _retrying(send: Any, attempts: int = 30) -> httpx.Response | None:
    """A request sent again while the gateway is away or unavailable."""
    for _ in range(attempts):
        try:
            response: httpx.Response = await send()
        except httpx.HTTPError:
            await asyncio.sleep(0.3)
            continue
        if response.status_code in (502, 503, 504):
            await asyncio.sleep(0.3)
            continue
        return response
    return None


@contextlib.contextmanager
def workdir(config: Config) -> Iterator[Path]:
    """The run's directory: the configured one (kept), else a temporary one."""
    if config.workdir is not None:
        config.workdir.mkdir(parents=True, exist_ok=True)
        yield config.workdir
        return
    with tempfile.TemporaryDirectory(prefix="domino-chaos-") as tmp:
        yield Path(tmp)


def run(config: Config, directory: Path) -> list[Check]:
    """One chaos run in ``directory``; its checks."""
    return Chaos(config, directory).run()
