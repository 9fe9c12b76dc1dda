"""The gateway's routes for bots as players: accounts, their event and play streams,
challenges and the seek queue.

Everything here speaks for an account (``Authorization: Bearer dab_...``) except registering,
which anyone may do (limited per address), and the operator's actions. The account stream
tells an account what happens to it — challenges, its matches starting and ending — resumable
by event id; the play stream carries, on one connection, every line of every seat the account
holds, each wrapped with its match and seat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import msgspec
import structlog
from starlette.types import Receive, Scope, Send

from engine.rules import Rules
from engine.strategy import STRATEGIES
from services.core.commands import new_match_id
from services.gateway.config import GatewaySettings
from services.gateway.credentials import Binding, Credential, Credentials, closed_line
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.hub import FeedUnavailable, Hub, Subscriber, Waker
from services.gateway.limits import LimitExceeded, Quota
from services.gateway.lobby_limits import LobbyLimits
from services.gateway.lobby_protocol import (
    ArenaBody,
    ChallengeBody,
    EntrantBody,
    RegisterBody,
    SeekBody,
)
from services.gateway.protocol import Gap, RulesBody
from services.gateway.streaming import OPEN_STREAMS, on_disconnect, start_stream
from services.lobby.accounts import Account, AccountError, Accounts
from services.lobby.arena import Format
from services.lobby.arenas import Arena, ArenaRefused, Arenas
from services.lobby.challenges import Challenge, ChallengeError, Challenges, check_seats
from services.lobby.seeks import KINDS, SeekError, Seeks
from services.lobby.tables import LobbyMatch
from services.projections.accounts import AccountFeeds
from services.redis.lua import Client

log = structlog.get_logger()

POLL_S = 0.5
"""How often a stream looks for what another process wrote (a feed event, a new match)."""
LOOK_S = 0.05
"""How often, at most, a busy play stream looks for the account's new matches."""
SEEK_RETRY_S = 10.0
"""When an account waiting for its most kinds of game may seek again: once one is matched."""


_REGISTER = msgspec.json.Decoder(RegisterBody)
_CHALLENGE = msgspec.json.Decoder(ChallengeBody)
_SEEK = msgspec.json.Decoder(SeekBody)
_ARENA = msgspec.json.Decoder(ArenaBody)
_ENTRANT = msgspec.json.Decoder(EntrantBody)
_FORMATS: dict[str, Format] = {"round_robin": "round_robin", "swiss": "swiss", "arena": "arena"}


class Host(Protocol):
    """What these handlers need of the gateway (services/gateway/app.py)."""

    config: GatewaySettings
    lobby_limits: LobbyLimits

    @property
    def redis(self) -> Client: ...
    @property
    def accounts(self) -> Accounts: ...
    @property
    def feeds(self) -> AccountFeeds: ...
    @property
    def challenges(self) -> Challenges: ...
    @property
    def seeks(self) -> Seeks: ...
    @property
    def hub(self) -> Hub: ...
    @property
    def arenas(self) -> Arenas: ...
    @property
    def credentials(self) -> Credentials: ...

    async def account(self, request: Request) -> Account: ...
    def account_credential(self, request: Request, account: Account) -> Credential: ...
    def forget_token(self, request: Request) -> None: ...
    async def lobby_write(self, request: Request) -> None: ...
    async def operator(self, request: Request) -> None: ...
    async def under_cap(self, account: Account) -> None: ...
    async def check_pools(self, seats: Sequence[str | None]) -> None: ...
    def rules_of(self, body: RulesBody, players: int) -> Rules: ...
    def deadline_of(self, asked: int | None, open_seats: bool) -> int: ...
    def resume_point(self, request: Request) -> int | None: ...
    def wants_sse(self, request: Request) -> bool: ...
    def wants_everything(self, request: Request) -> bool: ...
    async def rating_of(self, account_id: str, family: str) -> float: ...
    async def seats_of(self, account: Account, match_id: str) -> list[int]: ...
    async def open_account_stream(
        self, account: Account, request: Request
    ) -> Callable[[], Awaitable[None]]: ...
    async def open_public_stream(self, request: Request) -> Callable[[], Awaitable[None]]: ...
    async def start_for(
        self,
        rules: Rules,
        seats: list[Account | str],
        deadline_ms: int | None = None,
        creator: str = "",
        match_id: str | None = None,
    ) -> LobbyMatch: ...
    async def match_over(self, match_id: str) -> bool: ...


