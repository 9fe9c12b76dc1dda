"""The gateway's ASGI app: lobby, seat and spectator streams, moves. Built by :func:`create_app`.

No Redis client exists until the app starts (its lifespan); stopping the app closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import msgspec
import structlog
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine.game import MAX_NAME, decide
from engine.rules import Family, NextLeader, Rules, RulesError
from events.codec import JSON
from events.model import (
    AnyEvent,
    CreateMatch,
    DrawTile,
    Move,
    PassTurn,
    PlayTile,
    Rejection,
    TileDrawn,
    TilePlayed,
    TurnPassed,
)
from services.config import Settings
from services.core.commands import new_match_id
from services.gateway.config import GatewaySettings
from services.gateway.http import ApiError, Endpoint, Request, Response, decode_body
from services.gateway.hub import FeedUnavailable, Flight, Hub, Outcome
from services.gateway.limits import Cap, Concurrency, Lease, RateLimit, release_match
from services.lobby.tables import JoinError, Lobby, LobbyMatch, token_hash
from services.gateway.openapi import openapi
from services.gateway.protocol import (
    API,
    CreateBody,
    DrawBody,
    JoinBody,
    MoveBody,
    PassBody,
    PlayBody,
)
from services.gateway.seats import SeatCache
from services.gateway.sender import CommandSender
from services.gateway.streaming import StreamResponse
from services.projections.queries import Queries
from services.redis.connection import node_client
from services.store.base import InvalidMatchId
from services.store.keys import EXTERNAL, Keys, validate_match_id
from services.store.redis import RedisEventStore

log = structlog.get_logger()

_KEY = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
_MOVE = msgspec.json.Decoder(MoveBody)
_CREATE = msgspec.json.Decoder(CreateBody)
_JOIN = msgspec.json.Decoder(JoinBody)
_FAMILIES: dict[str, Family] = {"express": "express", "straight": "straight"}
_NEXT_LEADERS: dict[str, NextLeader] = {"after_winner": "after_winner", "rotate": "rotate"}
T = TypeVar("T")
REDIS_CONNECTIONS = 256
LISTED = 100
"""The most matches one GET /matches lists: the latest live or finished."""
SEATS_CACHED = 100_000
"""The most tokens a gateway process remembers the seats of."""


class GatewayNotStarted(RuntimeError):
    """Raised when a handler asks for Redis, the store, the lobby or the feeds while the app is
    not running: before its lifespan has started or after it has ended."""


@dataclass(frozen=True, slots=True)
class _Running:
    """What exists only while the app runs: one Redis client and what is built on it."""

    redis: Redis
    store: RedisEventStore
    lobby: Lobby
    sender: CommandSender
    hub: Hub


class Gateway:
    """The gateway's state and handlers; its Redis client exists between start and stop."""

    def __init__(self, settings: Settings, config: GatewaySettings, redis_url: str) -> None:
        self.settings = settings
        self.config = config
        self.redis_url = redis_url
        self.topo = Keys(settings.prefix, settings.partitions)
        self.name = f"gateway-{socket.gethostname()}-{os.getpid()}"
        self.replies = self.topo.replies(self.name)
        topo, lease_s = self.topo, config.stream_lease_s
        self.moves = RateLimit("moves_per_second", config.moves_per_s, config.move_burst, topo)
        self.rejected_moves = RateLimit(
            "rejected_moves", config.rejected_moves_per_s, config.rejected_move_burst, topo
        )
        self.auth_failures = RateLimit(
            "auth_failures", config.auth_failures_per_s, config.auth_failure_burst, topo
        )
        self.lobby_writes = RateLimit(
            "lobby_per_second", config.lobby_per_s, config.lobby_burst, topo
        )
        self.open_matches = Cap(
            "open_matches_per_client", config.open_matches_per_client, topo, config.token_ttl_s
        )
        self.waiting_seats = Cap(
            "waiting_seats_per_client", config.waiting_seats_per_client, topo, config.token_ttl_s
        )
        self.seat_streams = Concurrency(
            "streams_per_token", config.streams_per_token, topo, lease_s
        )
        self.account_streams = Concurrency(
            "streams_per_account", config.streams_per_account, topo, lease_s
        )
        self.public_streams = Concurrency(
            "streams_per_client", config.streams_per_client, topo, lease_s
        )
        self._seats = SeatCache(size=SEATS_CACHED)  # token hash -> (match, seat), for a while
        self._running: _Running | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Connect, follow the logs, serve; then stop following and disconnect."""
        redis = node_client(  # wait for a connection rather than fail
            self.redis_url, max_connections=REDIS_CONNECTIONS, wait_s=self.config.move_timeout_s
        )
        store = RedisEventStore(
            redis, partitions=self.settings.partitions, prefix=self.settings.prefix
        )
        hub = Hub(redis, store, self.topo, self.replies, self.config.stream_buffer_bytes)
        await hub.start()
        self._running = _Running(
            redis=redis,
            store=store,
            lobby=Lobby(redis, self.topo, self.config.token_ttl_s),
            sender=CommandSender(redis, self.topo, self.replies),
            hub=hub,
        )
        sweeper = asyncio.create_task(self._sweep())
        log.info("gateway started", replies=self.replies, partitions=self.settings.partitions)
        try:
            yield
        finally:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
            await hub.stop()
            for streams in (self.seat_streams, self.account_streams, self.public_streams):
                await streams.close()
            self._running = None
            with contextlib.suppress(Exception):
                await redis.delete(self.replies)
            await redis.aclose()
            log.info("gateway stopped")

    async def _sweep(self) -> None:
        """Renew the leases of this gateway's open streams, well within their length."""
        while True:
            await asyncio.sleep(self.config.stream_lease_s / 3)
            for streams in (self.seat_streams, self.account_streams, self.public_streams):
                try:
                    await streams.renew(self.redis)
                except Exception as e:  # Redis away: the next round tries again
                    log.warning("stream leases not renewed", error=repr(e))

    def _started(self) -> _Running:
        if self._running is None:
            raise GatewayNotStarted("the gateway has not started: its clients exist while it runs")
        return self._running

    @property
    def redis(self) -> Redis:
        """The Redis client; raises GatewayNotStarted when the app is not running."""
        return self._started().redis

    @property
    def hub(self) -> Hub:
        """The feeds of followed matches; raises GatewayNotStarted when the app is not running."""
        return self._started().hub

    @property
    def lobby(self) -> Lobby:
        """The lobby's records and tokens; raises GatewayNotStarted when the app is not running."""
        return self._started().lobby

    @property
    def sender(self) -> CommandSender:
        """The command sender; raises GatewayNotStarted when the app is not running."""
        return self._started().sender

    @property
    def store(self) -> RedisEventStore:
        """The event store (read only); raises GatewayNotStarted when the app is not running."""
        return self._started().store

    # -- helpers -------------------------------------------------------------------------------

    def _match_id(self, request: Request) -> str:
        match_id: str = request.params["match_id"]
        try:
            validate_match_id(match_id)
        except InvalidMatchId as e:
            raise ApiError(404, "no_match", str(e)) from None
        return match_id

    async def _authorize(self, request: Request, match_id: str, seat: int) -> str:
        """Check the bearer token opens this seat; return its hash."""
        digest, (token_match, token_seat) = await self._token(request)
        if token_match != match_id:
            raise ApiError(403, "wrong_match", "this seat token is for another match")
        if token_seat != seat:
            raise ApiError(
                403, "wrong_seat", f"this token plays seat {token_seat}, not seat {seat}"
            )
        return digest

    async def _token(self, request: Request) -> tuple[str, tuple[str, int]]:
        auth = request.header(b"authorization")
        if not auth or not auth.startswith("Bearer ") or len(auth) > 200:
            raise ApiError(
                401, "unauthorized", "send the seat token as 'Authorization: Bearer <token>'"
            )
        token = auth[7:].strip()
        digest = token_hash(token)
        seat = self._seats.get(digest)
        if seat is None:
            await self.auth_failures.check(self.redis, request.client)  # guessing waits
            seat = await self.lobby.resolve(token)
            if seat is None:
                await self.auth_failures.hit(self.redis, request.client)
                raise ApiError(401, "unauthorized", "unknown seat token")
            self._seats.put(digest, seat)
        return digest, seat

    async def _await(
        self, match_id: str, command_id: str, command: Any
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command and wait for its outcome; (None, versions) if it was applied before,
        (None, None) if no answer came in time.

        A command whose id is already on its way from here is not sent again: it waits for
        that one's outcome and is its replay (an Outcome with ``replayed``), or shares its
        rejection. Another command under the same id is sent only if that one was not applied.
        """
        flights = self.hub.flights
        while (flight := flights.get((match_id, command_id))) is not None:
            first = await asyncio.shield(flight.outcome)
            if first.version is not None:
                return Outcome(version=first.version, replayed=True), None
            if flight.command == command:
                return (None if first.rejection is None else first), None
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        flights[(match_id, command_id)] = Flight(command, answer)
        try:
            outcome, done = await self._send(match_id, command_id, command)
        except BaseException:
            answer.set_result(Outcome())  # its copies are answered "no answer": they retry
            raise
        finally:
            del flights[(match_id, command_id)]
        if outcome is not None:
            answer.set_result(outcome)
        else:  # applied before (done), or no answer in time (neither)
            answer.set_result(Outcome() if done is None else Outcome(_first(done), replayed=True))
        return outcome, done

    async def _send(
        self, match_id: str, command_id: str, command: Any
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command once and wait for its outcome, as :meth:`_await` answers.

        A rejection of a command whose id is applied all the same (a copy sent through another
        gateway, or before a lost answer) is no rejection: the move is in the log, and this
        copy is its replay.
        """
        hub = self.hub
        fut = hub.expect(match_id, command_id)
        try:
            done = await self.sender.send(match_id, command_id, command)
            if done is not None:
                return None, done
            try:
                outcome = await asyncio.wait_for(fut, self.config.move_timeout_s)
            except TimeoutError:  # the answer may be lost or late: the store knows
                outcome = Outcome()
            if outcome.version is not None:
                return outcome, None
            done = cast(bytes | None, await self.redis.hget(self.topo.dedupe(match_id), command_id))
            if done is not None:
                return Outcome(version=_first(done), replayed=outcome.rejection is not None), None
            return (None if outcome.rejection is None else outcome), None
        finally:
            hub.forget(match_id, command_id, fut)

    async def _start_match(self, match: LobbyMatch) -> None:
        """Every seat is taken: create the match in the log (once, whoever calls it)."""
        await release_match(self.redis, self.topo, match.match_id)  # its holds end as it starts
        command = CreateMatch(
            rules=match.rules, players=match.names, bots=match.pools, deadline_ms=match.deadline_ms
        )
        outcome, _ = await self._await(match.match_id, f"create:{match.match_id}", command)
        if outcome is not None and outcome.rejection is not None:
            log.error(
                "match could not be created",
                match_id=match.match_id,
                reason=outcome.rejection.reason,
                detail=outcome.rejection.message,
            )
            raise ApiError(409, "rejected", outcome.rejection.message, **_why(outcome.rejection))
        log.info("lobby match started", match_id=match.match_id, players=match.names)

    def _links(self, match_id: str, seat: int | None = None) -> dict[str, str]:
        base = f"{API}/matches/{match_id}"
        links = {"match": base, "spectate": f"{base}/stream"}
        if seat is not None:
            links["stream"] = f"{base}/seats/{seat}/stream"
            links["moves"] = f"{base}/seats/{seat}/moves"
        return links

    # -- lobby ---------------------------------------------------------------------------------

    async def create_match(self, request: Request) -> Response:
        """POST /matches: a new match; open seats wait for players, house bots are set."""
        await self.lobby_writes.hit(self.redis, request.client)
        body = decode_body(await request.json_body(self.config.max_body_bytes), _CREATE, "match")
        players = body.rules.players or len(body.seats)
        try:
            rules = Rules.make(
                _option(_FAMILIES, "family", body.rules.family),
                players=players,
                partners=body.rules.partners,
                top=body.rules.top,
                target=body.rules.target,
                next_leader=_option(_NEXT_LEADERS, "next_leader", body.rules.next_leader),
                reveal_stock=body.rules.reveal_stock,
            )
        except RulesError as e:
            raise ApiError(422, "rejected", str(e), reason="bad_rules", rule=_rule_of(e)) from None
        if EXTERNAL in body.seats:
            raise ApiError(
                422,
                "invalid_match",
                f"{EXTERNAL!r} is not a house bot pool: use null for an open seat",
            )
        names = tuple(body.names or (p or f"seat{i}" for i, p in enumerate(body.seats)))
        command = CreateMatch(
            rules=rules, players=names, bots=tuple(body.seats), deadline_ms=body.deadline_ms
        )
        checked = decide(None, command)  # the engine's own checks, before anything is stored
        if isinstance(checked, Rejection):
            raise ApiError(422, "rejected", checked.message, **_why(checked))
        match_id = new_match_id()
        hold = None
        if None in body.seats:  # an open match counts against its creator until it starts
            hold = await self.open_matches.hold(self.redis, request.client, match_id)
        try:
            match = await self.lobby.create(
                match_id, rules, tuple(body.seats), names, body.deadline_ms
            )
        except Exception:
            if hold is not None:
                await self.open_matches.drop(self.redis, hold)
            raise
        if match.status == "started":
            await self._start_match(match)
        log.info("lobby match created", match_id=match_id, open=match.pools.count(None))
        return Response.json({"match": match.public(), "links": self._links(match_id)}, status=201)

    async def join(self, request: Request) -> Response:
        """POST /matches/{id}/join: take an open seat; the seat token is in the answer, once."""
        await self.lobby_writes.hit(self.redis, request.client)
        match_id = self._match_id(request)
        raw = await request.json_body(self.config.max_body_bytes)
        body = decode_body(raw, _JOIN, "join") if raw.strip() else JoinBody()
        if body.name is not None and (not body.name.strip() or len(body.name) > MAX_NAME):
            raise ApiError(422, "invalid_join", f"a name is 1 to {MAX_NAME} characters")
        if body.seat is not None and body.seat < 0:
            raise ApiError(404, "no_such_seat", f"seat {body.seat} does not exist (C3)")
        hold = await self.waiting_seats.hold(self.redis, request.client, match_id)
        try:
            match, seat, token = await self.lobby.join(match_id, body.seat, body.name)
        except JoinError as e:
            await self.waiting_seats.drop(self.redis, hold)
            status = 404 if e.code in ("no_match", "no_such_seat") else 409
            raise ApiError(status, e.code, str(e)) from None
        log.info("seat taken", match_id=match_id, seat=seat, name=match.seats[seat].name)
        if match.status == "started":
            await self._start_match(match)
        return Response.json(
            {
                "match_id": match_id,
                "seat": seat,
                "token": token,
                "match": match.public(),
                "links": self._links(match_id, seat),
            },
            status=201,
        )

    async def list_matches(self, request: Request) -> Response:
        """GET /matches?status=open|live|finished."""
        status = request.query("status") or "open"
        if status == "open":
            rows = [m.public() for m in await self.lobby.open_matches()]
        elif status in ("live", "finished"):
            summaries = await Queries(self.redis, self.settings).matches(
                finished=status == "finished", limit=LISTED
            )
            rows = [msgspec.to_builtins(s) for s in summaries]
        else:
            raise ApiError(422, "invalid_query", "status is open, live or finished")
        return Response.json({"status": status, "matches": rows})

    async def get_match(self, request: Request) -> Response:
        """GET /matches/{id}: the lobby record and how far the match has got."""
        match_id = self._match_id(request)
        match = await self.lobby.get(match_id)
        version = await self.store.version(match_id)
        if match is None and version == 0:
            raise ApiError(404, "no_match", f"no match {match_id!r}")
        out: dict[str, Any] = match.public() if match else {"match_id": match_id}
        out["version"] = version
        out["links"] = self._links(match_id)
        return Response.json(out)

    async def whoami(self, request: Request) -> Response:
        """GET /seat: which match and seat the bearer token plays."""
        _, (match_id, seat) = await self._token(request)
        return Response.json(
            {"match_id": match_id, "seat": seat, "links": self._links(match_id, seat)}
        )

    # -- streams -------------------------------------------------------------------------------

    def _resume_point(self, request: Request) -> int | None:
        raw = request.query("after")
        if raw is None:
            raw = request.header(b"last-event-id")
        if raw is None or raw == "":
            return None
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:  # "²" is a digit to isdigit
            raise ApiError(400, "bad_resume", "after / Last-Event-ID is an event id: 0, 1, 2, ...")
        return int(raw)

    def _everything(self, request: Request) -> bool:
        events = request.query("events")
        if events not in (None, "all", "minimal"):
            raise ApiError(422, "invalid_query", "events is all or minimal")
        return events != "minimal"

    def _until_turn(self, request: Request) -> bool:
        """``until=turn``: the seat's stream ends after its first turn line."""
        until = request.query("until")
        if until not in (None, "turn"):
            raise ApiError(422, "invalid_query", "until is turn (or left out)")
        return until == "turn"

    def _sse(self, request: Request) -> bool:
        fmt = request.query("format")
        if fmt is not None:
            if fmt not in ("ndjson", "sse"):
                raise ApiError(422, "invalid_query", "format is ndjson or sse")
            return fmt == "sse"
        return "text/event-stream" in (request.header(b"accept") or "")

    async def seat_stream(self, request: Request) -> StreamResponse:
        """GET /matches/{id}/seats/{seat}/stream: what the seat may see, as it happens."""
        match_id = self._match_id(request)
        seat: int = request.params["seat"]
        await self._authorize(request, match_id, seat)
        after = self._resume_point(request)
        sse = self._sse(request)
        everything = self._everything(request)
        until_turn = self._until_turn(request)
        lease = await self.seat_streams.acquire(self.redis, f"{match_id}:{seat}")
        try:
            return await self._open_stream(
                match_id, seat, sse, after, everything, lease, self.seat_streams, until_turn
            )
        except BaseException:
            self.seat_streams.release(lease)
            raise

    async def spectate(self, request: Request) -> StreamResponse:
        """GET /matches/{id}/stream: the public view (C8), as it happens."""
        match_id = self._match_id(request)
        after = self._resume_point(request)
        sse = self._sse(request)
        everything = self._everything(request)
        if match_id not in self.hub.feeds:
            exists = await self.lobby.get(match_id) is not None
            if not exists and await self.store.version(match_id) == 0:
                raise ApiError(404, "no_match", f"no match {match_id!r}")
        lease = await self.public_streams.acquire(self.redis, request.client)
        try:
            return await self._open_stream(
                match_id, None, sse, after, everything, lease, self.public_streams
            )
        except BaseException:
            self.public_streams.release(lease)
            raise

    async def _open_stream(
        self,
        match_id: str,
        seat: int | None,
        sse: bool,
        after: int | None,
        everything: bool,
        lease: Lease,
        counter: Concurrency,
        until_turn: bool = False,
    ) -> StreamResponse:
        hub = self.hub
        try:
            feed = await hub.follow(match_id)
        except FeedUnavailable as e:
            raise ApiError(503, "unavailable", str(e)) from None
        if after is not None and after > feed.version:
            raise ApiError(
                400,
                "bad_resume",
                f"event {after} does not exist yet: the match is at version {feed.version}",
            )
        sub, version = hub.subscribe(feed, seat, sse, after, everything, until_turn)
        first = [] if after is None else await hub.backlog(feed, sub, after, version)
        log.debug("stream opened", match_id=match_id, seat=seat, after=after)
        return StreamResponse(
            hub, feed, sub, first, self.config.keepalive_s, lambda: counter.release(lease)
        )

    # -- moves ---------------------------------------------------------------------------------

    async def move(self, request: Request) -> Response:
        """POST /matches/{id}/seats/{seat}/moves: play, draw or pass, confirmed or rejected."""
        match_id = self._match_id(request)
        seat: int = request.params["seat"]
        digest = await self._authorize(request, match_id, seat)
        # every request counts, per seat; none is sent while its token (or account) has had
        # too many moves rejected lately
        quota = await self.moves.hit(
            self.redis, f"{match_id}:{seat}", unless_spent=[(self.rejected_moves, digest)]
        )
        headers = quota.headers()
        key = request.header(b"idempotency-key")
        if key is None:
            raise ApiError(
                400, "missing_idempotency_key", "send an Idempotency-Key header with each move"
            )
        if _KEY.fullmatch(key) is None:
            raise ApiError(
                400, "bad_idempotency_key", "an Idempotency-Key is 1-64 of A-Z a-z 0-9 . _ : -"
            )
        body = decode_body(await request.json_body(self.config.max_body_bytes), _MOVE, "move")
        if body.seat is not None and body.seat != seat:
            raise ApiError(403, "wrong_seat", f"this token plays seat {seat}, not seat {body.seat}")
        command = _command(body, seat)
        command_id = f"gw:{seat}:{key}"
        outcome, done = await self._await(match_id, command_id, command)
        if outcome is not None and outcome.rejection is not None:
            r = outcome.rejection
            log.debug("move rejected", match_id=match_id, seat=seat, reason=r.reason)
            await self.rejected_moves.count(self.redis, digest)
            return Response.json(
                {"error": "rejected", **_why(r), "message": r.message, "accepted": False},
                409,
                headers,
            )
        if outcome is None and done is not None:
            outcome = Outcome(version=_first(done), replayed=True)
        if outcome is None or outcome.version is None:
            return Response.json(
                {
                    "error": "timeout",
                    "message": "no answer from the referee in time; the move may still be "
                    "applied: send it again with the same Idempotency-Key",
                },
                504,
                headers,
            )
        version = outcome.version
        if outcome.replayed:  # what was applied under this key must be this very move
            records = await self.store.read(match_id, version, version)
            if records and not _same_move(JSON.decode_envelope(records[0].data).event, command):
                raise ApiError(
                    409,
                    "idempotency_key_reused",
                    f"Idempotency-Key {key!r} was already used for a different move",
                )
        return Response.json(
            {"accepted": True, "version": version, "replayed": outcome.replayed}, 200, headers
        )

    # -- misc ----------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """GET /healthz."""
        await self.redis.ping()
        return Response.json({"ok": True, "following": len(self.hub.feeds)})

    async def openapi(self, request: Request) -> Response:
        """GET /openapi.json."""
        return Response.json(openapi())


def _command(body: PlayBody | DrawBody | PassBody, seat: int) -> Move:
    if isinstance(body, PlayBody):
        return PlayTile(seat=seat, tile=body.tile, end=body.end)
    if isinstance(body, DrawBody):
        return DrawTile(seat=seat)
    return PassTurn(seat=seat)


def _same_move(event: AnyEvent, command: Move) -> bool:
    """Whether the event an earlier command made is what ``command`` asks for."""
    if isinstance(command, PlayTile):
        return (
            isinstance(event, TilePlayed)
            and tuple(sorted(event.tile)) == tuple(sorted(command.tile))
            and (command.end is None or command.end == event.end)
        )
    if isinstance(command, DrawTile):
        return isinstance(event, TileDrawn)
    return isinstance(event, TurnPassed)


def _option(choices: Mapping[str, T], name: str, value: str) -> T:
    """The rule option ``value`` names; raises RulesError naming the choices if it is none."""
    choice = choices.get(value)
    if choice is None:
        raise RulesError(f"{name} must be {' or '.join(choices)}, not {value!r}")
    return choice


_CITED = re.compile(r"\(([CES]\d+)\)")


def _rule_of(e: RulesError) -> str:
    """The rule a rule set breaks, as the engine's message cites it (players and partners C3,
    the set C1); "-" when it cites none."""
    cited = _CITED.search(str(e))
    return cited.group(1) if cited else "-"


def _first(done: bytes) -> int:
    """The first version an applied command made, from its dedupe entry ``first:last``."""
    return int(done.split(b":")[0])


def _why(r: Rejection) -> dict[str, str]:
    """The engine's reason and rule, for an error body."""
    return {"reason": r.reason, "rule": r.rule}


async def _not_found(request: StarletteRequest, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"error": "not_found", "message": f"no such endpoint {request.url.path}"}, 404
    )


