"""External SDK bots over HTTP against the same matches played by in-process house bots.

One private Redis, one referee, the projector and the gateway run as their own processes, as
in production. First the in-process baseline: MATCHES concurrent four-seat matches whose seats
are played by a real BotWorker in this process (reading turns from Redis). Then the same
matches with every seat an SDK bot, reaching the gateway over HTTP on loopback: each seat has
its own client, stream and moves, and the bots run in BOT_PROCESSES processes (a match's seats
together). Both measure the same thing: moves a second, and the time from one move of a match
to the next seat's turn arriving (from the moment a bot chose a move, so the POST included, to
the moment the next bot of that match is asked to choose). Each line also gives the CPU time
every process spent per move, which is where the HTTP path's cost shows.

A second line measures the gateway itself, with players cheap enough not to be the bottleneck:
each of SEATS accounts holds one seat of every match and follows all its seats over one
``GET /account/play`` connection, posting each move as it comes over a few keep-alive
connections with a minimal HTTP/1.1 client (tests/bench/http1.py). Its figure is the gateway's
own CPU time per move.

A third, ``gateway.socket``, plays that same workload with the SDK's own account bot
(``Bot.play_account``, transport ``socket``): each account's seats, events and moves over its
one account socket, the SEATS bots in one process. Its figures are the gateway's CPU time per
move and the SDK's (the bots' process), against the same in-process reference.

DOMINO_BENCH_PROFILE=sample (or cprofile) runs the gateway under tests/bench/profiled.py,
profiling the cheap players' measured window (DOMINO_BENCH_PROFILE_LINE=socket: the socket
line's, and the SDK bots' process too, sampled); the report goes to DOMINO_BENCH_PROFILE_OUT
(default: gateway-profile.txt in the current directory), the SDK's beside it (``.sdk.txt``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import redis
import uvloop
from domino_sdk import Bot
from domino_sdk import Move as SdkMove
from domino_sdk import View as SdkView

from engine.rules import Rules
from engine.strategy import RandomStrategy
from engine.views import View
from events.model import Move
from services.bots.worker import BotWorker
from services.cli.clients import service_client
from services.cli.supervisor import Stack
from services.config import Settings
from services.logs import configure
from services.redis.connection import node_client
from services.store.keys import Keys
from services.transport.redis import RedisTransport
from tests.bench import http1, profiled
from tests.support.redis_env import redis_server

MATCHES = 50
SEATS = 4
WARMUP_S = 2.0
MEASURE_S = 8.0
BOT_PROCESSES = 2  # external bots are separate programs; two processes use both cores
BOT_STARTUP_S = 3.0  # for the bot processes to start and connect every seat
PLAYER_PROCESSES = 1  # the cheap players: one process is far from busy
PLAYER_CONNECTIONS = 16  # keep-alive connections a player process posts moves over
OPERATOR = "bench-operator-token"
GATEWAY_ENV = {  # limits far above what the bench needs: it measures the path, not the limits
    "DOMINO_GATEWAY_MOVES_PER_S": "1000",
    "DOMINO_GATEWAY_MOVE_BURST": "1000",
    "DOMINO_GATEWAY_LOBBY_PER_S": "1000",
    "DOMINO_GATEWAY_LOBBY_BURST": "1000",
    "DOMINO_GATEWAY_MAX_TARGET": "5000",
    "DOMINO_GATEWAY_OPEN_MATCHES_PER_CLIENT": "1000",
    "DOMINO_GATEWAY_WAITING_SEATS_PER_CLIENT": "1000",
    "DOMINO_GATEWAY_MATCHES_PER_ACCOUNT": "1000",
    "DOMINO_GATEWAY_MAX_CONNECTIONS_PER_ADDRESS": "4096",  # every bot runs on loopback
    "DOMINO_GATEWAY_PLAYER_STREAMS_PER_CLIENT": "4096",
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_ACCOUNT": "1000",
    "DOMINO_GATEWAY_HOUSE_MATCHES_PER_CLIENT": "1000",
    "DOMINO_OPERATOR_TOKEN": OPERATOR,  # to cancel each line's matches after it
}


class Clock:
    """When each match last asked a bot to choose; the gaps between are the move latencies."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.gaps: list[float] = []
        self.moves = 0
        self.recording = False

    def tick(self, match: str) -> None:
        now = time.perf_counter()
        before = self.last.get(match)
        self.last[match] = now
        if self.recording:
            self.moves += 1
            if before is not None:
                self.gaps.append(now - before)


