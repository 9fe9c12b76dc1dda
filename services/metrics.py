"""Prometheus metrics, and the small HTTP server each process answers them on.

Every metric of the service is named here, once (docs/operations.md lists them). A process
registers the groups it moves (:func:`register`) in prometheus_client's default registry, so
its ``/metrics`` shows its own metrics and the client's process metrics, not the others' at
zero. The hot loops count per batch: a labelled child is looked up once, when the service
starts, and a batch's latencies go into a histogram together (:func:`observe_many`).

:class:`Exporter` answers ``GET /metrics``, ``/healthz`` and ``/readyz`` on
``DOMINO_METRICS_PORT`` (none when it is 0). It starts before the service waits for Redis, so
a process that cannot reach Redis still says so: ``/healthz`` 200 (it runs), ``/readyz`` 503
with the reason, until the service hands it a readiness check that passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.registry import Collector

from services.config import Settings

log = structlog.get_logger()

# a `_created` series beside every counter and histogram says nothing we use
disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped in prometheus_client)

LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram buckets, in seconds: half a millisecond to ten seconds."""


def _counter(name: str, meaning: str, labels: Sequence[str] = ()) -> Counter:
    return Counter(name, meaning, labels, registry=None)


def _gauge(name: str, meaning: str, labels: Sequence[str] = ()) -> Gauge:
    return Gauge(name, meaning, labels, registry=None)


def _histogram(name: str, meaning: str, labels: Sequence[str] = ()) -> Histogram:
    return Histogram(name, meaning, labels, registry=None, buckets=LATENCY)


# -- the referee -------------------------------------------------------------------------------

MOVES_DECIDED = _counter(
    "domino_moves_decided_total", "Events appended for commands, by partition", ["partition"]
)
COMMANDS = _counter(
    "domino_commands_total",
    "Commands the referee finished with: applied, rejected, duplicate or dead (dead-lettered)",
    ["outcome"],
)
COMMAND_OUTCOMES = ("applied", "rejected", "duplicate", "dead")
COMMAND_TO_TURN = _histogram(
    "domino_command_to_turn_seconds",
    "From a command's timestamp (its sender's clock) to the end of the append that applied it",
)
DECIDE = _histogram("domino_decide_seconds", "Deciding one batch of commands")
APPEND = _histogram("domino_append_seconds", "One batch's append round trip")
LEASES_HELD = _gauge(
    "domino_leases_held", "Partitions this referee or bot worker holds", ["holder"]
)
DEADLINE_STALLS = _counter(
    "domino_deadline_stalls_total",
    "Gaps in a partition's deadline checks longer than DOMINO_STALL_MS, each made up for by"
    " pushing the partition's deadlines back",
    ["partition"],
)
LIVE_MATCHES = _gauge("domino_live_matches", "Matches on the watch lists of the held partitions")
DEAD_LETTERS = _gauge("domino_dead_letters", "Entries on the dead-letter stream")

# -- consumer groups (the referee's commands, the bots' turns) ---------------------------------

CONSUMER_LAG = _gauge(
    "domino_consumer_lag",
    "Entries of a stream not yet delivered to the group (-1: Redis cannot say, before 7.0)",
    ["group", "stream"],
)
CONSUMER_PENDING = _gauge(
    "domino_consumer_pending",
    "Entries delivered to the group and not acknowledged",
    ["group", "stream"],
)

# -- bots and projector ------------------------------------------------------------------------

BOT_TURNS = _counter("domino_bot_turns_total", "Turns answered, by pool", ["pool"])
BOT_THINK = _histogram(
    "domino_bot_think_seconds", "The strategy's time on one batch of turns", ["pool"]
)
PROJECTOR_EVENTS = _counter("domino_projector_events_total", "Log entries the projector folded")

# -- the gateway -------------------------------------------------------------------------------

GATEWAY_REQUESTS = _counter(
    "domino_gateway_requests_total",
    "Requests answered, by route template (method and path) and status",
    ["route", "status"],
)
GATEWAY_REQUEST_SECONDS = _histogram(
    "domino_gateway_request_seconds",
    "From a request to its answer (a stream: to its first line)",
    ["route"],
)
GATEWAY_OPEN_STREAMS = _gauge(
    "domino_gateway_open_streams", "Streams open now: seat, account, public or socket", ["kind"]
)
GATEWAY_PARTITIONS_READ = _gauge(
    "domino_gateway_partitions_read",
    "Partitions whose notification log this gateway reads now (those it has an interest in)",
)
GATEWAY_RATE_LIMITED = _counter(
    "domino_gateway_rate_limited_total", "Requests refused with 429, by limit", ["limit"]
)
GATEWAY_MOVES = _counter(
    "domino_gateway_moves_total", "Moves posted: accepted, rejected or timeout", ["outcome"]
)
GATEWAY_CONNECTIONS = _gauge("domino_gateway_connections", "Client connections open now")
GATEWAY_CONNECTIONS_CLOSED = _counter(
    "domino_gateway_connections_closed_total",
    "Client connections the gateway closed: idle, head_timeout, head_too_large, body_timeout "
    "or over_cap",
    ["reason"],
)

