"""The ``domino`` command: play, replay, verify, export and import matches; run the service."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import msgspec
from redis.exceptions import RedisError
from rich.console import Console

from engine import fairness
from engine.game import evolve
from engine.state import MatchState
from engine.strategy import STRATEGIES, make_strategy
from engine.verify import verify
from engine.views import redact, view_for
from events.codec import JSON
from events.envelope import Envelope
from events.model import RoundStarted
from services.cli import jsonl
from services.cli.args import CliError, rules_args, rules_from
from services.cli.clients import service_client
from services.cli.demo import play_demo, report
from services.cli.render import describe, score_line, shown
from services.cli.settings import cmd_settings
from services.cli.supervisor import Stack
from services.config import ConfigError, Settings
from services.core.local_match import play_local_match
from services.gateway.config import GatewayConfigError, GatewaySettings
from services.logs import configure
from services.metrics import Exporter
from services.projections.queries import Queries
from services.redis.connection import Client, connect, without_password
from services.redis.embedded import embedded_data_dir, redis_url, service_urls
from services.redis.lane import close_lane
from services.redis.servers import RedisUnavailable
from services.store import Archive, EventStore, MatchSource, open_archive, open_store
from services.store.base import ConcurrencyError, NewEvent, StoreError
from services.store.keys import Keys

if TYPE_CHECKING:  # the services' apps pull in FastStream: only the services import it
    from faststream import FastStream

PLUGINS = (
    "services.cli.gateway_commands",
    "services.cli.status",
    "services.cli.bot_commands",
    "services.cli.tournament_commands",
    "services.cli.acl_commands",
)
"""Modules that add subcommands: each has ``register(subparsers)``."""


def cmd_play(args: argparse.Namespace) -> int:
    """Play one match in this process between strategies, printed event by event."""
    rules = rules_from(args)
    names = args.seats.split(",") if args.seats else ["greedy", "random"] * 2
    names = (names * rules.players)[: rules.players]
    try:
        bots = [
            make_strategy(n, None if args.seed is None else args.seed + i)
            for i, n in enumerate(names)
        ]
    except ValueError as e:
        raise CliError(str(e)) from None

    def show(state: MatchState, envelope: Envelope) -> None:
        for line in describe(state, envelope.event):
            print(line)

    state, log = play_local_match(rules, bots, seed=args.seed, on_event=show)
    print(f"{len(log)} events, {state.round} rounds: {score_line(state, state.scores)}")
    if args.output:
        jsonl.write(args.output, log)
        print(f"log written to {args.output}; replay it with: domino replay --file {args.output}")
    return 0


def _load(args: argparse.Namespace) -> list[Envelope]:
    if args.file:
        try:
            return jsonl.read(args.file, args.match_id)
        except (OSError, jsonl.LogFormatError) as e:
            raise CliError(f"{args.file}: {e}") from None
    if not args.match_id:
        raise CliError("give a match id or --file")
    return asyncio.run(_read_match(args.match_id))


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as e:
        raise CliError(str(e)) from None


async def _open(url: str, settings: Settings) -> EventStore:
    try:
        return await open_store(
            url,
            cluster=settings.cluster or "auto",
            partitions=settings.partitions,
            prefix=settings.prefix,
        )
    except RedisError as e:
        raise CliError(f"cannot reach Redis at {without_password(url)}: {e}") from None


def _archive(settings: Settings) -> Archive:
    try:
        return open_archive(settings.archive_at(), settings.archive_s3_endpoint)
    except StoreError as e:
        raise CliError(str(e)) from None


async def _read_match(match_id: str) -> list[Envelope]:
    """A match's log, from Redis or (once it has moved there) from the archive."""
    settings = _settings()
    with redis_url(settings) as url:
        store = await _open(url, settings)
        try:
            records = await MatchSource(store, _archive(settings)).read(match_id)
        except StoreError as e:
            raise CliError(str(e)) from None
        finally:
            await store.aclose()
    if not records:
        raise CliError(f"no match {match_id!r} in this store")
    try:
        return jsonl.parse([r.data for r in records], match_id)
    except jsonl.LogFormatError as e:
        raise CliError(f"match {match_id}: stored {e}") from None