class TimedStrategy:
    """The random strategy, noting the time per match (told apart by the players' names)."""

    name = "random"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.inner = RandomStrategy(7)

    def choose(self, view: View) -> Move:
        self.clock.tick(view.players[0])
        return self.inner.choose(view)


class TimedBot(Bot):
    """An SDK bot playing at random, noting the time per match."""

    name = "bench"

    def __init__(self, clock: Clock, match: str) -> None:
        self.clock = clock
        self.match = match
        self.inner = RandomStrategy(7)

    def choose(self, view: View) -> Move:
        self.clock.tick(self.match)
        return self.inner.choose(view)


def run() -> Iterator[dict[str, Any]]:
    """Yield the gateway.http line (SDK bots) and the gateway.accounts line (cheap players)."""
    port = _free_port()
    with redis_server(appendfsync="no", env_var=None) as url:
        settings = Settings(redis_url=url, prefix="bench", log_level="warning")
        logs = tempfile.TemporaryDirectory(prefix="domino-bench-")
        saved = {k: os.environ.get(k) for k in GATEWAY_ENV}
        os.environ.update(GATEWAY_ENV)
        try:
            with logs, Stack(url, settings, pools={}, projector=True, log_dir=logs.name) as stack:
                args = ("gateway", "--host", "127.0.0.1", "--port", str(port))
                profile = _spawn_gateway(stack, args)
                base = f"http://127.0.0.1:{port}"
                _wait_healthy(base)
                pids = {name: p.pid for name, p in stack.processes.items()}
                pids["redis"] = int(redis.Redis.from_url(url).info("server")["process_id"])
                meter = CpuMeter({k.removesuffix("-0"): v for k, v in pids.items()})
                inprocess = uvloop.run(_inprocess(url, settings, meter))
                http = _over_http(base, meter)
                profiled = stack.processes["gateway"] if profile else None
                line = os.environ.get("DOMINO_BENCH_PROFILE_LINE", "accounts")
                cheap = _accounts(base, port, meter, profiled if line != "socket" else None)
                sdk_out = f"{profile}.sdk.txt" if profile and line == "socket" else None
                sockets = _over_sockets(base, meter, profiled if sdk_out else None, sdk_out)
                if profile:
                    stack.stop()
                    print(f"gateway profile: {profile}", file=sys.stderr)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    yield {
        "bench": "gateway.http",
        "matches": MATCHES,
        "moves_per_s": round(http.rate),
        "p50_ms": http.p(0.5),
        "p99_ms": http.p(0.99),
        "inprocess_moves_per_s": round(inprocess.rate),
        "inprocess_p50_ms": inprocess.p(0.5),
        "inprocess_p99_ms": inprocess.p(0.99),
        "ratio": round(http.rate / inprocess.rate, 3),
        "cpu_ms_per_move": {k: v for k, v in http.cpu.items() if k != "gateway:sys"},
        "inprocess_cpu_ms_per_move": {k: v for k, v in inprocess.cpu.items() if ":" not in k},
    }
    yield {
        "bench": "gateway.accounts",
        "matches": MATCHES,
        "accounts": SEATS,
        "connections": PLAYER_PROCESSES * (PLAYER_CONNECTIONS + SEATS),
        "moves_per_s": round(cheap.rate),
        "p50_ms": cheap.p(0.5),
        "p99_ms": cheap.p(0.99),
        "inprocess_moves_per_s": round(inprocess.rate),
        "ratio": round(cheap.rate / inprocess.rate, 3),
        "gateway_cpu_ms_per_move": cheap.cpu.get("gateway"),
        "gateway_sys_ms_per_move": cheap.cpu.pop("gateway:sys", None),  # of which in the kernel
        "cpu_ms_per_move": cheap.cpu,
        "failed_moves": cheap.failed,
    }
    yield {
        "bench": "gateway.socket",
        "matches": MATCHES,
        "accounts": SEATS,
        "connections": SEATS,
        "moves_per_s": round(sockets.rate),
        "inprocess_moves_per_s": round(inprocess.rate),
        "ratio": round(sockets.rate / inprocess.rate, 3),
        "gateway_cpu_ms_per_move": sockets.cpu.get("gateway"),
        "sdk_cpu_ms_per_move": sockets.cpu.get("sdk"),
        "p50_ms": sockets.p(0.5),
        "p99_ms": sockets.p(0.99),
        "failed_moves": sockets.failed,
        "gateway_sys_ms_per_move": sockets.cpu.pop("gateway:sys", None),
        "cpu_ms_per_move": sockets.cpu,
        **({"error": sockets.error} if sockets.error else {}),
    }


