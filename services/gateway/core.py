"""The gateway's shared state: its settings and limits, the clients that exist while it runs,
and what every resource asks of them — who a request's token is (a seat's, an account's, the
operator's), the places a stream takes under its limits, what a stream's query asks, and a
match's feed. The commands a gateway sends, and the matches it starts, build on it
(services/gateway/commands.py); the handlers are services/gateway/resources/.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog
from redis.exceptions import RedisError

from services.config import Settings
from services.gateway.admission import Admission
from services.gateway.config import GatewaySettings
from services.gateway.credentials import Credential, Credentials
from services.gateway.finished import Finished
from services.gateway.http import ApiError, Request
from services.gateway.hub import Feed, FeedUnavailable, Hub
from services.gateway.limits import Cap, Concurrency, Lease, RateLimit
from services.gateway.lobby_limits import LobbyLimits
from services.gateway.protocol import API
from services.gateway.seats import SeatCache
from services.gateway.sender import CommandSender
from services.gateway.streaming import StreamResponse
from services.lobby.accounts import Account, Accounts, digest, is_account_token
from services.lobby.arenas import Arenas
from services.lobby.challenges import Challenges
from services.lobby.revocations import Ended
from services.lobby.seeks import Seeks
from services.lobby.tables import Lobby, token_hash
from services.projections.accounts import AccountFeeds
from services.redis.connection import Client
from services.store import MatchSource
from services.store.base import InvalidMatchId
from services.store.keys import Keys, validate_match_id
from services.store.projection import RedisCheckpoints
from services.store.redis import RedisEventStore

log = structlog.get_logger()

HOLDERS_CACHED_S = 3600.0
"""How long a gateway remembers which account holds a seat (it never changes once taken)."""
READY_PING_S = 2.0
"""A Redis that does not answer a ping within this long leaves the gateway not ready."""


class GatewayNotStarted(RuntimeError):
    """Raised when a handler asks for Redis, the store, the lobby or the feeds while the app is
    not running: before its lifespan has started or after it has ended."""


@dataclass(frozen=True, slots=True)
class Running:
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


class Core:
    """The gateway's state; its Redis client exists while it runs (:attr:`running`, set by the
    app's lifespan: services/gateway/app.py)."""

    def __init__(
        self,
        settings: Settings,
        config: GatewaySettings,
        redis_url: str,
        document: Callable[[], dict[str, Any]],
    ) -> None:
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
        self.document = document  # the OpenAPI document, made from the declarations
        self.running: Running | None = None

    async def readiness(self) -> str | None:
        """None while the gateway serves: it has started and its Redis answers; else why not."""
        running = self.running
        if running is None:
            return "the gateway is not running (starting, or stopped)"
        try:
            await asyncio.wait_for(running.redis.ping(), READY_PING_S)
        except (RedisError, TimeoutError) as e:
            return f"Redis does not answer: {e!r}"
        return None

    def _started(self) -> Running:
        if self.running is None:
            raise GatewayNotStarted("the gateway has not started: its clients exist while it runs")
        return self.running

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

    # -- what a request is, and what it may open ------------------------------------------------

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
        token = bearer(request)
        if is_account_token(token):
            account = await self.account_of(token, request.client)
            holder = self._holders.get(f"{match_id} {seat}")
            if holder is None:
                holder = await self.lobby.holder(match_id, seat)
                if holder is None:  # an archived match: its record is in the archive
                    holder = (await self.archived_fields(match_id)).get(f"account:{seat}")
                if holder is not None:
                    self._holders.put(f"{match_id} {seat}", holder)
            if holder != account.id:
                raise ApiError(403, "not_your_seat", f"your account does not hold seat {seat}")
            return Credential("account", digest(token), account.id)
        try:
            hashed, (token_match, token_seat) = await self.seat_of_token(request)
        except ApiError as e:  # an archived match's tokens are in its archived record
            hashed = token_hash(bearer(request))
            kept = (await self.archived_fields(match_id)).get(f"token:{seat}")
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

    async def account_of(self, token: str, client: str) -> Account:
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
        return Credential("account", digest(bearer(request, "an account token")), account.id)

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
        self._accounts.drop(digest(bearer(request, "an account token")))

    async def account(self, request: Request) -> Account:
        """The account whose token the request bears; 401 without one."""
        token = bearer(request, "an account token")
        if not is_account_token(token):
            raise ApiError(401, "unauthorized", "this needs an account token (dab_...)")
        return await self.account_of(token, request.client)

    async def maybe_account(self, request: Request) -> Account | None:
        """The account whose token the request bears, None when it bears no token."""
        if request.header(b"authorization") is None:
            return None
        return await self.account(request)

    async def operator(self, request: Request) -> None:
        """Refuse (403) unless the request bears the operator's token, and count the wrong
        token against the client's address (429 over its budget: see :meth:`_is_operator`)."""
        token = bearer(request, "the operator token")
        if not await self.is_operator(request, token):
            await self.operator_failures.count(self.redis, request.client)
            raise ApiError(403, "not_operator", "only the operator may do this")

    async def is_operator(self, request: Request, token: str) -> bool:
        """Whether ``token`` is the operator's; raises LimitExceeded (429), before comparing
        it, while the request's client address is over its wrong operator tokens."""
        await self.operator_failures.check(self.redis, request.client)  # guessing waits
        expected = self.config.operator_token
        return bool(expected) and secrets.compare_digest(digest(token), digest(expected))

    async def seat_of_token(self, request: Request) -> tuple[str, tuple[str, int]]:
        """The hash of the request's seat token and the (match, seat) it opens; 401 for none."""
        token = bearer(request)
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

    def links(self, match_id: str, seat: int | None = None) -> dict[str, str]:
        """The paths of a match (and of one of its seats) an answer links to."""
        base = f"{API}/matches/{match_id}"
        links = {"match": base, "spectate": f"{base}/stream"}
        if seat is not None:
            links["stream"] = f"{base}/seats/{seat}/stream"
            links["moves"] = f"{base}/seats/{seat}/moves"
        return links

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

    async def places(self, *wanted: tuple[Concurrency, str]) -> Callable[[], None]:
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
        return await self.places(
            (self.player_streams, request.client), (self.seat_streams, f"{match_id}:{seat}")
        )

    async def open_account_stream(
        self, account: Account, request: Request
    ) -> Callable[[], Awaitable[None]]:
        """Count a new account stream, by its client address and by its account (429 past
        either limit); return what closes it."""
        release = await self.places(
            (self.player_streams, request.client), (self.account_streams, f"acct:{account.id}")
        )

        async def close() -> None:
            release()

        return close

    async def open_public_stream(self, request: Request) -> Callable[[], Awaitable[None]]:
        """Count a new public stream of the request's client address, with its spectator
        streams (429 past the limit); return what closes it."""
        release = await self.places((self.public_streams, request.client))

        async def close() -> None:
            release()

        return close

    def checkpoints(self) -> RedisCheckpoints:
        """How far the projections have read, in Redis: where a fold of the results resumes."""
        return RedisCheckpoints(
            self.redis, partitions=self.settings.partitions, prefix=self.settings.prefix
        )

    async def archived_fields(self, match_id: str) -> dict[str, str]:
        """The fields of the lobby record an archived match had (kept beside its log; its
        tokens only as their hashes); none for a match not archived or not from the lobby."""
        archive = self.source.archive
        if archive is None or not await self.source.archived(match_id):
            return {}
        extra = await archive.extra(match_id)
        if extra is None:
            return {}
        return msgspec.json.decode(extra, type=dict[str, str])

    def resume_point(self, request: Request) -> int | None:
        """Where a stream resumes: ``after`` or Last-Event-ID (None: fresh); 400 bad_resume."""
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

    def wants_sse(self, request: Request) -> bool:
        """Whether a stream is server-sent events (``format=sse``, or the Accept header)."""
        fmt = request.query("format")
        if fmt is not None:
            if fmt not in ("ndjson", "sse"):
                raise ApiError(422, "invalid_query", "format is ndjson or sse")
            return fmt == "sse"
        return "text/event-stream" in (request.header(b"accept") or "")

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

    async def open_stream(
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
        """A seat's (``seat``) or the public stream of a match, from ``after`` or fresh."""
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


def bearer(request: Request, what: str = "the seat token") -> str:
    """The request's bearer token; 401 when there is none."""
    auth = request.header(b"authorization")
    if not auth or not auth.startswith("Bearer ") or len(auth) > 200:
        raise ApiError(401, "unauthorized", f"send {what} as 'Authorization: Bearer <token>'")
    return auth[7:].strip()