class Players:
    """The handlers; they use the gateway's clients, which exist while it runs."""

    def __init__(self, gw: Host) -> None:
        self.gw = gw

    # -- accounts ------------------------------------------------------------------------------

    async def register(self, request: Request) -> Response:
        """POST /accounts: a new account and its token, shown once."""
        await self.gw.lobby_write(request)
        body = decode_body(
            await request.json_body(self.gw.config.max_body_bytes), _REGISTER, "account"
        )
        try:
            account, token = await self.gw.accounts.register(body.name)
        except AccountError as e:
            raise ApiError(409 if e.code == "name_taken" else 422, e.code, str(e)) from None
        log.info("account registered", account=account.id, name=account.name)
        return Response.json({"account": account.public(), "token": token}, status=201)

    async def me(self, request: Request) -> Response:
        """GET /account: the account, its live matches, seeks and latest feed event id."""
        account = await self.gw.account(request)
        return Response.json(
            {
                "account": account.public(),
                "live": await self.gw.feeds.live(account.id),
                "seeks": [s.public() for s in await self.gw.seeks.mine(account)],
                "last_event": await self.gw.feeds.last(account.id),
            }
        )

    async def rotate(self, request: Request) -> Response:
        """POST /account/token: a new token (shown once); the old one stops working."""
        account = await self.gw.account(request)
        token = await self.gw.accounts.rotate(account.id)
        self.gw.forget_token(request)
        log.info("account token rotated", account=account.id)
        return Response.json({"token": token})

    async def revoke(self, request: Request) -> Response:
        """DELETE /account/token: the token stops working; the operator may issue another."""
        account = await self.gw.account(request)
        await self.gw.accounts.revoke(account.id)
        self.gw.forget_token(request)
        log.info("account token revoked", account=account.id)
        return Response(204, b"")

    async def public(self, request: Request) -> Response:
        """GET /accounts/{name}: what anyone may know of an account."""
        account = await self._named(request)
        return Response.json({"account": account.public()})

    async def _named(self, request: Request) -> Account:
        name = request.params["name"]
        account = await self.gw.accounts.by_name(name)
        if account is None:
            raise ApiError(404, "no_account", f"no account named {name!r}")
        return account

    async def ban(self, request: Request) -> Response:
        """POST /accounts/{name}/ban (operator): the account can do nothing more; its seeks
        leave the queue. Its matches go on and time out."""
        await self.gw.operator(request)
        account = await self.gw.accounts.ban((await self._named(request)).id)
        for seek in await self.gw.seeks.mine(account):
            await self.gw.seeks.take([seek])
        log.warning("account banned", account=account.id)
        return Response.json({"account": account.public()})

    async def unban(self, request: Request) -> Response:
        """POST /accounts/{name}/unban (operator)."""
        await self.gw.operator(request)
        account = await self.gw.accounts.ban((await self._named(request)).id, banned=False)
        log.warning("account unbanned", account=account.id)
        return Response.json({"account": account.public()})

    async def issue(self, request: Request) -> Response:
        """POST /accounts/{name}/token (operator): a new token for an account, shown once."""
        await self.gw.operator(request)
        account = await self._named(request)
        token = await self.gw.accounts.rotate(account.id, "token_reissued")
        log.warning("account token issued by the operator", account=account.id)
        return Response.json({"account": account.public(), "token": token})

    # -- challenges ----------------------------------------------------------------------------

    async def challenge(self, request: Request) -> Response:
        """POST /challenges: challenge named accounts to a match, or house bot pools (named as
        pools: the match starts at once)."""
        await self.gw.lobby_write(request)
        account = await self.gw.account(request)
        body = decode_body(
            await request.json_body(self.gw.config.max_body_bytes), _CHALLENGE, "challenge"
        )
        players = body.rules.players or len(body.opponents) + 1
        rules = self.gw.rules_of(body.rules, players)
        deadline = self.gw.deadline_of(body.deadline_ms, open_seats=True)
        await self.gw.under_cap(account)
        if body.opponents and all(name in STRATEGIES for name in body.opponents):
            return await self._against_house(request, account, body.opponents, rules, deadline)
        challenges, limits, redis = self.gw.challenges, self.gw.lobby_limits, self.gw.redis
        try:
            made = await challenges.prepare(account, body.opponents, rules, deadline)
        except ChallengeError as e:
            raise ApiError(e.status, e.code, str(e)) from None
        await limits.challenge(redis, made)  # LimitExceeded: 429, nothing made
        try:
            await challenges.open(made)
        except BaseException:
            await limits.challenge_closed(redis, made.id)
            raise
        log.info("challenge made", challenge=made.id, account=account.id)
        return Response.json({"challenge": made.public()}, status=201)

    async def _against_house(
        self, request: Request, account: Account, pools: list[str], rules: Rules, deadline: int
    ) -> Response:
        """A challenge of house bot pools only: the house always accepts, so the match starts
        at once, counted against the account's and the address's house matches. Answered as
        a challenge already started (it is kept nowhere: there is nothing left to answer)."""
        try:
            check_seats(pools, rules)
        except ChallengeError as e:
            raise ApiError(e.status, e.code, str(e)) from None
        await self.gw.check_pools(pools)
        limits, redis = self.gw.lobby_limits, self.gw.redis
        match_id = new_match_id()
        counted = await limits.house_match(  # LimitExceeded: 429, nothing made
            redis, match_id, [account.id], [request.client], self.gw.match_over
        )
        try:
            seats: list[Account | str] = [account, *pools]
            await self.gw.start_for(rules, seats, deadline, creator=account.id, match_id=match_id)
        except BaseException:
            await limits.house_match_failed(redis, counted)
            raise
        started = Challenge.against_house(account, pools, rules, deadline, match_id)
        log.info("house challenge started", challenge=started.id, match_id=match_id)
        return Response.json({"challenge": started.public()}, status=201)

    async def challenges(self, request: Request) -> Response:
        """GET /challenges: the account's challenges, made and received."""
        account = await self.gw.account(request)
        return Response.json(
            {"challenges": [c.public() for c in await self.gw.challenges.mine(account)]}
        )

    async def accept(self, request: Request) -> Response:
        """POST /challenges/{id}/accept: when the last one named accepts, the match starts."""
        account = await self.gw.account(request)
        await self.gw.under_cap(account)
        challenge_id = request.params["challenge_id"]
        try:
            challenge, ready = await self.gw.challenges.accept(account, challenge_id)
        except ChallengeError as e:
            raise ApiError(e.status, e.code, str(e)) from None
        if ready:
            found = [await self.gw.accounts.get(a) for a in challenge.seats]
            seats: list[Account | str] = [a for a in found if a is not None]
            match_id = None
            try:
                if len(seats) == len(challenge.seats):
                    match = await self.gw.start_for(
                        challenge.rules, seats, challenge.deadline_ms, creator=challenge.challenger
                    )
                    match_id = match.match_id
            finally:
                await self.gw.challenges.started(challenge.id, match_id)
                await self.gw.lobby_limits.challenge_closed(self.gw.redis, challenge.id)
            if match_id is None:
                raise ApiError(409, "challenge_failed", "an account of the challenge is gone")
            challenge = msgspec.structs.replace(challenge, status="started", match_id=match_id)
            log.info("challenge started", challenge=challenge.id, match_id=match_id)
        return Response.json({"challenge": challenge.public()})

    async def decline(self, request: Request) -> Response:
        """POST /challenges/{id}/decline."""
        account = await self.gw.account(request)
        return await self._answer(
            self.gw.challenges.decline(account, request.params["challenge_id"])
        )

    async def cancel(self, request: Request) -> Response:
        """POST /challenges/{id}/cancel (the challenger)."""
        account = await self.gw.account(request)
        return await self._answer(
            self.gw.challenges.cancel(account, request.params["challenge_id"])
        )

    async def _answer(self, answer: Awaitable[Any]) -> Response:
        try:
            challenge = await answer
        except ChallengeError as e:
            raise ApiError(e.status, e.code, str(e)) from None
        await self.gw.lobby_limits.challenge_closed(self.gw.redis, challenge.id)
        return Response.json({"challenge": challenge.public()})

    # -- seeks ---------------------------------------------------------------------------------

    async def seek(self, request: Request) -> Response:
        """POST /seeks: wait for a game of a kind; the match comes on the account stream."""
        account = await self.gw.account(request)
        body = decode_body(await request.json_body(self.gw.config.max_body_bytes), _SEEK, "seek")
        kind = KINDS.get(body.kind)
        if kind is None:
            raise ApiError(
                422, "unknown_kind", f"kind is one of {', '.join(KINDS)}, not {body.kind!r}"
            )
        await self.gw.under_cap(account)
        rating = await self.gw.rating_of(account.id, kind.family)
        most = self.gw.config.seeks_per_account
        try:
            made, new = await self.gw.seeks.add(
                account, kind.name, rating, client=request.client, most=most
            )
        except SeekError as e:
            if e.code == "seeks_per_account":  # a seek withdrawn or matched frees its place
                quota = Quota(most, 0, SEEK_RETRY_S, SEEK_RETRY_S)
                raise LimitExceeded(e.code, quota, str(e)) from None
            raise ApiError(e.status, e.code, str(e)) from None
        return Response.json({"seek": made.public()}, status=201 if new else 200)

    async def seeks(self, request: Request) -> Response:
        """GET /seeks: the account's waiting seeks."""
        account = await self.gw.account(request)
        return Response.json({"seeks": [s.public() for s in await self.gw.seeks.mine(account)]})

    async def withdraw(self, request: Request) -> Response:
        """DELETE /seeks/{id}."""
        account = await self.gw.account(request)
        try:
            gone = await self.gw.seeks.withdraw(account, request.params["seek_id"])
        except SeekError as e:
            raise ApiError(e.status, e.code, str(e)) from None
        return Response.json({"seek": gone.public(), "status": "withdrawn"})

    # -- arenas --------------------------------------------------------------------------------

    async def create_arena(self, request: Request) -> Response:
        """POST /arenas (operator): a new arena, open for entrants."""
        await self.gw.operator(request)
        body = decode_body(await request.json_body(self.gw.config.max_body_bytes), _ARENA, "arena")
        fmt = _FORMATS.get(body.format)
        if fmt is None:
            raise ApiError(422, "bad_arena", f"format is {', '.join(_FORMATS)}")
        rules = self.gw.rules_of(body.rules, body.rules.players or 2)
        deadline = self.gw.deadline_of(body.deadline_ms, open_seats=True)
        try:
            arena = await self.gw.arenas.create(
                body.name,
                rules,
                fmt,
                rounds=body.rounds,
                games_per_pairing=body.games_per_pairing,
                duration_s=body.duration_s,
                deadline_ms=deadline,
            )
        except ArenaRefused as e:
            raise ApiError(e.status, e.code, str(e)) from None
        log.info("arena created", arena=arena.id, format=fmt)
        return Response.json({"arena": arena.public()}, status=201)

    async def arenas(self, request: Request) -> Response:
        """GET /arenas: the latest arenas."""
        return Response.json({"arenas": [a.summary() for a in await self.gw.arenas.latest()]})

    async def arena(self, request: Request) -> Response:
        """GET /arenas/{id}: the arena, its entrants, matches in play and standings."""
        return Response.json({"arena": (await self._arena(request)).public()})

    async def _arena(self, request: Request) -> Arena:
        arena = await self.gw.arenas.get(request.params["arena_id"])
        if arena is None:
            raise ApiError(404, "no_arena", f"no arena {request.params['arena_id']!r}")
        return arena

    async def enter(self, request: Request) -> Response:
        """POST /arenas/{id}/join (an account) — or, with the operator's token and a body
        {"pool"}, a house bot pool."""
        raw = await request.json_body(self.gw.config.max_body_bytes)
        if raw.strip():
            await self.gw.operator(request)
            pool = decode_body(raw, _ENTRANT, "entrant").pool
            await self.gw.check_pools([pool])
            key, name = f"house:{pool}", pool
        else:
            account = await self.gw.account(request)
            key, name = account.id, account.name
        return await self._arena_change(self.gw.arenas.join(request.params["arena_id"], key, name))

    async def leave(self, request: Request) -> Response:
        """POST /arenas/{id}/leave (an account): no more matches for it in the arena."""
        account = await self.gw.account(request)
        return await self._arena_change(
            self.gw.arenas.leave(request.params["arena_id"], account.id)
        )

    async def start_arena(self, request: Request) -> Response:
        """POST /arenas/{id}/start (operator): its matches begin."""
        await self.gw.operator(request)
        return await self._arena_change(self.gw.arenas.start(request.params["arena_id"]))

    async def _arena_change(self, change: Awaitable[Arena]) -> Response:
        try:
            arena = await change
        except ArenaRefused as e:
            raise ApiError(e.status, e.code, str(e)) from None
        return Response.json({"arena": arena.public()})

    async def arena_stream(self, request: Request) -> LiveResponse:
        """GET /arenas/{id}/stream: what happens in the arena, standings after every result;
        resumable after a line id. It counts against its client address's public streams."""
        arena = await self._arena(request)
        after = self.gw.resume_point(request) or 0
        sse = self.gw.wants_sse(request)
        arenas = self.gw.arenas
        close = await self.gw.open_public_stream(request)

        async def lines() -> AsyncIterator[bytes]:
            seen = after
            while True:
                oldest, batch = await arenas.since(arena.id, seen)
                if seen < oldest - 1:  # trimmed past where the client is: it is told so
                    yield _gap(seen, oldest, sse)
                for n, data in batch:
                    seen = n
                    yield _sse(n, data) if sse else data + b"\n"
                    if b'"type":"finished"' in data[:40]:
                        return
                if not batch:
                    await asyncio.sleep(POLL_S)
                    yield b""

        return LiveResponse(lines(), sse, self.gw.config.keepalive_s, close, "public")

    # -- streams -------------------------------------------------------------------------------

    async def events(self, request: Request) -> LiveResponse:
        """GET /account/stream: the account's events, resumable after an event id."""
        account = await self.gw.account(request)
        after = self.gw.resume_point(request)
        sse = self.gw.wants_sse(request)
        lease = await self.gw.open_account_stream(account, request)
        feeds = self.gw.feeds
        gw = self.gw

        async def state() -> tuple[int, bytes]:
            """Where things stand, as of the feed's latest event: its id and the state line."""
            latest = await feeds.last(account.id)
            waiting = [
                c.public()
                for c in await gw.challenges.mine(account)
                if c.status == "open" and account.id in c.opponents
            ]
            line = {
                "type": "state",
                "id": latest,
                "live": await feeds.live(account.id),
                "challenges": waiting,
                "seeks": [s.public() for s in await gw.seeks.mine(account)],
            }
            data = msgspec.json.encode(line)
            return latest, _sse(latest, data) if sse else data + b"\n"

        # a fresh stream: where things stand, then what happens next
        start, first = (after, b"") if after is not None else await state()

        async def lines() -> AsyncIterator[bytes]:
            seen = start
            if first:
                yield first
            while True:
                oldest, batch = await feeds.since(account.id, seen)
                if seen < oldest - 1:  # trimmed past where the client is: say so, and resync
                    yield _gap(seen, oldest, sse)
                    seen, line = await state()
                    yield line
                    continue
                for n, data in batch:
                    seen = n
                    yield _sse(n, data) if sse else data + b"\n"
                if not batch:
                    await asyncio.sleep(POLL_S)
                    yield b""

        bound = (self.gw.credentials, self.gw.account_credential(request, account))
        return LiveResponse(lines(), sse, self.gw.config.keepalive_s, lease, bound=bound)

    async def play(self, request: Request) -> LiveResponse:
        """GET /account/play: every seat the account holds on one connection; each line is a
        seat stream's line wrapped as {"match_id", "seat", "line"}. The seats' lines are written
        as they come (those that came together in one write); the account's live matches are
        looked up when it is LOOK_S since the last look, and every POLL_S when all is quiet.
        Each look also reads the account's feed since the stream opened, so a match that started
        and ended between two looks (a round that deals itself to its end) is still followed:
        its seats see it over.

        A seat's stream that the hub ended before its match did (its feed failed, or it fell
        too far behind) is opened again at once, from a snapshot, even if the match has ended
        meanwhile: the client then sees its end as a snapshot of the match over."""
        account = await self.gw.account(request)
        sse = self.gw.wants_sse(request)
        everything = self.gw.wants_everything(request)
        lease = await self.gw.open_account_stream(account, request)
        gw = self.gw
        hub = gw.hub
        waker = Waker()
        fed = await gw.feeds.last(account.id)  # later starts are read from the feed

        async def lines() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            heads: dict[Subscriber, tuple[str, bytes]] = {}  # stream -> its match, line head
            followed: dict[str, int] = {}  # match -> its seats' streams still open
            again: set[str] = set()  # matches whose streams ended before the match did
            done: set[str] = set()  # matches seen to their end, while still in the live set
            look_at = loop.time()
            seen = fed
            try:
                while True:
                    if loop.time() >= look_at:
                        look_at = loop.time() + LOOK_S
                        live, (started, seen) = await asyncio.gather(
                            gw.feeds.live(account.id), _started_since(gw.feeds, account.id, seen)
                        )
                        done &= set(live)  # what left the live set is not looked at again
                        for match_id in dict.fromkeys([*live, *started, *again]):
                            if match_id in followed or match_id in done:
                                continue
                            followed[match_id] = 0  # its seats' streams opened so far
                            again.discard(match_id)
                            for seat in await gw.seats_of(account, match_id):
                                try:
                                    feed = await hub.follow(match_id)
                                except FeedUnavailable:  # looked at again next time
                                    again.add(match_id)
                                    break
                                head = b'{"match_id":"%s","seat":%d,"line":' % (
                                    match_id.encode(),
                                    seat,
                                )
                                sub, _ = hub.subscribe(
                                    feed, seat, False, None, everything, waker=waker
                                )
                                heads[sub] = (match_id, head)
                                followed[match_id] += 1
                            if not followed[match_id]:  # no seat's stream opened: look next time
                                del followed[match_id]
                    out: list[bytes] = []
                    for sub in await waker.wait(POLL_S):
                        if sub not in heads:
                            continue
                        match_id, head = heads[sub]
                        data = sub.drain()
                        if data:
                            for line in data.split(b"\n"):
                                if line:
                                    wrapped = head + line + b"}\n"
                                    out.append(_sse_data(wrapped) if sse else wrapped)
                        if sub.finished and not sub.chunks:
                            known = hub.feeds.get(match_id)
                            if known is None or not known.over:  # cut short: open it again
                                again.add(match_id)
                                look_at = loop.time()
                            else:
                                done.add(match_id)
                                again.discard(match_id)
                            del heads[sub]
                            _unsubscribe(hub, match_id, sub)
                            followed[match_id] -= 1
                            if not followed[match_id]:
                                del followed[match_id]  # its lines are sent
                    yield b"".join(out)
            finally:
                for sub, (match_id, _) in heads.items():
                    _unsubscribe(hub, match_id, sub)

        bound = (gw.credentials, gw.account_credential(request, account))
        response = LiveResponse(lines(), sse, gw.config.keepalive_s, lease, bound=bound)
        response.wake = waker.poke  # its credential's end is written at once
        return response