def _spawn_gateway(stack: Stack, args: tuple[str, ...]) -> str | None:
    """Start the gateway in the stack, under the profiler if DOMINO_BENCH_PROFILE asks; the
    profile's path, or None."""
    mode = os.environ.get("DOMINO_BENCH_PROFILE")
    if not mode:
        stack.spawn("gateway", *args)
        return None
    out = os.path.abspath(os.environ.get("DOMINO_BENCH_PROFILE_OUT") or "gateway-profile.txt")
    stack.processes["gateway"] = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.profiled", out, mode, "--", *args],
        env=stack.env(),
        stdin=subprocess.DEVNULL,
    )
    return out


RULES = Rules.make("express", target=5000)  # long matches: none ends inside the window


class CpuMeter:
    """CPU seconds spent by this process and by the stack's processes (Linux /proc)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def sample(self) -> dict[str, float]:
        """Each process's CPU seconds so far; the gateway's time in the kernel also apart, as
        ``gateway:sys``."""
        out = {"bots": time.process_time()}
        for name, pid in self.pids.items():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / self.tick
                if name == "gateway":
                    out["gateway:sys"] = int(fields[12]) / self.tick
            except (OSError, IndexError, ValueError):
                continue
        return out


class Measured:
    """Moves a second, the gaps between a match's moves, and CPU ms per move by process."""

    def __init__(
        self,
        rate: float,
        gaps: list[float],
        cpu: dict[str, float],
        failed: int = 0,
        error: str | None = None,
    ) -> None:
        self.rate = rate
        self.gaps = sorted(gaps)
        self.cpu = cpu
        self.failed = failed  # moves not answered 200
        self.error = error  # why a line's players could not play, if they could not

    def p(self, q: float) -> float | None:
        if not self.gaps:
            return None
        return round(1000 * self.gaps[min(len(self.gaps) - 1, int(len(self.gaps) * q))], 2)


async def _measure(clock: Clock, meter: CpuMeter) -> Measured:
    await asyncio.sleep(WARMUP_S)
    clock.recording = True
    before = meter.sample()
    start = time.perf_counter()
    await asyncio.sleep(MEASURE_S)
    elapsed = time.perf_counter() - start
    after = meter.sample()
    clock.recording = False
    moves = max(clock.moves, 1)
    cpu = {k: round(1000 * (after[k] - before[k]) / moves, 3) for k in after if k in before}
    return Measured(clock.moves / elapsed, clock.gaps, cpu)


async def _inprocess(url: str, settings: Settings, meter: CpuMeter) -> Measured:
    redis = node_client(url)
    client = service_client(redis, settings, sender="bench")
    clock = Clock()
    transport = RedisTransport(redis, Keys(settings.prefix, settings.partitions))
    worker = BotWorker(settings, transport, TimedStrategy(clock), "random", "bench-bots")
    task = asyncio.create_task(worker.run())
    try:
        for i in range(MATCHES):
            names = [f"house{i}"] + [f"house{i}-{k}" for k in range(1, SEATS)]
            await client.create_match(RULES, ["random"] * SEATS, names=names)
        return await _measure(clock, meter)
    finally:
        worker.stop()
        await task
        await redis.aclose()