GROUPS: dict[str, tuple[Collector, ...]] = {
    "referee": (
        MOVES_DECIDED,
        COMMANDS,
        COMMAND_TO_TURN,
        DECIDE,
        APPEND,
        LEASES_HELD,
        DEADLINE_STALLS,
        LIVE_MATCHES,
        DEAD_LETTERS,
        CONSUMER_LAG,
        CONSUMER_PENDING,
    ),
    "bots": (BOT_TURNS, BOT_THINK, CONSUMER_LAG, CONSUMER_PENDING, LEASES_HELD),
    "projector": (PROJECTOR_EVENTS,),
    "gateway": (
        GATEWAY_REQUESTS,
        GATEWAY_REQUEST_SECONDS,
        GATEWAY_OPEN_STREAMS,
        GATEWAY_PARTITIONS_READ,
        GATEWAY_RATE_LIMITED,
        GATEWAY_MOVES,
        GATEWAY_CONNECTIONS,
        GATEWAY_CONNECTIONS_CLOSED,
    ),
}
"""The metrics of each kind of process."""
_registered: set[int] = set()


def register(*groups: str) -> None:
    """Put the metrics of ``groups`` in the default registry (once each), so this process's
    ``/metrics`` shows them; raises KeyError for an unknown group."""
    for group in groups:
        for metric in GROUPS[group]:
            if id(metric) not in _registered:
                REGISTRY.register(metric)
                _registered.add(id(metric))


def exposition() -> tuple[bytes, str]:
    """What ``/metrics`` answers: the default registry in Prometheus's text format, and its
    content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def observe_many(histogram: Histogram, amounts: Sequence[float]) -> None:
    """Observe every amount, as ``histogram.observe`` would one by one, with one increment
    per bucket touched rather than two (each under a lock) per amount: a batch of a referee's
    commands costs a few increments, not a thousand."""
    if not amounts:
        return
    # prometheus_client keeps a histogram's buckets uncumulated, one value per upper bound
    # (the last +Inf), and cumulates them when collected: as observe() itself adds to them.
    bounds = histogram._upper_bounds
    for index, count in Tally(bisect_left(bounds, a) for a in amounts).items():
        histogram._buckets[index].inc(count)
    histogram._sum.inc(sum(amounts))


# -- health and readiness ----------------------------------------------------------------------

Readiness = Callable[[], Awaitable[str | None]]
"""A service's readiness check: None when ready, else why not."""


async def _starting() -> str | None:
    return "starting: waiting for Redis"


def fresh(at: float | None, within_s: float, what: str) -> str | None:
    """None when ``at`` (a ``time.monotonic()`` reading) is less than ``within_s`` old; else
    why not, naming ``what`` had to happen."""
    if at is None:
        return f"{what} has not happened yet"
    age = time.monotonic() - at
    return None if age <= within_s else f"{what} last happened {age:.1f} s ago"


class Periodic:
    """Runs ``refresh`` every ``every_s`` seconds until cancelled (a failure is logged and
    tried again next time); :meth:`readiness` says whether it has lately worked."""

    def __init__(self, refresh: Callable[[], Awaitable[None]], every_s: float = 2.0) -> None:
        self.refresh = refresh
        self.every_s = every_s
        self.worked_at: float | None = None
        self.error: str | None = None

    async def run(self) -> None:
        """Refresh now and every ``every_s`` seconds, until cancelled."""
        while True:
            try:
                await self.refresh()
                self.worked_at, self.error = time.monotonic(), None
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self.error is None:  # once per spell of failures, not every round
                    log.warning("metrics refresh failed", error=repr(e))
                self.error = repr(e)
            await asyncio.sleep(self.every_s)

    async def readiness(self) -> str | None:
        """None when a refresh worked within three periods; else why not."""
        stale = fresh(self.worked_at, 3 * self.every_s, "reading the groups from Redis")
        if stale is not None and self.error is not None:
            return f"{stale}: {self.error}"
        return stale


MAX_HEAD_BYTES = 8192
"""A request's line and headers beyond this are refused (431)."""
READ_TIMEOUT_S = 5.0
"""A client this slow to send its request is dropped."""
READY_TIMEOUT_S = 2.0
"""A readiness check that takes longer than this fails."""
MAX_CLIENTS = 32
"""Connections served at once; more are closed at once."""