async def _started_since(feeds: AccountFeeds, account_id: str, after: int) -> tuple[list[str], int]:
    """The matches whose ``match_started`` the account's feed holds after id ``after``, and
    the id read up to."""
    started: list[str] = []
    while batch := await feeds.read(account_id, after):
        for n, data in batch:
            after = n
            with contextlib.suppress(msgspec.DecodeError):  # not ours to follow, then
                event = _FEED_EVENT.decode(data)
                if event.type == "match_started" and event.match_id:
                    started.append(event.match_id)
    return started, after


class _FeedEvent(msgspec.Struct):
    type: str = ""
    match_id: str = ""


_FEED_EVENT = msgspec.json.Decoder(_FeedEvent)


def _unsubscribe(hub: Hub, match_id: str, sub: Subscriber) -> None:
    feed = hub.feeds.get(match_id)
    if feed is not None:
        hub.unsubscribe(feed, sub)
    else:
        sub.finish()


def _gap(after: int, oldest: int, sse: bool) -> bytes:
    """The line telling a stream resumed after ``after`` that it lost the lines before
    ``oldest``."""
    data = msgspec.json.encode(Gap(id=oldest - 1, after=after, oldest=oldest))
    return _sse(oldest - 1, data) if sse else data + b"\n"


def _sse(n: int, data: bytes) -> bytes:
    kind = msgspec.json.decode(data, type=dict[str, Any]).get("type", "event")
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (n, str(kind).encode(), data)