def _over_http(base: str, meter: CpuMeter) -> Measured:
    """The same matches, every seat an SDK bot; the bots run in BOT_PROCESSES processes (all
    seats of a match in the same one), each bot with its own HTTP client, as separate bots
    would be."""
    rules = {"family": "express", "players": SEATS, "target": RULES.target}
    tokens: list[tuple[str, str]] = []
    with httpx.Client(base_url=base, timeout=30.0) as http:
        for _ in range(MATCHES):
            r = http.post("/api/v1/matches", json={"seats": [None] * SEATS, "rules": rules})
            match_id = r.json()["match"]["match_id"]
            for _ in range(SEATS):
                joined = http.post(f"/api/v1/matches/{match_id}/join", json={})
                tokens.append((match_id, joined.json()["token"]))
    by_match = [tokens[i : i + SEATS] for i in range(0, len(tokens), SEATS)]
    shares = [[t for m in by_match[k::BOT_PROCESSES] for t in m] for k in range(BOT_PROCESSES)]
    try:
        return _external(_bots, [(base, share) for share in shares], "bots", meter)
    finally:
        _cancel(base, [m[0][0] for m in by_match])


def _accounts(
    base: str, port: int, meter: CpuMeter, profiled: subprocess.Popen[bytes] | None
) -> Measured:
    """The same matches played by SEATS accounts, each holding one seat of every match and
    playing them all over one play stream, with cheap clients (see :func:`_players`)."""
    tokens, matches = _account_matches(base)
    if PLAYER_PROCESSES != 1:
        raise ValueError("every account's seats are played by one process")
    try:
        return _external(_players, [(port, tokens)], "players", meter, profiled)
    finally:
        _cancel(base, matches)


def _over_sockets(
    base: str, meter: CpuMeter, profiled: subprocess.Popen[bytes] | None, sdk_out: str | None
) -> Measured:
    """The same workload as :func:`_accounts` (new accounts, new matches), played by the SDK's
    account bots over the account's socket, all in one process (see :func:`_sdk_bots`)."""
    tokens, matches = _account_matches(base)
    try:
        return _external(_sdk_bots, [(base, tokens, sdk_out)], "sdk", meter, profiled)
    finally:
        _cancel(base, matches)


def _account_matches(base: str) -> tuple[list[str], list[str]]:
    """SEATS new accounts and MATCHES matches, each account holding one seat of every match:
    the accounts' tokens and the matches' ids."""
    rules = {"family": "express", "players": SEATS, "target": RULES.target}
    stems = ("alice", "bruno", "carla", "dmitri", "elena", "farid")[:SEATS]
    names = [f"{n}{random.randrange(16**6):06x}" for n in stems]  # new ones for each line
    matches: list[str] = []
    with httpx.Client(base_url=base, timeout=30.0) as http:
        tokens = [http.post("/api/v1/accounts", json={"name": n}).json()["token"] for n in names]
        auth = [{"authorization": f"Bearer {t}"} for t in tokens]
        for _ in range(MATCHES):
            body = {"seats": [None] * SEATS, "rules": rules}
            r = http.post("/api/v1/matches", json=body, headers=auth[0])
            match_id = r.json()["match"]["match_id"]
            for seat in range(SEATS):
                joined = http.post(
                    f"/api/v1/matches/{match_id}/join", json={"seat": seat}, headers=auth[seat]
                )
                joined.raise_for_status()
            matches.append(match_id)
    return tokens, matches