class Exporter:
    """``GET /metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (``port`` 0: nothing
    is served, and :meth:`start` does nothing).

    ``/healthz`` is 200 while the process runs its service: the exporter answers (so the
    event loop turns) and the service's loop has not ended (:meth:`watch`). ``/readyz`` is 200
    when the readiness check the service attaches once it is connected (:meth:`attach`)
    answers None, else 503 with ``{"ready": false, "reason": ...}``.
    """

    def __init__(self, host: str, port: int, *groups: str) -> None:
        self.host = host
        self.port = port
        self.groups = groups
        self.ready: Readiness = _starting
        self.ended: str | None = None  # why the service's loop ended, once it has
        self._server: asyncio.Server | None = None
        self._clients = asyncio.Semaphore(MAX_CLIENTS)
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    def of(cls, settings: Settings, *groups: str) -> Exporter:
        """The exporter of a process serving ``groups``, on the settings' metrics port."""
        return cls(settings.metrics_host, settings.metrics_port, *groups)

    @classmethod
    def disabled(cls) -> Exporter:
        """An exporter that serves nothing (for a service run without one)."""
        return cls("127.0.0.1", 0)

    @property
    def enabled(self) -> bool:
        """Whether this exporter serves at all (a metrics port is set)."""
        return self.port > 0

    @property
    def serving(self) -> bool:
        """Whether it listens now (started, not stopped)."""
        return self._server is not None

    async def start(self) -> None:
        """Register the groups' metrics and listen (when a port is set); raises OSError when
        the port cannot be had."""
        if not self.enabled:
            return
        register(*self.groups)
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=MAX_HEAD_BYTES
        )
        log.info("metrics served", host=self.host, port=self.port)

    def attach(
        self,
        ready: Readiness,
        refresh: Callable[[], Awaitable[None]] | None = None,
        every_s: float = 2.0,
    ) -> None:
        """Answer ``/readyz`` with ``ready``. With ``refresh`` (what sets the gauges read from
        Redis), also run it every ``every_s`` seconds while the exporter serves, and be ready
        only while it works; it stops with the exporter."""
        if refresh is None or not self.serving:
            self.ready = ready
            return
        periodic = Periodic(refresh, every_s)
        self._tasks.append(asyncio.create_task(periodic.run()))

        async def both() -> str | None:
            return await ready() or await periodic.readiness()

        self.ready = both

    async def stop(self) -> None:
        """Stop listening, the periodic refresh, and close the open connections."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None

    def watch(
        self, runner: Callable[[], Coroutine[Any, Any, None]]
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """``runner``, with ``/healthz`` failing once it has returned or raised."""

        async def watched() -> None:
            try:
                await runner()
                self.ended = "the service's loop has ended"
            except asyncio.CancelledError:
                self.ended = "the service's loop was cancelled"
                raise
            except Exception as e:
                self.ended = f"the service's loop failed: {e!r}"
                raise

        return watched

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._clients.locked():  # too many at once: no answer beats a slow one for all
            writer.close()
            return
        async with self._clients:
            try:
                status, content_type, body = await self._answer(reader)
                head = (
                    f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                    f"Content-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n"
                )
                writer.write(head.encode() + body)
                await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                pass  # the client went away or stalled: nothing to answer
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
        """Status, content type and body for the request ``reader`` brings."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            return _json(431, {"error": "too_large", "message": "request head too large"})
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return _json(400, {"error": "bad_request", "message": "not an HTTP request"})
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target not in (b"/metrics", b"/healthz", b"/readyz"):
            return _json(404, {"error": "not_found", "message": "try /metrics, /healthz, /readyz"})
        if method != b"GET":
            return _json(405, {"error": "method_not_allowed", "message": "only GET"})
        if target == b"/metrics":
            body, content_type = exposition()
            return 200, content_type, body
        if target == b"/healthz":
            if self.ended is not None:
                return _json(503, {"ok": False, "reason": self.ended})
            return _json(200, {"ok": True})
        reason = self.ended or await self.readiness()
        if reason is not None:
            return _json(503, {"ready": False, "reason": reason})
        return _json(200, {"ready": True})

    async def readiness(self) -> str | None:
        """The service's readiness check, bounded in time and never raising."""
        try:
            return await asyncio.wait_for(self.ready(), READY_TIMEOUT_S)
        except TimeoutError:
            return f"the readiness check took over {READY_TIMEOUT_S} s"
        except Exception as e:
            return f"the readiness check failed: {e!r}"


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def _json(status: int, payload: dict[str, Any]) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(payload).encode()
