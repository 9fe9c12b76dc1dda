"""The gateway's ASGI app: lobby, seat and spectator streams, moves. Built by :func:`create_app`.

No Redis client exists until the app starts (its lifespan); stopping the app closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import msgspec
import structlog
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Match, Route

from engine.game import decide, evolve
from engine.rules import Family, NextLeader, Rules, RulesError
from engine.state import MatchState
from engine.strategy import STRATEGIES
from engine.views import redact, view_for
from events.codec import JSON
from events.model import (
    Abort,
    AnyEvent,
    CancelMatch,
    CreateMatch,
    DrawTile,
    MatchCreated,
    MatchEnded,
    Move,
    PassTurn,
    PlayTile,
    Rejection,
    Resign,
    RoundEnded,
    TileDrawn,
    TilePlayed,
    TurnPassed,
)
from services.bots.worker import pool_served
from services.config import Settings
from services.core.commands import new_match_id
from services.gateway import versions
from services.gateway.admission import Admission, Held
from services.gateway.config import GatewaySettings
from services.gateway.credentials import Credential, Credentials
from services.gateway.finished import Finished, Kept
from services.gateway.http import (
    JSON_TYPE,
    ApiError,
    App,
    Endpoint,
    Request,
    Response,
    decode_body,
)
from services.gateway.hub import YIELD_EVERY, Feed, FeedUnavailable, Flight, Hub, Outcome
from services.gateway.limits import (
    Cap,
    Charge,
    Concurrency,
    Lease,
    LimitExceeded,
    RateLimit,
    release_match,
)
from services.gateway.lobby_limits import LobbyLimits
from services.gateway.moves import TIMED_OUT, move_key
from services.gateway.openapi import openapi
from services.gateway.origins import Origins
from services.gateway.pages import Pages
from services.gateway.players import Players
from services.gateway.protocol import (
    API,
    FILTERED_PAGES,
    LISTED,
    NAME_CHARS,
    PROTOCOL,
    RECENT,
    REPLAYED,
    SPOKEN,
    AbortBody,
    CreateBody,
    DrawBody,
    Health,
    JoinBody,
    MoveBody,
    PassBody,
    PlayBody,
    PlayerAnswer,
    PlayerResults,
    RatingsAnswer,
    RecentMatch,
    Replay,
    ReplayFrame,
    ResignBody,
    RulesBody,
)
from services.gateway.seats import SeatCache
from services.gateway.sender import INFLIGHT, CommandSender
from services.gateway.sockets import SeatSockets
from services.gateway.streaming import StreamResponse
from services.lobby.accounts import Account, Accounts, digest, is_account_token
from services.lobby.arena import Pairing
from services.lobby.arena_runner import ArenaRunner
from services.lobby.arenas import Arena, Arenas
from services.lobby.challenges import Challenges
from services.lobby.names import BadName, check_name, skeleton
from services.lobby.revocations import Ended
from services.lobby.seeks import Group, Kind, Matchmaker, Seek, Seeks
from services.lobby.tables import JoinError, Lobby, LobbyMatch, parse_record, token_hash
from services.metrics import GATEWAY_MOVES, GATEWAY_REQUESTS, Exporter, exposition, register
from services.projections.accounts import AccountFeeds
from services.projections.identity import kind_of, shown_name
from services.projections.queries import Queries
from services.projections.ratings import (
    MatchResult,
    RatingsProjector,
    Standings,
    read_played,
    read_results,
    standings,
)
from services.redis.apps import topology
from services.redis.connection import Client, open_client, replica_reader
from services.redis.lane import ClusterLane, Lane, close_lane
from services.redis.paging import BadCursor, Cursor
from services.store import MatchSource, open_archive
from services.store.base import InvalidMatchId
from services.store.keys import EXTERNAL, Keys, validate_match_id
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore

log = structlog.get_logger()

_MOVE = msgspec.json.Decoder(MoveBody)
_CREATE = msgspec.json.Decoder(CreateBody)
_JOIN = msgspec.json.Decoder(JoinBody)
_FAMILIES: dict[str, Family] = {"express": "express", "straight": "straight"}
_NEXT_LEADERS: dict[str, NextLeader] = {"after_winner": "after_winner", "rotate": "rotate"}
T = TypeVar("T")
REDIS_CONNECTIONS = 256
HOLDERS_CACHED_S = 3600.0
"""How long a gateway remembers which account holds a seat (it never changes once taken)."""
"""Account and play streams an account may have open at once (per gateway process)."""
RATINGS_FRESH_S = 30.0
"""How long the seek queue uses a ratings table before reading it again."""
KEY_CHARS = 6 + NAME_CHARS
"""The longest player key: guest: and a name (an account id, house: and a pool are shorter)."""
STANDINGS_FRESH_S = 5.0
"""How long the ratings and players pages are answered from one fold of the results."""
RESUMED_CHEAPLY = 200
"""A spectator stream resumed at most this many events behind a match followed here reads so
little of its log that it is not a bulk read (a client back after a drop, or a failover)."""
STOP_S = 5.0
"""How long a stopping gateway waits for its background work (the matchmaker's round) to end."""
READY_PING_S = 2.0
"""A Redis that does not answer a ping within this long leaves the gateway not ready."""
_MOVES = {outcome: GATEWAY_MOVES.labels(outcome) for outcome in ("accepted", "rejected", "timeout")}


class GatewayNotStarted(RuntimeError):
    """Raised when a handler asks for Redis, the store, the lobby or the feeds while the app is
    not running: before its lifespan has started or after it has ended."""


@dataclass(frozen=True, slots=True)
class _Running:
    """What exists only while the app runs: one Redis client and what is built on it."""

    redis: Client
    store: RedisEventStore
    source: MatchSource
    """The logs, live in Redis or archived: what every read of a match goes through."""
    lobby: Lobby
    sender: CommandSender
    hub: Hub
    accounts: Accounts
    feeds: AccountFeeds
    challenges: Challenges
    seeks: Seeks
    arenas: Arenas


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
        self.operator_failures = RateLimit(
            "operator_failures", config.operator_failures_per_s, config.operator_failure_burst, topo
        )
        self.lobby_writes = RateLimit(
            "lobby_per_second", config.lobby_per_s, config.lobby_burst, topo
        )
        self.open_matches = Cap(
            "open_matches_per_client", config.open_matches_per_client, topo, config.lobby_ttl_s
        )
        self.waiting_seats = Cap(
            "waiting_seats_per_client", config.waiting_seats_per_client, topo, config.lobby_ttl_s
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
        self.player_streams = Concurrency(
            "player_streams_per_client", config.player_streams_per_client, topo, lease_s
        )
        self.stream_limits = (
            self.seat_streams,
            self.account_streams,
            self.public_streams,
            self.player_streams,
        )
        self.lobby_limits = LobbyLimits(config, topo)  # challenges, seeks' and house matches
        # bulk reads wait for a place (play never does), and finished matches are made once
        self.bulk = Admission(
            "bulk_reads", config.bulk_reads, config.bulk_reads_per_s, config.bulk_wait_s
        )
        self.finished = Finished(config.finished_cache_bytes)
        # what a token opens, looked up in Redis once per token_cache_s
        cached_s, cached = config.token_cache_s, config.token_cache_size
        self._seats: SeatCache[tuple[str, int]] = SeatCache(cached_s, cached)  # token -> seat
        self._accounts: SeatCache[Account] = SeatCache(cached_s, cached)
        self._holders: SeatCache[str] = SeatCache(HOLDERS_CACHED_S, cached)  # seat -> account
        # every stream opened with a token, which ends with it (told by the revocation stream)
        self.credentials = Credentials(self.topo, self._forget)
        self._ratings: dict[tuple[str, str], float] = {}
        self._standings = Standings(table=[], history={}, played={})
        self._standings_at = -RATINGS_FRESH_S
        self._folding = asyncio.Lock()  # one fold of the results at a time
        self._running: _Running | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self, app: Starlette) -> AsyncIterator[None]:
        """The app's lifespan: the metrics port (DOMINO_METRICS_PORT, when set) answers from
        the start, then :meth:`lifespan` connects and serves."""
        exporter = Exporter.of(self.settings, "gateway")
        await exporter.start()
        exporter.attach(self.readiness)
        try:
            async with self.lifespan(app):
                yield
        finally:
            await exporter.stop()

    async def readiness(self) -> str | None:
        """None while the gateway serves: it has started and its Redis answers; else why not."""
        running = self._running
        if running is None:
            return "the gateway is not running (starting, or stopped)"
        try:
            await asyncio.wait_for(running.redis.ping(), READY_PING_S)
        except (RedisError, TimeoutError) as e:
            return f"Redis does not answer: {e!r}"
        return None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Connect, follow the logs, serve; then stop following and disconnect."""
        url = self.redis_url
        cluster = await topology(url, self.settings.cluster)  # waits for Redis to answer
        redis = open_client(  # wait for a connection rather than fail
            url,
            cluster=cluster,
            max_connections=REDIS_CONNECTIONS,
            wait_s=self.config.move_timeout_s,
        )
        store = RedisEventStore(
            redis, partitions=self.settings.partitions, prefix=self.settings.prefix
        )
        archive = open_archive(self.settings.archive_at(), self.settings.archive_s3_endpoint)
        source = MatchSource(store, archive)
        # the moves' lane, and the hub's tail (on a cluster, a read per stream instead)
        moves: Lane | ClusterLane = ClusterLane(redis) if cluster else Lane(url)
        tail = None if cluster else Lane(url)
        lanes = [lane for lane in (moves, tail) if lane is not None]
        # With DOMINO_DURABILITY=replica a cluster's logs are followed on replicas: a move is
        # reported accepted, and an event shown, only once a failover cannot take it back.
        readers: Client = redis
        hub_store = store
        if cluster and self.settings.durability == "replica":
            readers = replica_reader(url, max_connections=REDIS_CONNECTIONS)
            hub_store = RedisEventStore(
                readers, partitions=self.settings.partitions, prefix=self.settings.prefix
            )
        hub = Hub(
            readers,
            MatchSource(hub_store, archive),
            self.topo,
            self.replies,
            self.config.stream_buffer_bytes,
            tail,
            self.finished,
        )
        await hub.start()
        # an end made here applies here before it is answered; every other gateway follows
        accounts = Accounts(redis, self.topo, on_end=self.credentials.end)
        feeds = AccountFeeds(redis, self.topo)
        seeks = Seeks(redis, self.topo, feeds, self.config.seek_ttl_s)
        arenas = Arenas(redis, self.topo)
        runner = ArenaRunner(arenas, source, self.start_arena)
        self._running = _Running(
            redis=redis,
            store=store,
            source=source,
            lobby=Lobby(redis, self.topo, self.config.token_ttl_s, self.config.lobby_ttl_s),
            sender=CommandSender(
                moves, self.topo, self.replies, int(2000 * self.config.move_timeout_s)
            ),
            hub=hub,
            accounts=accounts,
            feeds=feeds,
            challenges=Challenges(redis, self.topo, accounts, feeds, self.config.challenge_ttl_s),
            seeks=seeks,
            arenas=arenas,
        )
        stop = asyncio.Event()
        matchmaker = Matchmaker(
            seeks,
            self.start_seek,
            self.name,
            fill_after_s=self.config.seek_fill_s or None,
            also=[runner.tick],
            may_fill=self.may_fill,
        )
        background = [asyncio.create_task(matchmaker.run(stop))]
        # the sweep, and the follower of the revocation stream, run until cancelled
        sweeper = asyncio.create_task(self._sweep())
        follower = asyncio.create_task(self.credentials.follow(redis, stop))
        log.info("gateway started", replies=self.replies, partitions=self.settings.partitions)
        try:
            yield
        finally:
            stop.set()
            sweeper.cancel()
            follower.cancel()
            # the matchmaker and the follower end their round and stop (a cancelled blocking
            # read on a cluster may be taken by the client for its own timeout, and retried);
            # one still going after STOP_S is cancelled again and left: a gateway told to stop
            # always does
            tasks = [sweeper, follower, *background]
            _, stuck = await asyncio.wait(tasks, timeout=STOP_S)
            for task in stuck:
                log.warning("background work did not stop in time: cancelled", task=repr(task))
                task.cancel()
            if stuck:
                await asyncio.wait(stuck, timeout=1.0)
            await hub.stop()
            for lane in lanes:
                await lane.aclose()
            for streams in self.stream_limits:
                await streams.close()
            self._running = None
            with contextlib.suppress(Exception):
                await redis.delete(self.replies)
            if readers is not redis:
                await close_lane(readers)
                await readers.aclose()
            await close_lane(redis)  # the one its store and checkpoints shared
            await redis.aclose()
            log.info("gateway stopped")

    async def _sweep(self) -> None:
        """Renew the leases of this gateway's open streams, well within their length, and the
        life of its reply stream: a gateway that dies leaves a stream that expires."""
        every = self.config.stream_lease_s / 3
        while True:
            await asyncio.sleep(every)
            for streams in self.stream_limits:
                try:
                    await streams.renew(self.redis)
                except Exception as e:  # Redis away: the next round tries again
                    log.warning("stream leases not renewed", error=repr(e))
            try:
                await self.redis.pexpire(self.replies, int(max(60.0, 6 * every) * 1000))
            except Exception as e:
                log.warning("reply stream's life not renewed", error=repr(e))
            try:  # what the revocation stream tells, checked without it
                await self.credentials.verify(self.accounts)
            except Exception as e:
                log.warning("open streams' credentials not checked", error=repr(e))

    def _started(self) -> _Running:
        if self._running is None:
            raise GatewayNotStarted("the gateway has not started: its clients exist while it runs")
        return self._running

    @property
    def redis(self) -> Client:
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
    def accounts(self) -> Accounts:
        """The accounts; raises GatewayNotStarted when the app is not running."""
        return self._started().accounts

    @property
    def feeds(self) -> AccountFeeds:
        """The accounts' feeds; raises GatewayNotStarted when the app is not running."""
        return self._started().feeds

    @property
    def challenges(self) -> Challenges:
        """The challenges; raises GatewayNotStarted when the app is not running."""
        return self._started().challenges

    @property
    def arenas(self) -> Arenas:
        """The arenas; raises GatewayNotStarted when the app is not running."""
        return self._started().arenas

    @property
    def seeks(self) -> Seeks:
        """The seek queue; raises GatewayNotStarted when the app is not running."""
        return self._started().seeks

    @property
    def source(self) -> MatchSource:
        """The logs, live or archived; raises GatewayNotStarted when the app is not running."""
        return self._started().source

    @property
    def store(self) -> RedisEventStore:
        """The event store (read only); raises GatewayNotStarted when the app is not running."""
        return self._started().store

    # -- helpers -------------------------------------------------------------------------------

    def match_id_of(self, request: Request) -> str:
        """The request's match id, checked; 404 no_match for one no match could have."""
        match_id: str = request.params["match_id"]
        try:
            validate_match_id(match_id)
        except InvalidMatchId as e:
            raise ApiError(404, "no_match", str(e)) from None
        return match_id

    async def authorize(self, request: Request, match_id: str, seat: int) -> Credential:
        """Check the bearer token opens this seat (a seat token of it, or the account token of
        the account holding it); return it as a credential (what limits count it by, and what
        a stream opened with it ends with)."""
        token = _bearer(request)
        if is_account_token(token):
            account = await self._account_of(token, request.client)
            holder = self._holders.get(f"{match_id} {seat}")
            if holder is None:
                holder = await self.lobby.holder(match_id, seat)
                if holder is None:  # an archived match: its record is in the archive
                    holder = (await self._archived_fields(match_id)).get(f"account:{seat}")
                if holder is not None:
                    self._holders.put(f"{match_id} {seat}", holder)
            if holder != account.id:
                raise ApiError(403, "not_your_seat", f"your account does not hold seat {seat}")
            return Credential("account", digest(token), account.id)
        try:
            hashed, (token_match, token_seat) = await self._token(request)
        except ApiError as e:  # an archived match's tokens are in its archived record
            hashed = token_hash(_bearer(request))
            kept = (await self._archived_fields(match_id)).get(f"token:{seat}")
            if e.status != 401 or kept is None or not secrets.compare_digest(kept, hashed):
                raise
            token_match, token_seat = match_id, seat
        if token_match != match_id:
            raise ApiError(403, "wrong_match", "this seat token is for another match")
        if token_seat != seat:
            raise ApiError(
                403, "wrong_seat", f"this token plays seat {token_seat}, not seat {seat}"
            )
        return Credential("seat", hashed)

    async def _account_of(self, token: str, client: str) -> Account:
        """The account an account token opens; 401 for a token that opens none, 403 banned."""
        key = digest(token)
        account = self._accounts.get(key)
        if account is None:
            await self.auth_failures.check(self.redis, client)  # guessing waits
            account = await self.accounts.authenticate(token)
            if account is None:
                await self.auth_failures.hit(self.redis, client)
                raise ApiError(401, "unauthorized", "unknown, rotated or revoked account token")
            self._accounts.put(key, account)
        if account.banned:
            raise ApiError(403, "account_banned", "this account is banned")
        return account

    def account_credential(self, request: Request, account: Account) -> Credential:
        """The account token a request bears, as the credential a stream is opened with."""
        return Credential("account", digest(_bearer(request, "an account token")), account.id)

    def _forget(self, ended: Ended) -> None:
        """A credential ended (told by the revocation stream): forget what it opened, so the
        next request bearing it asks Redis."""
        if ended.kind == "seat":
            self._seats.drop(ended.token)
        elif ended.token:
            self._accounts.drop(ended.token)
        else:  # a ban, or its lift: every token of the account this process remembers
            self._accounts.drop_if(lambda account: account.id == ended.account)

    def forget_token(self, request: Request) -> None:
        """Forget what the request's account token opened: it was just rotated or revoked
        here, and stops working here at once (elsewhere within DOMINO_GATEWAY_TOKEN_CACHE_S)."""
        self._accounts.drop(digest(_bearer(request, "an account token")))

    async def account(self, request: Request) -> Account:
        """The account whose token the request bears; 401 without one."""
        token = _bearer(request, "an account token")
        if not is_account_token(token):
            raise ApiError(401, "unauthorized", "this needs an account token (dab_...)")
        return await self._account_of(token, request.client)

    async def maybe_account(self, request: Request) -> Account | None:
        """The account whose token the request bears, None when it bears no token."""
        if request.header(b"authorization") is None:
            return None
        return await self.account(request)

    async def operator(self, request: Request) -> None:
        """Refuse (403) unless the request bears the operator's token, and count the wrong
        token against the client's address (429 over its budget: see :meth:`_is_operator`)."""
        token = _bearer(request, "the operator token")
        if not await self._is_operator(request, token):
            await self.operator_failures.count(self.redis, request.client)
            raise ApiError(403, "not_operator", "only the operator may do this")

    async def _is_operator(self, request: Request, token: str) -> bool:
        """Whether ``token`` is the operator's; raises LimitExceeded (429), before comparing
        it, while the request's client address is over its wrong operator tokens."""
        await self.operator_failures.check(self.redis, request.client)  # guessing waits
        expected = self.config.operator_token
        return bool(expected) and secrets.compare_digest(digest(token), digest(expected))

    async def _token(self, request: Request) -> tuple[str, tuple[str, int]]:
        token = _bearer(request)
        if is_account_token(token):
            raise ApiError(401, "unauthorized", "this needs a seat token, not an account token")
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
        self, match_id: str, command_id: str, command: Any, charge: Charge | None = None
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command and wait for its outcome; (None, versions) if it was applied before,
        (None, None) if no answer came in time. A ``charge`` counts it against its limit as
        it is sent (LimitExceeded: not sent); give it only when no copy is on its way.

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
            outcome, done = await self._send(match_id, command_id, command, charge)
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
        self, match_id: str, command_id: str, command: Any, charge: Charge | None = None
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command once and wait for its outcome, as :meth:`_await` answers.

        A rejection of a command whose id is applied all the same (a copy sent through another
        gateway, or before a lost answer) is no rejection: the move is in the log, and this
        copy is its replay.
        """
        hub = self.hub
        fut = hub.expect(match_id, command_id)
        try:
            done = await self.sender.send(match_id, command_id, command, charge)
            copy = done == INFLIGHT  # another gateway sent it: its outcome, as a replay
            if done is not None and not copy:
                return None, done
            # no answer in time is an empty Outcome: the answer may be lost or late, and the
            # store knows
            outcome = await hub.outcome(fut, self.config.move_timeout_s)
            if outcome.version is not None:
                return (Outcome(outcome.version, replayed=True) if copy else outcome), None
            done = cast(bytes | None, await self.redis.hget(self.topo.dedupe(match_id), command_id))
            if done is not None:
                replayed = copy or outcome.rejection is not None
                return Outcome(version=_first(done), replayed=replayed), None
            if outcome.rejection is not None:  # refused: the id is free for a retry
                await self.redis.delete(self.topo.inflight(match_id, command_id))
            return (None if outcome.rejection is None else outcome), None
        finally:
            hub.forget(match_id, command_id, fut)

    async def _start_match(self, match: LobbyMatch) -> None:
        """Every seat is taken: create the match in the log (once, whoever calls it)."""
        await release_match(self.redis, self.topo, match.match_id)  # its holds end as it starts
        command = CreateMatch(
            rules=match.rules,
            players=match.names,
            bots=match.pools,
            deadline_ms=match.deadline_ms,
            accounts=match.accounts if any(match.accounts) else (),
            forfeit_after=match.forfeit_after,
            max_rounds=match.max_rounds,
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
        for account in dict.fromkeys(a for a in match.accounts if a is not None):
            seats = [s for s, a in enumerate(match.accounts) if a == account]
            await self.feeds.started(
                account,
                match.match_id,
                {
                    "seats": seats,
                    "rules": msgspec.to_builtins(match.rules),
                    "players": list(match.names),
                    "deadline_ms": match.deadline_ms,
                    "links": {
                        **self._links(match.match_id),
                        "seats": {str(s): self._links(match.match_id, s) for s in seats},
                    },
                },
            )

    async def start_for(
        self,
        rules: Rules,
        seats: list[Account | str],
        deadline_ms: int | None = None,
        creator: str = "",
        match_id: str | None = None,
    ) -> LobbyMatch:
        """Start a match now whose seats are held by these accounts and house pools (a str is
        a pool): the lobby record, the match, and each account told on its feed."""
        match_id = match_id or new_match_id()
        await self.check_pools([a for a in seats if isinstance(a, str)])
        accounts = tuple(a.id if isinstance(a, Account) else None for a in seats)
        pools = tuple(None if isinstance(a, Account) else a for a in seats)
        names = tuple(a.name if isinstance(a, Account) else a for a in seats)
        match = await self.lobby.create(
            match_id,
            rules,
            pools,
            names,
            self.config.default_deadline_ms if deadline_ms is None else deadline_ms,
            accounts=accounts,
            creator=creator,
            forfeit_after=self.config.forfeit_after,
            max_rounds=self.config.max_rounds,
        )
        await self._start_match(match)
        return match

    async def start_arena(self, arena: Arena, pairing: Pairing, match_id: str) -> None:
        """The arenas' starter: the match of a pairing, its seats by entrant (an account, or
        house:<pool>)."""
        seats: list[Account | str] = []
        for key in pairing.seats:
            if key.startswith("house:"):
                seats.append(key.removeprefix("house:"))
            elif (account := await self.accounts.get(key)) is not None:
                seats.append(account)
            else:
                raise ValueError(f"arena entrant {key!r} has no account")
        await self.start_for(
            arena.rules, seats, arena.deadline_ms or None, creator="arena", match_id=match_id
        )

    async def start_seek(self, kind: Kind, group: Group) -> str | None:
        """The matchmaker's starter: a match for a group of seeks (house bots fill the rest,
        counted for each seek's account and address: none if one is at its limit)."""
        found = [await self.accounts.get(s.account) for s in group.seeks]
        seats: list[Account | str] = [a for a in found if a is not None and not a.banned]
        seats += [self.config.seek_house_pool] * (kind.players - len(seats))
        match_id = new_match_id()
        counted = []
        if len(group.seeks) < kind.players:
            try:
                counted = await self.lobby_limits.house_match(
                    self.redis,
                    match_id,
                    [s.account for s in group.seeks],
                    [s.client for s in group.seeks],
                    self.match_over,
                )
            except LimitExceeded as e:
                log.info("seek not filled with house bots", kind=kind.name, limit=e.limit)
                return None
        try:
            match = await self.start_for(kind.rules(), seats, match_id=match_id)
        except ApiError as e:
            log.error("seek match could not start", kind=kind.name, error=str(e))
            await self.lobby_limits.house_match_failed(self.redis, counted)
            return None
        return match.match_id

    async def may_fill(self, seek: Seek) -> bool:
        """Whether house bots may fill ``seek``: its account and address are under their
        limits of house matches not over."""
        return await self.lobby_limits.may_fill(
            self.redis, seek.account, seek.client, self.match_over
        )

    async def match_over(self, match_id: str) -> bool:
        """Whether a match is over: its log ends it, or it never started and has left the
        lobby (cancelled, expired)."""
        version = await self.source.version(match_id)
        if version == 0:
            waiting = await self.lobby.get(match_id)
            return waiting is None or waiting.status == "cancelled"
        last = await self.source.read(match_id, version, version)
        return not last or last[0].type == "match_ended"

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
        account = await self.maybe_account(request)
        body = decode_body(await request.json_body(self.config.max_body_bytes), _CREATE, "match")
        players = body.rules.players or len(body.seats)
        rules = self.rules_of(body.rules, players)
        if EXTERNAL in body.seats:
            raise ApiError(
                422,
                "invalid_match",
                f"{EXTERNAL!r} is not a house bot pool: use null for an open seat",
            )
        if body.names is not None and len(body.names) != len(body.seats):
            raise ApiError(
                422,
                "invalid_match",
                f"names has {len(body.names)} entries for {len(body.seats)} seats",
            )
        names = await self._seat_names(body.seats, body.names)
        deadline_ms = self.deadline_of(body.deadline_ms, open_seats=None in body.seats)
        max_rounds = self._max_rounds(body.max_rounds)
        await self.check_pools(body.seats)
        command = CreateMatch(
            rules=rules,
            players=names,
            bots=tuple(body.seats),
            deadline_ms=deadline_ms,
            max_rounds=max_rounds,
            forfeit_after=self.config.forfeit_after,
        )
        checked = decide(None, command)  # the engine's own checks, before anything is stored
        if isinstance(checked, Rejection):
            raise ApiError(422, "rejected", checked.message, **_why(checked))
        match_id = new_match_id()
        owner = None if account else "own_" + secrets.token_urlsafe(24)
        hold = None
        if None in body.seats:  # an open match counts against its creator until it starts
            hold = await self.open_matches.hold(self.redis, request.client, match_id)
        counted = []
        if any(pool is not None for pool in body.seats):  # house bots: counted until it ends
            try:
                counted = await self.lobby_limits.house_match(
                    self.redis,
                    match_id,
                    [account.id] if account else [],
                    [request.client],
                    self.match_over,
                )
            except LimitExceeded:
                if hold is not None:
                    await self.open_matches.drop(self.redis, hold)
                raise
        try:
            match = await self.lobby.create(
                match_id,
                rules,
                tuple(body.seats),
                names,
                deadline_ms,
                creator=account.id if account else f"owner:{token_hash(owner or '')}",
                forfeit_after=self.config.forfeit_after,
                max_rounds=max_rounds,
            )
        except Exception:
            if hold is not None:
                await self.open_matches.drop(self.redis, hold)
            await self.lobby_limits.house_match_failed(self.redis, counted)
            raise
        if match.status == "started":
            await self._start_match(match)
        log.info("lobby match created", match_id=match_id, open=match.pools.count(None))
        out: dict[str, Any] = {"match": match.public(), "links": self._links(match_id)}
        if owner is not None:
            out["owner_token"] = owner  # shown once: it cancels the match while it waits
        return Response.json(out, status=201)

    def rules_of(self, body: RulesBody, players: int) -> Rules:
        """The rules a create or a challenge asks for, within the service's caps."""
        try:
            rules = Rules.make(
                _option(_FAMILIES, "family", body.family),
                players=players,
                partners=body.partners,
                top=body.top,
                target=body.target,
                next_leader=_option(_NEXT_LEADERS, "next_leader", body.next_leader),
                reveal_stock=body.reveal_stock,
            )
        except RulesError as e:
            raise ApiError(422, "rejected", str(e), reason="bad_rules", rule=e.rule) from None
        if rules.target > self.config.max_target:
            raise ApiError(
                422,
                "rejected",
                f"target is at most {self.config.max_target} on this service",
                reason="bad_rules",
                rule="E6" if rules.family == "express" else "S7",  # the target option's rule
            )
        return rules

    def deadline_of(self, asked: int | None, open_seats: bool) -> int:
        """Each turn's limit: what was asked, within bounds; the default when nothing was. A
        match with outside players always has one, so a player who leaves cannot freeze it."""
        if asked is None:
            return self.config.default_deadline_ms if open_seats else 0
        if asked == 0 and not open_seats:
            return 0
        low, high = 200, self.config.max_deadline_ms
        if not low <= asked <= high:
            raise ApiError(
                422,
                "invalid_match",
                f"deadline_ms is {low} to {high}"
                + ("" if open_seats else " (or 0: no limit between house bots)"),
            )
        return asked

    def _max_rounds(self, asked: int | None) -> int:
        cap = self.config.max_rounds
        if asked is None:
            return cap
        if not 1 <= asked <= cap:
            raise ApiError(422, "invalid_match", f"max_rounds is 1 to {cap}")
        return asked

    async def _seat_names(
        self, seats: list[str | None], asked: list[str] | None
    ) -> tuple[str, ...]:
        """Each seat's name: a house seat is named by its pool; an open seat's placeholder is
        checked like a guest's name."""
        out: list[str] = []
        for i, pool in enumerate(seats):
            name = asked[i] if asked else None
            if pool is not None:
                if name is not None and name != pool:
                    raise ApiError(
                        422,
                        "invalid_name",
                        f"seat {i} is played by the house pool {pool!r} and is named by it",
                    )
                out.append(pool)
            elif name is None:
                out.append(f"seat{i}")
            else:
                out.append(await self._guest_name(name))
        return tuple(out)

    async def _guest_name(self, name: str, taken: tuple[str, ...] = ()) -> str:
        """A name a player without an account may use: the account names' rules, and not a
        registered account's name, a house pool's, or another seat's of the match."""
        try:
            check_name(name)
        except BadName as e:
            raise ApiError(422, "invalid_name", str(e)) from None
        if await self.accounts.by_name(name) is not None:
            raise ApiError(422, "invalid_name", f"{name!r} is a registered account's name")
        if skeleton(name) in {skeleton(t) for t in taken}:
            raise ApiError(422, "invalid_name", f"{name!r} is already a player of this match")
        return name

    async def check_pools(self, seats: Sequence[str | None]) -> None:
        """Refuse house pools nobody serves: their seats would never move."""
        for pool in dict.fromkeys(p for p in seats if p is not None):
            if pool not in STRATEGIES:
                known = ", ".join(sorted(STRATEGIES))
                raise ApiError(
                    422, "unknown_pool", f"no house bot pool {pool!r}: the pools are {known}"
                )
            if not await pool_served(self.redis, self.topo, pool):
                raise ApiError(
                    409, "pool_unavailable", f"no worker of the house pool {pool!r} is running"
                )

    async def join(self, request: Request) -> Response:
        """POST /matches/{id}/join: take an open seat; the seat token is in the answer, once.
        With an account token the seat is the account's: its name, its ratings, and its token
        opens the seat too."""
        await self.lobby_writes.hit(self.redis, request.client)
        match_id = self.match_id_of(request)
        account = await self.maybe_account(request)
        raw = await request.json_body(self.config.max_body_bytes)
        body = decode_body(raw, _JOIN, "join") if raw.strip() else JoinBody()
        if body.seat is not None and body.seat < 0:
            raise ApiError(404, "no_such_seat", f"seat {body.seat} does not exist (C3)")
        name = body.name
        if account is not None:
            if name is not None and name != account.name:
                raise ApiError(422, "invalid_name", "an account plays under its own name")
            name = account.name
            await self.under_cap(account)
        elif name is not None:
            waiting = await self.lobby.get(match_id)
            others = tuple(s.name for s in waiting.seats if s.kind != "open") if waiting else ()
            name = await self._guest_name(name, others)
        hold = await self.waiting_seats.hold(self.redis, request.client, match_id)
        try:
            match, seat, token = await self.lobby.join(
                match_id, body.seat, name, account.id if account else None
            )
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

    async def under_cap(self, account: Account) -> None:
        """Refuse (409) an account already playing its most matches at once."""
        live = await self.feeds.live(account.id)
        cap = self.config.matches_per_account
        if len(live) >= cap:
            raise ApiError(
                409,
                "too_many_matches",
                f"{account.name} is playing {len(live)} matches; {cap} at once at most",
            )

    async def lobby_write(self, request: Request) -> None:
        """Count a lobby write (a match, a join, an account, a challenge) against the
        client's budget."""
        await self.lobby_writes.hit(self.redis, request.client)

    async def seats_of(self, account: Account, match_id: str) -> list[int]:
        """The seats of a match the account holds."""
        match = await self.lobby.get(match_id)
        if match is None:
            return []
        return [s for s, a in enumerate(match.accounts) if a == account.id]

    async def _places(self, *wanted: tuple[Concurrency, str]) -> Callable[[], None]:
        """Take a stream's place under each (limit, subject): LimitExceeded past any of them,
        with none taken; return what frees them all."""
        taken: list[tuple[Concurrency, Lease]] = []

        def release() -> None:
            for limit, lease in taken:
                limit.release(lease)

        try:
            for limit, subject in wanted:
                taken.append((limit, await limit.acquire(self.redis, subject)))
        except BaseException:
            release()
            raise
        return release

    async def seat_places(self, request: Request, match_id: str, seat: int) -> Callable[[], None]:
        """Take the places a seat's stream or socket takes: one of its client address's and
        one of the seat's (429 past either); return what frees them."""
        return await self._places(
            (self.player_streams, request.client), (self.seat_streams, f"{match_id}:{seat}")
        )

    async def open_account_stream(
        self, account: Account, request: Request
    ) -> Callable[[], Awaitable[None]]:
        """Count a new account stream, by its client address and by its account (429 past
        either limit); return what closes it."""
        release = await self._places(
            (self.player_streams, request.client), (self.account_streams, f"acct:{account.id}")
        )

        async def close() -> None:
            release()

        return close

    async def open_public_stream(self, request: Request) -> Callable[[], Awaitable[None]]:
        """Count a new public stream of the request's client address, with its spectator
        streams (429 past the limit); return what closes it."""
        release = await self._places((self.public_streams, request.client))

        async def close() -> None:
            release()

        return close

    async def rating_of(self, account_id: str, family: str) -> float:
        """The account's rating (ordinal) in a family; 0 for one not rated yet."""
        await self.standings(RATINGS_FRESH_S)
        return self._ratings.get((family, account_id), 0.0)

    async def standings(self, fresh_s: float) -> Standings:
        """The ratings fold of every finished match's result, no older than ``fresh_s``
        seconds: one fold at a time, shared by every caller, made off the event loop."""
        if time.monotonic() - self._standings_at > fresh_s:
            async with self._folding:
                if time.monotonic() - self._standings_at > fresh_s:  # nobody did it meanwhile
                    started = time.monotonic()
                    projector = RatingsProjector(self.store, self._checkpoints())
                    results = await read_results(self.redis, projector)
                    folded = await asyncio.to_thread(standings, results)
                    self._ratings = {(r.family, _rated_key(r)): r.ordinal for r in folded.table}
                    self._standings, self._standings_at = folded, started
        return self._standings

    def _checkpoints(self) -> RedisCheckpoints:
        return RedisCheckpoints(
            self.redis, partitions=self.settings.partitions, prefix=self.settings.prefix
        )

    async def cancel_match(self, request: Request) -> Response:
        """DELETE /matches/{id}: call off a match still waiting for players (its creator or the
        operator); the operator may also end a live match, unrated."""
        match_id = self.match_id_of(request)
        token = _bearer(request, "the creator's account or owner token")
        is_operator = await self._is_operator(request, token)
        waiting = await self.lobby.get(match_id)
        if not is_operator:
            # a refusal the operator's token would have passed counts as a wrong one of it
            if waiting is None:
                await self.operator_failures.count(self.redis, request.client)
                raise ApiError(404, "no_match", f"no match {match_id!r} in the lobby")
            if is_account_token(token):
                mine = (await self._account_of(token, request.client)).id == waiting.creator
            else:
                mine = waiting.creator == f"owner:{token_hash(token)}"
            if not mine:
                await self.operator_failures.count(self.redis, request.client)
                raise ApiError(403, "not_creator", "only the match's creator may cancel it")
        if waiting is not None:
            cancelled = await self.lobby.cancel(match_id)
            if cancelled:
                await release_match(self.redis, self.topo, match_id)
                log.info("lobby match cancelled", match_id=match_id)
                return Response.json({"match_id": match_id, "status": "cancelled"})
        if not is_operator:
            raise ApiError(
                409, "match_started", "the match has started: its players resign or abort"
            )
        if await self.source.version(match_id) == 0:
            raise ApiError(404, "no_match", f"no match {match_id!r}")
        outcome, _ = await self._await(match_id, f"cancel:{match_id}", CancelMatch())
        if outcome is not None and outcome.rejection is not None:
            r = outcome.rejection
            raise ApiError(409, "rejected", r.message, **_why(r))
        log.info("match cancelled by the operator", match_id=match_id)
        return Response.json({"match_id": match_id, "status": "cancelled"})

    async def list_matches(self, request: Request) -> Response:
        """GET /matches?status=open|live|finished[&limit=n][&cursor=c][&family=f][&player=name]:
        a page of the oldest open matches, or of the live or finished ones most recently
        updated; ``next`` is the cursor of the page after (None: no more). A page reads at most
        ``limit`` ids of each partition, and the records of its matches only. With a filter,
        pages are read on until ``limit`` matches are found or :data:`FILTERED_PAGES` were
        read: a page of a rare filter may hold fewer, and still have a ``next``."""
        status = request.query("status")
        status = "open" if status is None else status  # ?status= is no status
        if status not in ("open", "live", "finished"):
            raise ApiError(422, "invalid_query", "status is open, live or finished")
        limit = _count(request, "limit", 1, LISTED, LISTED)
        cursor = _cursor(request)
        family = request.query("family")
        if family is not None and family not in _FAMILIES:
            raise ApiError(422, "invalid_query", "family is express or straight")
        player = request.query("player")
        if player is not None and not 0 < len(player) <= NAME_CHARS:
            raise ApiError(
                422, "invalid_query", f"player is a name of 1 to {NAME_CHARS} characters"
            )

        def wanted(family_of: str, players: Sequence[str]) -> bool:
            return (family is None or family_of == family) and (player is None or player in players)

        rows: list[Any] = []
        after = cursor
        queries = Queries(self.redis, self.settings)
        for _ in range(FILTERED_PAGES if family or player else 1):
            need = limit - len(rows)
            if status == "open":
                waiting, after = await self.lobby.open_page(need, after)
                rows += [m.public() for m in waiting if wanted(m.rules.family, m.names)]
            else:  # newest first, each page oldest first: an older page goes before
                summaries, after = await queries.page(status == "finished", need, after)
                rows[:0] = [
                    msgspec.to_builtins(s) for s in summaries if wanted(s.family, s.players)
                ]
            if after is None or len(rows) >= limit:
                break
        next_page = None if after is None else after.text()
        return Response.json({"status": status, "matches": rows, "next": next_page})

    async def replay(self, request: Request) -> Held:
        """GET /matches/{id}/replay[?seat=k]: every event and the view after it, as everyone
        or (the match over) as one seat saw them (C8). One read of the log, one fold, made
        and written in a place for bulk reads; a finished match's is made once."""
        match_id = self.match_id_of(request)
        seat = _count(request, "seat", 0, None, None)
        key = ("replay", match_id, seat)
        place = await self.bulk.take()
        try:
            kept = self.finished.get(key)
            if kept is None:
                kept, over = await self._replay(match_id, seat)
                if over:
                    self.finished.put(key, kept)
        except BaseException:
            place.release()
            raise
        place.charge(len(kept.body))
        return Held(Response(200, kept.body, [JSON_TYPE]), place)

    async def _replay(self, match_id: str, seat: int | None) -> tuple[Kept, bool]:
        """The replay's body, and whether the match is over (its replay never changes)."""
        version = await self.source.version(match_id)
        if version == 0:
            raise ApiError(404, "no_match", f"no match {match_id!r} (or it has not started)")
        if version > REPLAYED:
            raise ApiError(
                413, "replay_too_long", f"the match has {version} events: {REPLAYED} at most"
            )
        records = await self.source.read(match_id, 1, version)
        created = JSON.decode_envelope(records[0].data).event
        if not isinstance(created, MatchCreated):
            raise ApiError(404, "no_match", f"the log of {match_id!r} does not open a match")
        over = isinstance(JSON.decode_envelope(records[-1].data).event, MatchEnded)
        if seat is not None:
            if seat >= created.rules.players:
                raise ApiError(404, "no_such_seat", f"seat {seat} does not exist (C3)")
            if not over:
                raise ApiError(
                    403, "match_not_over", "a seat's replay shows its hand: once the match is over"
                )
        frames: list[ReplayFrame] = []
        state: MatchState | None = None
        for i, record in enumerate(records):
            env = JSON.decode_envelope(record.data)
            state = evolve(state, env.event)
            frames.append(
                ReplayFrame(
                    id=env.version, event=redact(env.event, seat), view=view_for(state, seat)
                )
            )
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # a long match: let play have the loop a while
        replay = Replay(
            match_id=match_id, seat=seat, status="finished" if over else "live", frames=frames
        )
        return Kept(msgspec.json.encode(replay)), over

    async def ratings(self, request: Request) -> Response:
        """GET /ratings?family=express|straight: a family's ratings table, best first."""
        asked = request.query("family")
        family = _FAMILIES.get("express" if asked is None else asked)  # ?family= is no family
        if family is None:
            raise ApiError(422, "invalid_query", "family is express or straight")
        table = (await self.standings(STANDINGS_FRESH_S)).table
        rows = [r for r in table if r.family == family]
        return Response.json(RatingsAnswer(family=family, ratings=rows))

    async def player(self, request: Request) -> Response:
        """GET /players/{key}[?limit=n][&cursor=c]: an identity's results, ratings, their
        history and a page of its latest matches, read from its own index (key: an account id,
        house:<pool> or guest:<name>)."""
        key: str = request.params["key"]
        if not 0 < len(key) <= KEY_CHARS:  # no key is longer: nothing to look up
            raise ApiError(404, "no_player", "no player has a key like that")
        limit = _count(request, "limit", 1, RECENT, RECENT)
        cursor = _cursor(request)
        folded = await self.standings(STANDINGS_FRESH_S)
        line = await Queries(self.redis, self.settings).result(key)
        projector = RatingsProjector(self.store, self._checkpoints())
        recent, after = await read_played(self.redis, projector, key, limit, cursor)
        played = folded.played.get(key, [])
        if line is None and not played and not recent:
            raise ApiError(404, "no_player", f"no player {key!r} has played here")
        if line is not None:
            name = line.name
        else:
            last = recent[0] if recent else played[-1]
            name = shown_name(key, last.players[last.keys().index(key)])
        results = PlayerResults()
        if line is not None:
            results = PlayerResults(
                **{f: getattr(line, f) for f in PlayerResults.__struct_fields__}
            )
        return Response.json(
            PlayerAnswer(
                key=key,
                name=name,
                kind=kind_of(key),
                results=results,
                ratings=[r for r in folded.table if r.key == key],
                history=folded.history.get(key, []),
                recent=[_recent(r, key) for r in recent],
                next=None if after is None else after.text(),
            )
        )

    async def get_match(self, request: Request) -> Response:
        """GET /matches/{id}: the lobby record and how far the match has got."""
        match_id = self.match_id_of(request)
        match = await self.lobby.get(match_id)
        version = await self.source.version(match_id)
        if match is None and version == 0:
            raise ApiError(404, "no_match", f"no match {match_id!r}")
        if match is None and await self.source.archived(match_id):
            match = await self._archived_lobby(match_id)
        out: dict[str, Any] = match.public() if match else {"match_id": match_id}
        out["version"] = version
        out["links"] = self._links(match_id)
        return Response.json(out)

    async def _archived_fields(self, match_id: str) -> dict[str, str]:
        """The fields of the lobby record an archived match had (kept beside its log; its
        tokens only as their hashes); none for a match not archived or not from the lobby."""
        archive = self.source.archive
        if archive is None or not await self.source.archived(match_id):
            return {}
        extra = await archive.extra(match_id)
        if extra is None:
            return {}
        return msgspec.json.decode(extra, type=dict[str, str])

    async def _archived_lobby(self, match_id: str) -> LobbyMatch | None:
        """The lobby record an archived match had, if it had one."""
        fields = await self._archived_fields(match_id)
        return parse_record(match_id, fields) if fields else None

    async def whoami(self, request: Request) -> Response:
        """GET /seat: which match and seat the bearer token plays."""
        _, (match_id, seat) = await self._token(request)
        return Response.json(
            {"match_id": match_id, "seat": seat, "links": self._links(match_id, seat)}
        )

    # -- streams -------------------------------------------------------------------------------

    def resume_point(self, request: Request) -> int | None:
        raw = request.query("after")
        if raw is None:
            raw = request.header(b"last-event-id")
        if raw is None or raw == "":
            return None
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:  # "²" is a digit to isdigit
            raise ApiError(400, "bad_resume", "after / Last-Event-ID is an event id: 0, 1, 2, ...")
        return int(raw)

    def wants_everything(self, request: Request) -> bool:
        """Whether a stream sends every event (``events=all``, the default) or, with
        ``events=minimal``, only those :func:`essential` keeps; 422 for anything else."""
        events = request.query("events")
        if events not in (None, "all", "minimal"):
            raise ApiError(422, "invalid_query", "events is all or minimal")
        return events != "minimal"

    def wants_views(self, request: Request) -> bool:
        """``views=1``: a snapshot after each batch of events and at the end, each with the
        deadline of the seat to move; ``views=0`` (or none) leaves the stream as it was."""
        views = request.query("views")
        if views not in (None, "0", "1"):
            raise ApiError(422, "invalid_query", "views is 1 or 0")
        return views == "1"

    def _until_turn(self, request: Request) -> bool:
        """``until=turn``: the seat's stream ends after its first turn line."""
        until = request.query("until")
        if until not in (None, "turn"):
            raise ApiError(422, "invalid_query", "until is turn (or left out)")
        return until == "turn"

    def wants_sse(self, request: Request) -> bool:
        fmt = request.query("format")
        if fmt is not None:
            if fmt not in ("ndjson", "sse"):
                raise ApiError(422, "invalid_query", "format is ndjson or sse")
            return fmt == "sse"
        return "text/event-stream" in (request.header(b"accept") or "")

    async def seat_stream(self, request: Request) -> StreamResponse:
        """GET /matches/{id}/seats/{seat}/stream: what the seat may see, as it happens."""
        match_id = self.match_id_of(request)
        seat: int = request.params["seat"]
        credential = await self.authorize(request, match_id, seat)
        after = self.resume_point(request)
        sse = self.wants_sse(request)
        everything = self.wants_everything(request)
        until_turn = self._until_turn(request)
        views = self.wants_views(request)
        release = await self.seat_places(request, match_id, seat)
        try:
            return await self._open_stream(
                match_id, seat, sse, after, everything, release, until_turn, views, credential
            )
        except BaseException:
            release()
            raise

    async def spectate(self, request: Request) -> StreamResponse | Held:
        """GET /matches/{id}/stream: the public view (C8), as it happens. Opening one that
        reads much of the log (resumed more than RESUMED_CHEAPLY events back, or of a match
        not followed here yet) is a bulk read: it takes a place while it opens, and while it
        writes a finished match. A spectator resuming a followed match after a drop is not."""
        match_id = self.match_id_of(request)
        after = self.resume_point(request)
        sse = self.wants_sse(request)
        everything = self.wants_everything(request)
        views = self.wants_views(request)
        feed = self.hub.feeds.get(match_id)
        if feed is not None and (after is None or feed.version - after <= RESUMED_CHEAPLY):
            return await self._spectate(match_id, after, sse, everything, views, request)
        place = await self.bulk.take()
        try:
            stream = await self._spectate(match_id, after, sse, everything, views, request)
        except BaseException:
            place.release()
            raise
        if stream.feed.over:  # its backlog is all it writes: the place is held meanwhile
            place.charge(sum(len(lines) for lines in stream.first))
            return Held(stream, place)
        place.release()
        return stream

    async def _spectate(
        self,
        match_id: str,
        after: int | None,
        sse: bool,
        everything: bool,
        views: bool,
        request: Request,
    ) -> StreamResponse:
        if match_id not in self.hub.feeds:
            exists = await self.lobby.get(match_id) is not None
            if not exists and await self.source.version(match_id) == 0:
                raise ApiError(404, "no_match", f"no match {match_id!r}")
        release = await self._places((self.public_streams, request.client))
        try:
            return await self._open_stream(
                match_id, None, sse, after, everything, release, views=views
            )
        except BaseException:
            release()
            raise

    async def feed_from(self, match_id: str, after: int | None) -> Feed:
        """The match's feed, for a stream or socket that resumes after ``after`` (None: a
        fresh one): 503 when its log cannot be read, 400 when ``after`` is past its end."""
        try:
            feed = await self.hub.follow(match_id)
        except FeedUnavailable as e:
            raise ApiError(503, "unavailable", str(e)) from None
        if after is not None and after > feed.version:
            raise ApiError(
                400,
                "bad_resume",
                f"event {after} does not exist yet: the match is at version {feed.version}",
            )
        return feed

    async def _open_stream(
        self,
        match_id: str,
        seat: int | None,
        sse: bool,
        after: int | None,
        everything: bool,
        release: Callable[[], None],
        until_turn: bool = False,
        views: bool = False,
        credential: Credential | None = None,
    ) -> StreamResponse:
        hub = self.hub
        feed = await self.feed_from(match_id, after)
        sub, version = hub.subscribe(feed, seat, sse, after, everything, until_turn, views=views)
        first = [] if after is None else await hub.backlog(feed, sub, after, version)
        log.debug("stream opened", match_id=match_id, seat=seat, after=after)
        return StreamResponse(
            hub,
            feed,
            sub,
            first,
            self.config.keepalive_s,
            release,
            None if credential is None else (self.credentials, credential),
        )

    # -- moves ---------------------------------------------------------------------------------

    async def move(self, request: Request) -> Response:
        """POST /matches/{id}/seats/{seat}/moves: play, draw or pass, confirmed or rejected."""
        match_id = self.match_id_of(request)
        seat: int = request.params["seat"]
        await self.authorize(request, match_id, seat)
        charge = self.move_charge(match_id, seat)
        try:
            key = move_key(request.header(b"idempotency-key"))
            raw = await request.json_body(self.config.max_body_bytes)
        except ApiError:
            await charge.hit(self.redis)
            raise
        played = await self.play_move(match_id, seat, key, raw, charge)
        headers = charge.headers()
        r = played.rejection
        if r is not None:
            return Response.json(
                {"error": "rejected", **_why(r), "message": r.message, "accepted": False},
                409,
                headers,
            )
        if played.version is None:
            return Response.json({"error": "timeout", "message": TIMED_OUT}, 504, headers)
        return Response.json(
            {"accepted": True, "version": played.version, "replayed": played.replayed},
            200,
            headers,
        )

    def move_charge(self, match_id: str, seat: int) -> Charge:
        """How a move of the seat is counted: every request counts, per seat, and none is sent
        while the seat has had too many moves rejected lately. Both are the seat's own: a match
        sending bad moves never holds up a legal one its account makes in another."""
        limited = f"{match_id}:{seat}"
        return Charge(self.moves, limited, [(self.rejected_moves, limited)])

    async def play_move(
        self, match_id: str, seat: int, key: str, raw: bytes, charge: Charge
    ) -> Outcome:
        """Play the move ``raw`` (a ``Move`` body, JSON) for an authorised seat under the
        Idempotency-Key ``key``, as POST /moves and the seat's socket both do: accepted at a
        version (``replayed`` when this key was applied before), rejected, or no answer in time
        (neither). Raises ApiError when ``raw`` is no move of the seat or ``key`` was used for
        another move, LimitExceeded over a limit. A move is counted by ``charge`` in the call
        that sends it; one that is no move, or a copy of one on its way, on its own first."""
        try:
            body = decode_body(raw, _MOVE, "move")
            if body.seat is not None and body.seat != seat:
                raise ApiError(
                    403, "wrong_seat", f"this token plays seat {seat}, not seat {body.seat}"
                )
        except ApiError:
            await charge.hit(self.redis)
            raise
        command = _command(body, seat)
        command_id = f"gw:{seat}:{key}"
        if (match_id, command_id) in self.hub.flights:
            await charge.hit(self.redis)
            outcome, done = await self._await(match_id, command_id, command)
        else:
            outcome, done = await self._await(match_id, command_id, command, charge)
        if outcome is not None and outcome.rejection is not None:
            _MOVES["rejected"].inc()
            log.debug(
                "move rejected", match_id=match_id, seat=seat, reason=outcome.rejection.reason
            )
            await self.rejected_moves.count(self.redis, f"{match_id}:{seat}")
            return outcome
        if outcome is None and done is not None:
            outcome = Outcome(version=_first(done), replayed=True)
        if outcome is None or outcome.version is None:
            _MOVES["timeout"].inc()
            return Outcome()
        version = outcome.version
        if outcome.replayed:  # what was applied under this key must be this very move
            records = await self.source.read(match_id, version, version)
            if records and not _same_move(JSON.decode_envelope(records[0].data).event, command):
                raise ApiError(
                    409,
                    "idempotency_key_reused",
                    f"Idempotency-Key {key!r} was already used for a different move",
                )
        _MOVES["accepted"].inc()
        return outcome

    # -- misc ----------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """GET /healthz."""
        await self.redis.ping()
        health = Health(
            ok=True, following=len(self.hub.feeds), protocol=PROTOCOL, supported=list(SPOKEN)
        )
        return Response.json(health)

    async def ready(self, request: Request) -> Response:
        """GET /readyz: 200 while the gateway serves (it runs, and its Redis answers), else
        503 with the reason."""
        reason = await self.readiness()
        if reason is not None:
            return Response.json({"ready": False, "reason": reason}, 503)
        return Response.json({"ready": True})

    async def metrics(self, request: Request) -> Response:
        """GET /metrics: the gateway's metrics in Prometheus's text format, for the operator's
        token only (the metrics port, when set, serves them without one, to its own network)."""
        await self.operator(request)
        body, content_type = exposition()
        return Response(200, body, [(b"content-type", content_type.encode())])

    async def openapi(self, request: Request) -> Response:
        """GET /openapi.json."""
        return Response.json(openapi())