def _external(
    target: Any,
    args: list[tuple[Any, ...]],
    kind: str,
    meter: CpuMeter,
    profiled: subprocess.Popen[bytes] | None = None,
) -> Measured:
    """Run ``target(*a, start_at, results)`` in a process for each ``a`` of ``args``; measure
    from ``start_at`` for MEASURE_S: moves a second, their gaps and CPU per move by process
    (the processes started here summed as ``kind``)."""
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[tuple[Any, ...]] = context.Queue()
    start_at = time.time() + BOT_STARTUP_S + WARMUP_S
    workers = [
        context.Process(target=target, args=(*a, start_at, results), daemon=True) for a in args
    ]
    for w in workers:
        w.start()
    meter = CpuMeter({**meter.pids, **{f"{kind}-{k}": w.pid or 0 for k, w in enumerate(workers)}})
    time.sleep(max(0.0, start_at - time.time()))
    if profiled is not None:
        profiled.send_signal(signal.SIGUSR1)
    before = meter.sample()
    time.sleep(MEASURE_S)
    after = meter.sample()
    if profiled is not None:
        profiled.send_signal(signal.SIGUSR2)
    moves, gaps, failed, errors = 0, [], 0, []
    for _ in workers:
        n, g, f, *error = results.get(timeout=60)
        moves += n
        gaps += g
        failed += f
        errors += [e for e in error if e]
    for w in workers:
        w.join(timeout=10)
    cpu: dict[str, float] = {}
    for k in after:
        if k in before and k != "bots":
            name = kind if k.startswith(f"{kind}-") else k
            cpu[name] = cpu.get(name, 0.0) + 1000 * (after[k] - before[k]) / max(moves, 1)
    rounded = {k: round(v, 3) for k, v in cpu.items()}
    return Measured(moves / MEASURE_S, gaps, rounded, failed, "; ".join(errors) or None)


def _cancel(base: str, matches: list[str]) -> None:
    """The operator ends a line's matches, so the next line has the stack to itself."""
    with httpx.Client(base_url=base, timeout=30.0) as http:
        for match_id in matches:
            http.delete(
                f"/api/v1/matches/{match_id}", headers={"authorization": f"Bearer {OPERATOR}"}
            )


def _bots(
    base: str,
    tokens: list[tuple[str, str]],
    start_at: float,
    results: multiprocessing.Queue[tuple[int, list[float], int]],
) -> None:
    """A bot process: play its seats, record from ``start_at`` for MEASURE_S, report."""
    configure("warning")  # to stderr: stdout carries only the bench's JSON lines
    results.put((*uvloop.run(_play(base, tokens, start_at)), 0))


async def _play(
    base: str, tokens: list[tuple[str, str]], start_at: float
) -> tuple[int, list[float]]:
    clock = Clock()
    plays = [TimedBot(clock, m).play(base, t, transport="http") for m, t in tokens]  # its line
    tasks = [asyncio.create_task(play) for play in plays]
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        clock.recording = True
        await asyncio.sleep(MEASURE_S)
        clock.recording = False
        return clock.moves, clock.gaps
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Legal(msgspec.Struct):
    legal: list[msgspec.Raw]


class _Turn(msgspec.Struct):
    id: int
    view: _Legal


class _SeatTurn(msgspec.Struct):
    match_id: str
    seat: int
    line: _Turn


_SEAT_TURN = msgspec.json.Decoder(_SeatTurn)
_IS_TURN = b'"line":{"type":"turn"'


def _players(
    port: int,
    tokens: list[str],
    start_at: float,
    results: multiprocessing.Queue[tuple[int, list[float], int]],
) -> None:
    """A process of cheap players: each account's play stream, moves over a few connections;
    record from ``start_at`` for MEASURE_S, report."""
    configure("warning")
    results.put(uvloop.run(_cheap(port, tokens, start_at)))