async def _http_error(request: StarletteRequest, exc: Exception) -> JSONResponse:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = "method_not_allowed" if status == 405 else "http_error"
    message = f"{request.method} is not allowed here" if status == 405 else str(exc)
    headers = getattr(exc, "headers", None)
    return JSONResponse({"error": code, "message": message}, status, headers=headers)


def create_app(
    settings: Settings, config: GatewaySettings | None = None, redis_url: str | None = None
) -> Starlette:
    """The gateway app for ``settings`` (Redis, prefix, partitions) and ``config`` (limits)."""
    url = redis_url or settings.redis_url
    if not url:
        raise ValueError("the gateway needs a Redis: set REDIS_URL")
    gw = Gateway(settings, config or GatewaySettings(), url)
    m = f"{API}/matches/{{match_id}}"
    routes = [
        Route("/healthz", Endpoint(gw.health), methods=["GET"]),
        Route(f"{API}/openapi.json", Endpoint(gw.openapi), methods=["GET"]),
        Route(f"{API}/matches", Endpoint(gw.list_matches), methods=["GET"]),
        Route(f"{API}/matches", Endpoint(gw.create_match), methods=["POST"]),
        Route(f"{API}/seat", Endpoint(gw.whoami), methods=["GET"]),
        Route(m, Endpoint(gw.get_match), methods=["GET"]),
        Route(f"{m}/join", Endpoint(gw.join), methods=["POST"]),
        Route(f"{m}/stream", Endpoint(gw.spectate), methods=["GET"]),
        Route(f"{m}/seats/{{seat:int}}/stream", Endpoint(gw.seat_stream), methods=["GET"]),
        Route(f"{m}/seats/{{seat:int}}/moves", Endpoint(gw.move), methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=gw.lifespan,
        exception_handlers={404: _not_found, 405: _http_error},
    )
    app.state.gateway = gw
    return app