def _sse_data(data: bytes) -> bytes:
    return b"event: seat\ndata: %s\n\n" % data.rstrip(b"\n")


class LiveResponse:
    """A long-lived response writing an async iterator's chunks (b"" means nothing new) with
    a keep-alive after ``keepalive`` seconds of silence, until the client goes away; counted
    open in the metrics as a stream of ``kind`` (an account's, or the public's). One opened
    with a credential (``bound``) ends with a closing line, and writes nothing more, once
    that credential ends (services/gateway/credentials.py): the iterator yields at least
    every POLL_S, so within that."""

    def __init__(
        self,
        lines: AsyncIterator[bytes],
        sse: bool,
        keepalive: float,
        on_close: Callable[[], Awaitable[None]],
        kind: str = "account",
        bound: tuple[Credentials, Credential] | None = None,
    ) -> None:
        self.lines = lines
        self.sse = sse
        self.keepalive = keepalive
        self.on_close = on_close
        self.open_streams = OPEN_STREAMS[kind]
        self.bound = bound
        self.closing: str | None = None  # why the stream must end now, once its credential did
        self.wake: Callable[[], None] | None = None  # hurries the iterator along when set

    def close(self, reason: str) -> None:
        """The credential the stream was opened with ended: the next chunk is not written,
        the closing line is."""
        self.closing = reason
        if self.wake is not None:
            self.wake()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()
        watcher = asyncio.create_task(on_disconnect(receive, gone.set))
        loop = asyncio.get_running_loop()
        self.open_streams.inc()
        binding: Binding | None = None
        if self.bound is not None:
            credentials, credential = self.bound
            binding = credentials.bind(credential, self.close)
        try:
            ping = await start_stream(send, self.sse)
            quiet_since = loop.time()
            async for chunk in self.lines:
                if gone.is_set():
                    break
                if self.closing is not None:
                    body = closed_line(self.closing, self.sse)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    break
                if not chunk:
                    if loop.time() - quiet_since < self.keepalive:
                        continue
                    chunk = ping
                quiet_since = loop.time()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not gone.is_set():  # the lines ended (an arena's at its end): so does the answer
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away while we wrote
        finally:
            self.open_streams.dec()
            if binding is not None:
                credentials.unbind(binding)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            with contextlib.suppress(Exception):
                await self.lines.aclose()  # type: ignore[attr-defined]
            await self.on_close()