async def _cheap(port: int, tokens: list[str], start_at: float) -> tuple[int, list[float], int]:
    """Play every seat of ``tokens``' accounts: on each turn line, post a random legal move
    (its JSON as the view lists it) with the turn's id as the Idempotency-Key."""
    clock = Clock()
    pool = http1.Pool([await http1.connect("127.0.0.1", port) for _ in range(PLAYER_CONNECTIONS)])
    answered: dict[tuple[str, int], int] = {}  # a turn line may come twice: answer it once
    pending: set[asyncio.Task[tuple[int, bytes]]] = set()
    failed = 0
    choose = random.Random(7).choice

    def done(task: asyncio.Task[tuple[int, bytes]]) -> None:
        nonlocal failed
        pending.discard(task)
        if task.cancelled() or task.exception() is not None or task.result()[0] != 200:
            failed += clock.recording

    def player(token: str) -> Any:
        def on_line(line: bytes) -> None:
            if _IS_TURN not in line:
                return
            turn = _SEAT_TURN.decode(line)
            version = turn.line.id
            if answered.get((turn.match_id, turn.seat), -1) >= version:
                return
            answered[(turn.match_id, turn.seat)] = version
            clock.tick(turn.match_id)
            move = choose(turn.line.view.legal)
            data = http1.request(
                "POST",
                f"/api/v1/matches/{turn.match_id}/seats/{turn.seat}/moves",
                token,
                move,
                {"idempotency-key": str(version)},
            )
            task = asyncio.create_task(pool.send(data))
            pending.add(task)
            task.add_done_callback(done)

        return on_line

    path = "/api/v1/account/play?events=minimal"  # turns and ends: all a player needs
    streams = [
        await http1.open_stream("127.0.0.1", port, http1.request("GET", path, t), player(t))
        for t in tokens
    ]
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        clock.recording = True
        await asyncio.sleep(MEASURE_S)
        clock.recording = False
        return clock.moves, clock.gaps, failed
    finally:
        for transport, _ in streams:
            transport.close()


class _Failures(logging.Handler):
    """Counts the moves the SDK's session logs as not taken (rejected, or refused) while the
    clock records."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(logging.WARNING)
        self.clock = clock
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.clock.recording and "move" in record.getMessage():
            self.count += 1


class _SeatBot(Bot):
    """One seat of an SDK account bot: a random legal move (as the cheap players choose),
    noting the time per match."""

    def __init__(self, clock: Clock, match: str, choose: Any) -> None:
        self.clock = clock
        self.match = match
        self.pick = choose

    def choose(self, view: SdkView) -> SdkMove:
        self.clock.tick(self.match)
        move: SdkMove = self.pick(view.legal)
        return move


class _AccountBot(_SeatBot):
    """The account's bot: it hands each seat to a :class:`_SeatBot` of its match."""

    def for_match(self, match_id: str, seat: int) -> Bot:
        return _SeatBot(self.clock, match_id, self.pick)


def _sdk_bots(
    base: str,
    tokens: list[str],
    sdk_out: str | None,
    start_at: float,
    results: multiprocessing.Queue[tuple[Any, ...]],
) -> None:
    """A process of SDK account bots, one per token, each over its account's socket; record
    from ``start_at`` for MEASURE_S, report (sampled to ``sdk_out`` if given)."""
    configure("warning")
    results.put(uvloop.run(_play_accounts(base, tokens, start_at, sdk_out)))


async def _play_accounts(
    base: str, tokens: list[str], start_at: float, sdk_out: str | None
) -> tuple[int, list[float], int, str | None]:
    clock = Clock()
    failures = _Failures(clock)
    logging.getLogger("domino_sdk.session").addHandler(failures)
    choose = random.Random(7).choice
    bots = [_AccountBot(clock, "", choose) for _ in tokens]
    tasks = [
        asyncio.create_task(bot.play_account(base, token, transport="socket"))
        for bot, token in zip(bots, tokens, strict=True)
    ]
    sampler = profiled.Sampler() if sdk_out else None
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        clock.recording = True
        if sampler is not None:
            sampler.start()
        await asyncio.sleep(MEASURE_S)
        if sampler is not None:
            sampler.stop()
        clock.recording = False
        ended = [t for t in tasks if t.done()]
        error = next((repr(t.exception()) for t in ended if t.exception() is not None), None)
        return clock.moves, clock.gaps, failures.count, error
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if sampler is not None and sdk_out is not None:
            with open(sdk_out, "w") as f:
                f.write(sampler.report())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_healthy(base: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=1.0).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the gateway at {base} did not come up in {timeout} s")
        time.sleep(0.1)