def _command(
    body: PlayBody | DrawBody | PassBody | ResignBody | AbortBody, seat: int
) -> Move | Resign | Abort:
    if isinstance(body, PlayBody):
        return PlayTile(seat=seat, tile=body.tile, end=body.end)
    if isinstance(body, DrawBody):
        return DrawTile(seat=seat)
    if isinstance(body, ResignBody):
        return Resign(seat=seat)
    if isinstance(body, AbortBody):
        return Abort(seat=seat)
    return PassTurn(seat=seat)


def _count(request: Request, name: str, low: int, high: int | None, default: T) -> int | T:
    """The whole number query parameter ``name``, ``low`` to ``high``; ``default`` when it
    is not given; 422 invalid_query for anything else."""
    raw = request.query(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:  # "²" is a digit to isdigit
        raise ApiError(422, "invalid_query", f"{name} is a whole number")
    value = int(raw)
    if value < low or (high is not None and value > high):
        upto = "" if high is None else f" to {high}"
        raise ApiError(422, "invalid_query", f"{name} is {low}{upto}")
    return value


def _cursor(request: Request) -> Cursor | None:
    """The ``cursor`` query parameter, a ``next`` a list answered; 422 invalid_query for
    anything else."""
    raw = request.query("cursor")
    if raw is None:
        return None
    try:
        cursor = Cursor.parse(raw)
        validate_match_id(cursor.member)
    except (BadCursor, InvalidMatchId):
        raise ApiError(
            422, "invalid_query", "cursor is the next of a page this list answered"
        ) from None
    return cursor


def _recent(result: MatchResult, key: str) -> RecentMatch:
    """A finished match as an identity's latest matches list it."""
    return RecentMatch(
        match_id=result.match_id,
        ended=result.ended,
        family=result.family,
        players=list(result.players),
        seats=[s for s, k in enumerate(result.keys()) if k == key],
        sides=list(result.sides),
        scores=list(result.scores),
        winner=result.winner,
        reason=result.reason,
    )


def _rated_key(rating: Any) -> str:
    """The identity a ratings row is for (its account id, or house:<pool>)."""
    return str(getattr(rating, "key", rating.name))


def _bearer(request: Request, what: str = "the seat token") -> str:
    """The request's bearer token; 401 when there is none."""
    auth = request.header(b"authorization")
    if not auth or not auth.startswith("Bearer ") or len(auth) > 200:
        raise ApiError(401, "unauthorized", f"send {what} as 'Authorization: Bearer <token>'")
    return auth[7:].strip()


def _same_move(event: AnyEvent, command: Move | Resign | Abort) -> bool:
    """Whether the event an earlier command made is what ``command`` asks for."""
    if isinstance(command, Resign | Abort):
        return isinstance(event, MatchEnded | RoundEnded)
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


def _first(done: bytes) -> int:
    """The first version an applied command made, from its dedupe entry ``first:last``."""
    return int(done.split(b":")[0])


def _why(r: Rejection) -> dict[str, str]:
    """The engine's reason and rule, for an error body."""
    return {"reason": r.reason, "rule": r.rule}


async def _not_found(request: StarletteRequest, exc: Exception) -> JSONResponse:
    GATEWAY_REQUESTS.labels("unmatched", "404").inc()
    return JSONResponse(
        {"error": "not_found", "message": f"no such endpoint {request.url.path}"}, 404
    )


async def _http_error(request: StarletteRequest, exc: Exception) -> JSONResponse:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = "method_not_allowed" if status == 405 else "http_error"
    GATEWAY_REQUESTS.labels("unmatched", str(status)).inc()
    message = f"{request.method} is not allowed here" if status == 405 else str(exc)
    headers = getattr(exc, "headers", None)
    if status == 405:  # every method of the path, not only those of the first route to match
        headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
    return JSONResponse({"error": code, "message": message}, status, headers=headers)


def _allowed(request: StarletteRequest) -> list[str]:
    """The methods the routes of the request's path answer (a path may have one route per
    method: GET and POST /matches)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(route.methods or ())
    return sorted(methods)


def _route_label(route: Route) -> str:
    """A route as its metrics name it: method and path template (``{seat}``, not
    ``{seat:seat}``)."""
    methods = " ".join(sorted(set(route.methods or ()) - {"HEAD"}))
    path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
    return f"{methods} {path}"


def create_app(
    settings: Settings, config: GatewaySettings | None = None, redis_url: str | None = None
) -> Starlette:
    """The gateway app for ``settings`` (Redis, prefix, partitions) and ``config`` (limits);
    raises GatewayConfigError when ``config`` listens beyond loopback with no allowed hosts."""
    url = redis_url or settings.redis_url
    if not url:
        raise ValueError("the gateway needs a Redis: set REDIS_URL")
    config = config or GatewaySettings()
    origins = Origins.of(config, config.host)
    gw = Gateway(settings, config, url)
    register("gateway")  # for GET /metrics, with or without a metrics port
    p = Players(gw)
    m = f"{API}/matches/{{match_id}}"
    moves = (f"{m}/seats/{{seat:seat}}/moves", Endpoint(gw.move))
    seat_stream = (f"{m}/seats/{{seat:seat}}/stream", Endpoint(gw.seat_stream))
    play = (f"{API}/account/play", Endpoint(p.play))
    sockets = SeatSockets(gw)
    socket_path = f"{m}/seats/{{seat:seat}}/socket"
    routes = [
        Route("/healthz", Endpoint(gw.health), methods=["GET"]),
        Route("/readyz", Endpoint(gw.ready), methods=["GET"]),
        Route("/metrics", Endpoint(gw.metrics), methods=["GET"]),
        Route(f"{API}/openapi.json", Endpoint(gw.openapi), methods=["GET"]),
        Route(f"{API}/matches", Endpoint(gw.bulk.admitted(gw.list_matches)), methods=["GET"]),
        Route(f"{API}/matches", Endpoint(gw.create_match), methods=["POST"]),
        Route(f"{API}/seat", Endpoint(gw.whoami), methods=["GET"]),
        Route(m, Endpoint(gw.get_match), methods=["GET"]),
        Route(m, Endpoint(gw.cancel_match), methods=["DELETE"]),
        Route(f"{m}/join", Endpoint(gw.join), methods=["POST"]),
        Route(f"{m}/stream", Endpoint(gw.spectate), methods=["GET"]),
        Route(f"{m}/replay", Endpoint(gw.replay), methods=["GET"]),
        Route(f"{API}/ratings", Endpoint(gw.bulk.admitted(gw.ratings)), methods=["GET"]),
        Route(
            f"{API}/players/{{key:path}}", Endpoint(gw.bulk.admitted(gw.player)), methods=["GET"]
        ),
        Route(*seat_stream, methods=["GET"]),
        Route(*moves, methods=["POST"]),
        Route(socket_path, Endpoint(sockets.upgrade_required), methods=["GET"]),
        Route(f"{API}/accounts", Endpoint(p.register), methods=["POST"]),
        Route(f"{API}/accounts/{{name}}", Endpoint(p.public), methods=["GET"]),
        Route(f"{API}/accounts/{{name}}/ban", Endpoint(p.ban), methods=["POST"]),
        Route(f"{API}/accounts/{{name}}/unban", Endpoint(p.unban), methods=["POST"]),
        Route(f"{API}/accounts/{{name}}/token", Endpoint(p.issue), methods=["POST"]),
        Route(f"{API}/account", Endpoint(p.me), methods=["GET"]),
        Route(f"{API}/account/token", Endpoint(p.rotate), methods=["POST"]),
        Route(f"{API}/account/token", Endpoint(p.revoke), methods=["DELETE"]),
        Route(f"{API}/account/stream", Endpoint(p.events), methods=["GET"]),
        Route(*play, methods=["GET"]),
        Route(f"{API}/challenges", Endpoint(p.challenge), methods=["POST"]),
        Route(f"{API}/challenges", Endpoint(p.challenges), methods=["GET"]),
        Route(f"{API}/challenges/{{challenge_id}}/accept", Endpoint(p.accept), methods=["POST"]),
        Route(f"{API}/challenges/{{challenge_id}}/decline", Endpoint(p.decline), methods=["POST"]),
        Route(f"{API}/challenges/{{challenge_id}}/cancel", Endpoint(p.cancel), methods=["POST"]),
        Route(f"{API}/seeks", Endpoint(p.seek), methods=["POST"]),
        Route(f"{API}/seeks", Endpoint(p.seeks), methods=["GET"]),
        Route(f"{API}/seeks/{{seek_id}}", Endpoint(p.withdraw), methods=["DELETE"]),
        Route(f"{API}/arenas", Endpoint(p.create_arena), methods=["POST"]),
        Route(f"{API}/arenas", Endpoint(p.arenas), methods=["GET"]),
        Route(f"{API}/arenas/{{arena_id}}", Endpoint(p.arena), methods=["GET"]),
        Route(f"{API}/arenas/{{arena_id}}/join", Endpoint(p.enter), methods=["POST"]),
        Route(f"{API}/arenas/{{arena_id}}/leave", Endpoint(p.leave), methods=["POST"]),
        Route(f"{API}/arenas/{{arena_id}}/start", Endpoint(p.start_arena), methods=["POST"]),
        Route(f"{API}/arenas/{{arena_id}}/stream", Endpoint(p.arena_stream), methods=["GET"]),
    ]
    for route in routes:
        if isinstance(route.endpoint, Endpoint):
            route.endpoint.measure(_route_label(route))
    app = App(
        routes=routes,
        lifespan=gw.serving,
        exception_handlers={404: _not_found, 405: _http_error},
        middleware=[Middleware(Pages)],  # the browser pages, ahead of the API's routes
        # the hot paths (moves, and every line of the players' streams) skip the router's walk
        # and the middleware's wrapping of each write
        fast=[("POST", *moves), ("GET", *seat_stream), ("GET", *play)],
        # a version of the protocol not spoken (versions.py), then the Host and Origin of what
        # changes something (origins.py); every answer states the version it is in
        guards=[versions.refusal, origins.refusal],
        stated=[versions.STATED],
        # the seat's socket: its handshake is checked as its stream is (sockets.py)
        sockets=[(socket_path, sockets.app(f"WEBSOCKET {m}/seats/{{seat}}/socket"))],
    )
    app.state.gateway = gw
    return app