def cmd_export(args: argparse.Namespace) -> int:
    """Write a stored match to a JSON-lines file."""
    log = asyncio.run(_read_match(args.match_id))
    try:
        jsonl.write(args.output, log)
    except OSError as e:
        raise CliError(f"{args.output}: {e}") from None
    print(f"exported {len(log)} events of match {args.match_id} to {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Store a match from a JSON-lines file, all at once, only if it is not there yet."""
    try:
        log = jsonl.read(args.file)
    except (OSError, jsonl.LogFormatError) as e:
        raise CliError(f"{args.file}: {e}") from None
    return asyncio.run(_import(log))


async def _import(log: list[Envelope]) -> int:
    settings = _settings()
    match_id = log[0].match_id
    with redis_url(settings) as url:
        store = await _open(url, settings)
        try:
            if await _archive(settings).exists(match_id):
                raise ConcurrencyError(match_id, 0, len(log))
            events = [NewEvent(str(e.event.__struct_config__.tag), JSON.encode(e)) for e in log]
            result = await store.append(match_id, events, 0, f"import:{match_id}")
            if result.duplicate:
                raise ConcurrencyError(match_id, 0, len(log))
        except ConcurrencyError:
            raise CliError(f"match {match_id} already exists: nothing imported") from None
        except StoreError as e:
            raise CliError(str(e)) from None
        finally:
            await store.aclose()
    print(f"imported {len(log)} events of match {match_id}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Print a match event by event, up to ``--at``, as everyone or as one seat saw it."""
    log = _load(args)
    at = len(log) if args.at is None else args.at
    if not 0 < at <= len(log):
        raise CliError(f"--at must be between 1 and {len(log)}")
    first, *rest = log[:at]
    state = _replay_one(None, first, args.seat, args.json)
    for env in rest:
        state = _replay_one(state, env, args.seat, args.json)
    if args.json:
        sys.stdout.buffer.write(JSON.encode(view_for(state, args.seat)) + b"\n")
    else:
        print(f"at version {state.version}: {score_line(state, state.scores)}")
    sys.stdout.flush()
    return 0


def _replay_one(
    state: MatchState | None, env: Envelope, seat: int | None, as_json: bool
) -> MatchState:
    """Fold one event and print it as everyone, or as ``seat``, saw it; return the new state."""
    state = evolve(state, env.event)
    if seat is not None and not 0 <= seat < state.rules.players:
        raise CliError(f"seat {seat} does not exist in this match")
    event = env.event if seat is None else redact(env.event, seat)
    if as_json:
        out = Envelope(
            match_id=env.match_id,
            version=env.version,
            command_id=env.command_id,
            ts=env.ts,
            event=event,
        )
        sys.stdout.buffer.write(JSON.encode(out) + b"\n")
    else:
        for line in describe(state, event):
            print(f"{env.version:>5} {line}")
    return state


def cmd_verify(args: argparse.Namespace) -> int:
    """Re-fold a match through today's engine; exit 1 naming the first event that differs.
    With ``--fairness``, then check every round's deal against its commitment (F1)."""
    log = _load_for_fairness(args) if args.fairness else _load(args)
    events = [e.event for e in log]
    hidden = any(isinstance(e, RoundStarted) and fairness.hidden(e) for e in events)
    lawful = True
    if hidden:
        print("rules: not checked: the deals are hidden (a log as a seat or spectator saw it)")
    else:
        problem = verify(events)
        lawful = problem is None
        if problem is not None:
            print(f"version {problem.version}: {problem.message}", file=sys.stderr)
        else:
            print(f"ok: {len(log)} events agree with the rules")
    if not args.fairness:
        return 0 if lawful else 1
    sys.stdout.flush()  # the round lines follow the rules' verdict, whichever stream it is on
    public = args.public or hidden
    checked = fairness.rounds(events, public=public)
    how = "as a spectator sees it" if public else "the whole log"
    for r in checked:
        seal = f"commitment {r.commitment[:12]}…" if r.commitment else "no commitment"
        if r.problem is not None:
            print(f"round {r.round}: unfair: {r.problem}", file=sys.stderr)
            return 1
        if r.revealed:
            print(f"round {r.round}: deal matches {seal}")
        else:
            print(f"round {r.round}: not revealed yet ({seal}): the round is being played")
    print(f"ok: every revealed deal checks out ({how})")
    return 0 if lawful else 1


def _load_for_fairness(args: argparse.Namespace) -> list[Envelope]:
    """The log to check; a file of events as a seat or spectator saw them (the deals hidden,
    so they do not fold) is read too, for the public check."""
    try:
        return _load(args)
    except CliError:
        if not args.file:
            raise
        try:
            log = jsonl.read(args.file, args.match_id, fold=False)
        except (OSError, jsonl.LogFormatError):
            raise CliError(f"{args.file}: not a match log") from None
        if not any(isinstance(e.event, RoundStarted) and fairness.hidden(e.event) for e in log):
            raise  # a whole log that does not fold: the first error says why
        return log


def _run_service(
    settings: Settings, group: str, build: Callable[[str, bool, Exporter], FastStream]
) -> int:
    """Run the app ``build(url, cluster, exporter)`` makes until SIGINT or SIGTERM. Its
    exporter (on DOMINO_METRICS_PORT, if set) answers from the start: while the service waits
    for its Redis, /healthz says it runs and /readyz that it is not ready yet."""
    from services.redis.apps import topology, tune_gc

    url = _service_url(settings)
    exporter = Exporter.of(settings, group)
    tune_gc()

    async def run() -> None:
        try:
            await exporter.start()
        except OSError as e:
            raise CliError(f"cannot serve the metrics on port {exporter.port}: {e}") from None
        try:
            app = build(url, await topology(url, settings.cluster), exporter)
            await app.run()
        finally:
            await exporter.stop()

    try:
        import uvloop

        uvloop.run(run())
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        asyncio.run(run())
    return 0


def _service_url(settings: Settings) -> str:
    if not settings.redis_url:
        raise CliError("set REDIS_URL (or use 'domino up', which starts everything)")
    return settings.redis_url


def cmd_referee(args: argparse.Namespace) -> int:
    """Run one referee until SIGINT or SIGTERM."""
    settings = _settings()
    configure(settings.log_level, settings.log_format, service="referee")
    from services.referee.app import referee_app

    return _run_service(
        settings,
        "referee",
        lambda url, cluster, exporter: referee_app(
            url, settings, args.name, cluster=cluster, exporter=exporter
        ),
    )


def cmd_bots(args: argparse.Namespace) -> int:
    """Run bot workers: in this process, or ``--workers`` child processes."""
    settings = _settings()
    url = _service_url(settings)
    if args.workers > 1:
        stack = Stack(url, settings, referees=0, pools={}, projector=False)
        for k in range(args.workers):
            extra = ["--seed", str(args.seed + k)] if args.seed is not None else []
            name = f"{args.name}-{k}" if args.name else None
            stack.spawn(
                f"bots-{k}",
                "bots",
                "--strategy",
                args.strategy,
                "--workers",
                "1",
                *(["--pool", args.pool] if args.pool else []),
                *(["--name", name] if name else []),
                *extra,
            )
        return _supervise(stack)
    configure(settings.log_level, settings.log_format, service="bots")
    from services.bots.app import bots_app

    return _run_service(
        settings,
        "bots",
        lambda url, cluster, exporter: bots_app(
            url,
            settings,
            args.strategy,
            args.pool,
            args.name,
            args.seed,
            cluster=cluster,
            exporter=exporter,
        ),
    )


def cmd_projector(args: argparse.Namespace) -> int:
    """Run a projector (its share of the partitions, beside any others) until SIGINT or
    SIGTERM."""
    settings = _settings()
    configure(settings.log_level, settings.log_format, service="projector")
    from services.projections.app import projector_app

    return _run_service(
        settings,
        "projector",
        lambda url, cluster, exporter: projector_app(
            url, settings, args.name, cluster=cluster, exporter=exporter
        ),
    )


def _supervise(stack: Stack) -> int:
    """Wait on the children until Ctrl-C or SIGTERM, or until one of them dies."""
    if stack.metrics_ports:
        host = stack.settings.metrics_host
        ports = ", ".join(f"{name} :{port}" for name, port in stack.metrics_ports.items())
        print(f"metrics, /healthz and /readyz on {host}: {ports}")
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    try:
        while not stopping:
            dead = stack.check()
            if dead:
                print(f"domino: {', '.join(dead)} exited; stopping", file=sys.stderr)
                return 1
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
    return 0


def _pools(spec: str) -> dict[str, int]:
    pools: dict[str, int] = {}
    for part in filter(None, spec.split(",")):
        name, _, count = part.partition("=")
        if name not in STRATEGIES:
            raise CliError(f"unknown strategy {name!r}: choose from {', '.join(STRATEGIES)}")
        pools[name] = int(count or 1)
    return pools


def cmd_up(args: argparse.Namespace) -> int:
    """Run Redis (embedded unless REDIS_URL), referees, bots and projector until Ctrl-C."""
    settings = _settings()
    if args.data_dir is not None:
        settings = msgspec.structs.replace(settings, data_dir=args.data_dir)
    pools = _pools(args.bots)
    # an option is its variable, set for this process and the ones it starts
    for name, value in (("DOMINO_GATEWAY_PORT", args.port), ("DOMINO_GATEWAY_HOST", args.host)):
        if value is not None:
            os.environ[name] = str(value)
    try:  # read before anything starts: a bad gateway setting stops nothing half-started
        gateway = GatewaySettings.from_env()
    except GatewayConfigError as e:
        raise CliError(str(e)) from None
    if args.cluster:
        settings = msgspec.structs.replace(settings, cluster=True)
    with service_urls(settings, cluster=args.cluster) as urls:
        url = urls.operator
        stack = Stack(
            url,
            settings,
            referees=args.referees,
            projectors=args.projectors,
            pools=pools,
            gateway=args.gateway,
            users=urls.users,
        )
        stack.start()
        print(
            f"domino service up on {'a Redis Cluster at ' if args.cluster else ''}"
            f"{without_password(url)}  (Ctrl-C stops it; other domino commands started here use"
            " it, and its full URL is in the data dir's server.url)"
        )
        if args.gateway:
            print(
                f"gateway for external bots on http://{gateway.host}:{gateway.port}/api/v1 "
                "(docs/protocol.md)"
            )
        return _supervise(stack)


def cmd_demo(args: argparse.Namespace) -> int:
    """Host a series of matches between house bots with a live progress bar, served to the
    browser by a gateway while they play."""
    if not 0 <= args.pace_ms <= 60_000:
        raise CliError("--pace-ms is 0 to 60000 milliseconds")
    settings = msgspec.structs.replace(_settings(), bot_pace_ms=args.pace_ms)
    try:
        gateway = GatewaySettings.from_env()
    except GatewayConfigError as e:
        raise CliError(str(e)) from None
    port = _port_or_free(gateway.host, gateway.port) if args.gateway else gateway.port
    os.environ["DOMINO_GATEWAY_PORT"] = str(port)  # the gateway child reads it
    console = Console()
    with service_urls(settings) as urls:
        url = urls.operator
        log_dir = embedded_data_dir(settings).parent / "logs"
        console.print(
            f"Redis at {without_password(url)}; referee, bot workers and projector starting "
            f"(logs in {log_dir})"
        )
        if args.gateway:
            console.print(f"Watch the matches as they play: http://{gateway.host}:{port}/")
        with Stack(
            url,
            settings,
            pools={"random": 1, "greedy": 1},
            log_dir=log_dir,
            gateway=args.gateway,
            users=urls.users,
        ):
            start = time.monotonic()
            try:
                tracked = asyncio.run(play_demo(url, settings, args.matches, console, args.timeout))
            except TimeoutError as e:
                raise CliError(str(e)) from None
            pages = f"http://{gateway.host}:{gateway.port}" if args.gateway else None
            report(console, tracked, time.monotonic() - start, pages)
    return 0


def _port_or_free(host: str, port: int) -> int:
    """``port`` if it can be listened on at ``host``, else a free one the system picks."""
    for candidate in (port, 0):
        with socket.socket() as s:
            try:
                s.bind((host, candidate))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise CliError(f"no port to serve the pages on at {host}")


async def _with_redis(settings: Settings, work: Callable[[Client], Awaitable[int]]) -> int:
    with redis_url(settings) as url:
        try:
            redis = await connect(url, cluster=settings.cluster or "auto")
        except RedisError as e:
            raise CliError(f"cannot reach Redis at {without_password(url)}: {e}") from None
        try:
            return await work(redis)
        except RedisError as e:
            raise CliError(f"cannot reach Redis at {without_password(url)}: {e}") from None
        finally:
            await close_lane(redis)
            await redis.aclose()


def cmd_create(args: argparse.Namespace) -> int:
    """Send a CreateMatch command and print the new match id."""
    settings = _settings()
    rules = rules_from(args)
    seats = [None if s == "external" else s for s in args.seats.split(",")]
    unknown = sorted({s for s in seats if s is not None and s not in STRATEGIES})
    if unknown:
        known = ", ".join(sorted(STRATEGIES))
        raise CliError(f"no house bot pool {', '.join(unknown)}: the pools are {known}")

    from services.bots.worker import pool_served

    async def work(redis: Client) -> int:
        for pool in dict.fromkeys(s for s in seats if s is not None):
            if not await pool_served(redis, Keys(settings.prefix, settings.partitions), pool):
                print(f"warning: no worker of the pool {pool!r} is running yet", file=sys.stderr)
        client = service_client(redis, settings)
        print(await client.create_match(rules, seats, deadline_ms=args.deadline_ms))
        return 0

    return asyncio.run(_with_redis(settings, work))


def cmd_matches(args: argparse.Namespace) -> int:
    """Print the live (or finished) matches from the summary projection."""
    settings = _settings()

    async def work(redis: Client) -> int:
        queries = Queries(redis, settings)
        if args.limit < 1:
            raise CliError("--limit must be at least 1")
        for summary in await queries.matches(finished=args.finished, limit=args.limit):
            scores = "-".join(str(x) for x in summary.scores)
            print(
                f"{summary.match_id}  {summary.status:<8} {summary.family:<8} "
                f"round {summary.round:<3} {scores:<12} {', '.join(map(shown, summary.players))}"
            )
        return 0

    return asyncio.run(_with_redis(settings, work))


def cmd_results(args: argparse.Namespace) -> int:
    """Print results by account, house bot pool and guest over every finished match."""
    settings = _settings()

    async def work(redis: Client) -> int:
        lines = await Queries(redis, settings).results()
        print(
            f"{'player':<20} {'id':<20} {'played':>6} {'won':>5} {'for':>7} {'against':>8} "
            f"{'aborted':>7} {'cancelled':>9}"
        )
        for r in lines:
            who = "guest (unrated)" if r.kind == "guest" else r.key
            print(
                f"{shown(r.name):<20} {shown(who):<20} {r.played:>6} {r.won:>5} "
                f"{r.points_for:>7} {r.points_against:>8} {r.aborted:>7} {r.cancelled:>9}"
            )
        return 0

    return asyncio.run(_with_redis(settings, work))


def cmd_projections(args: argparse.Namespace) -> int:
    """Rebuild every projection from the match logs."""
    settings = _settings()
    from services.projections.app import every_projection

    async def work(redis: Client) -> int:
        applied = await every_projection(redis, settings).rebuild()
        print(f"rebuilt the projections from {applied} log entries")
        return 0

    return asyncio.run(_with_redis(settings, work))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="domino", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("play", help="play one match between bots in this process")
    rules_args(p)
    p.add_argument("--seats", help=f"strategies by seat, comma-separated ({', '.join(STRATEGIES)})")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("-o", "--output", help="also write the match log here (JSON lines)")
    p.set_defaults(func=cmd_play)

    for name, func, text in (
        ("replay", cmd_replay, "print a match event by event"),
        ("verify", cmd_verify, "check a match log against today's rules"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("match_id", nargs="?", help="the match, read from Redis")
        p.add_argument("--file", help="read an exported log instead (no Redis needed)")
        if name == "verify":
            p.add_argument(
                "--fairness",
                action="store_true",
                help="then check every round's deal against its commitment (docs/fairness.md)",
            )
            p.add_argument(
                "--public",
                action="store_true",
                help="check the deals only from what a spectator sees (automatic when hidden)",
            )
        if name == "replay":
            p.add_argument("--at", type=int, help="stop at this version (event number)")
            p.add_argument("--seat", type=int, help="show only what this seat could see")
            p.add_argument("--json", action="store_true", help="JSON lines for machines")
        p.set_defaults(func=func)
    p = sub.add_parser("demo", help="host a series of matches between house bots, live")
    p.add_argument("--matches", type=int, default=8)
    p.add_argument("--timeout", type=float, default=300.0, help="give up after this many s")
    p.add_argument(
        "--pace-ms", type=int, default=100, help="bots wait this long a turn (0: full speed)"
    )
    p.add_argument(
        "--gateway",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the pages while the matches play",
    )
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("up", help="run the whole service (Redis, referee, bots) until Ctrl-C")
    p.add_argument("--port", type=int, help="the gateway's port (DOMINO_GATEWAY_PORT; 8080)")
    p.add_argument(
        "--host", help="the address the gateway listens on (DOMINO_GATEWAY_HOST; 127.0.0.1)"
    )
    p.add_argument("--data-dir", help="where the embedded Redis keeps its files (DOMINO_DATA_DIR)")
    p.add_argument("--referees", type=int, default=1)
    p.add_argument(
        "--projectors",
        type=int,
        default=1,
        help="projector processes, sharing the partitions by lease (docs/architecture.md)",
    )
    p.add_argument("--bots", default="random=1,greedy=1,search=1", help="pool=workers,...")
    p.add_argument(
        "--gateway",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the HTTP gateway for external bots too",
    )
    p.add_argument(
        "--cluster",
        action="store_true",
        help="run on a local Redis Cluster (3 masters with a replica each) instead of one node",
    )
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("referee", help="run a referee (needs REDIS_URL)")
    p.add_argument("--name", help="consumer name (default: host and pid)")
    p.set_defaults(func=cmd_referee)

    p = sub.add_parser("bots", help="run house bot workers for one strategy (needs REDIS_URL)")
    p.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    p.add_argument("--pool", help="the pool of seats they play (default: the strategy name)")
    p.add_argument("--workers", type=int, default=1, help="worker processes")
    p.add_argument("--name", help="consumer name (default: host and pid)")
    p.add_argument("--seed", type=int, default=None)
    p.set_defaults(func=cmd_bots)

    p = sub.add_parser("projector", help="keep the projections up to date (needs REDIS_URL)")
    p.add_argument("--name", help="lease holder name (default: host and pid)")
    p.set_defaults(func=cmd_projector)

    p = sub.add_parser("projections", help="rebuild every projection from the logs")
    p.add_argument("action", choices=("rebuild",))
    p.set_defaults(func=cmd_projections)

    p = sub.add_parser("create", help="open a match for house bots or external players")
    rules_args(p)
    p.add_argument(
        "--seats",
        required=True,
        help="bot pool by seat; 'external' for a seat nobody hosts here (its turns "
        "time out with --deadline-ms); outside bots join through the gateway's lobby",
    )
    p.add_argument("--deadline-ms", type=int, default=0, help="each turn's time limit")
    p.set_defaults(func=cmd_create)

    p = sub.add_parser("matches", help="list live and finished matches")
    p.add_argument("--finished", action="store_true")
    p.add_argument("--limit", type=int, default=50, help="the latest N (default 50)")
    p.set_defaults(func=cmd_matches)

    p = sub.add_parser(
        "results", help="results by account, house bot pool and guest, over every finished match"
    )
    p.set_defaults(func=cmd_results)

    p = sub.add_parser("settings", help="print every setting's variable, default and meaning")
    p.set_defaults(func=cmd_settings)

    for module in PLUGINS:  # the gateway, outside bots and tournaments
        try:
            plugin = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is None or not module.startswith(e.name):
                raise  # the plugin exists but something it needs does not
            continue
        plugin.register(sub)

    p = sub.add_parser("export", help="write a stored match to a JSON-lines file")
    p.add_argument("match_id")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="store a match from a JSON-lines file")
    p.add_argument("file")
    p.set_defaults(func=cmd_import)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``domino`` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, RedisUnavailable) as e:
        print(f"domino: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader (``| head``, say) has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
