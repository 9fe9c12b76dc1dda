"""Accounts: registering one (POST /accounts), what anyone may know of one (GET
/accounts/{name}), the operator's ban, unban and new token, the account itself (GET /account)
and its token (rotated, revoked); and its two streams.

Everything here speaks for an account (``Authorization: Bearer dab_...``) except registering,
which anyone may do (limited per address), and the operator's actions. The account stream
(GET /account/stream) tells an account what happens to it — challenges, its matches starting
and ending — resumable by event id; the play stream (GET /account/play) carries, on one
connection, every line of every seat the account holds, each wrapped with its match and seat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
import structlog

from services.gateway import spec
from services.gateway.channel import account_state, channel_stream, wants_play
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.hub import FeedUnavailable, Hub, Subscriber, Waker
from services.gateway.live import POLL_S, LiveResponse, gap_line, sse_event, sse_seat
from services.gateway.lobby_protocol import RegisterBody
from services.gateway.protocol import API
from services.gateway.resources import channel
from services.lobby.accounts import Account, AccountError
from services.projections.accounts import AccountFeeds

log = structlog.get_logger()

LOOK_S = 0.05
"""How often, at most, a busy play stream looks for the account's new matches."""
_REGISTER = msgspec.json.Decoder(RegisterBody)
_NO_SUCH_ACCOUNT = spec.error("no account of that name", "no_account")
_BAD_RESUME = spec.error("`after` / Last-Event-ID is not an id: 0, 1, 2, ...", "bad_resume")
_BAD_FORMAT = spec.error("an unknown format", "invalid_query")


async def register(gw: Gateway, request: Request) -> Response:
    """POST /accounts: a new account and its token, shown once."""
    await gw.lobby_write(request)
    body = decode_body(await request.json_body(gw.config.max_body_bytes), _REGISTER, "account")
    try:
        account, token = await gw.accounts.register(body.name)
    except AccountError as e:
        raise ApiError(409 if e.code == "name_taken" else 422, e.code, str(e)) from None
    log.info("account registered", account=account.id, name=account.name)
    return Response.json({"account": account.public(), "token": token}, status=201)


async def me(gw: Gateway, request: Request) -> Response:
    """GET /account: the account, its live matches, seeks and latest feed event id."""
    account = await gw.account(request)
    return Response.json(
        {
            "account": account.public(),
            "live": await gw.feeds.live(account.id),
            "seeks": [s.public() for s in await gw.seeks.mine(account)],
            "last_event": await gw.feeds.last(account.id),
        }
    )


async def rotate(gw: Gateway, request: Request) -> Response:
    """POST /account/token: a new token (shown once); the old one stops working."""
    account = await gw.account(request)
    token = await gw.accounts.rotate(account.id)
    gw.forget_token(request)
    log.info("account token rotated", account=account.id)
    return Response.json({"token": token})


async def revoke(gw: Gateway, request: Request) -> Response:
    """DELETE /account/token: the token stops working; the operator may issue another."""
    account = await gw.account(request)
    await gw.accounts.revoke(account.id)
    gw.forget_token(request)
    log.info("account token revoked", account=account.id)
    return Response(204, b"")


async def public(gw: Gateway, request: Request) -> Response:
    """GET /accounts/{name}: what anyone may know of an account."""
    account = await _named(gw, request)
    return Response.json({"account": account.public()})


async def _named(gw: Gateway, request: Request) -> Account:
    name = request.params["name"]
    account = await gw.accounts.by_name(name)
    if account is None:
        raise ApiError(404, "no_account", f"no account named {name!r}")
    return account


async def ban(gw: Gateway, request: Request) -> Response:
    """POST /accounts/{name}/ban (operator): the account can do nothing more; its seeks
    leave the queue. Its matches go on and time out."""
    await gw.operator(request)
    account = await gw.accounts.ban((await _named(gw, request)).id)
    for seek in await gw.seeks.mine(account):
        await gw.seeks.take([seek])
    log.warning("account banned", account=account.id)
    return Response.json({"account": account.public()})


async def unban(gw: Gateway, request: Request) -> Response:
    """POST /accounts/{name}/unban (operator)."""
    await gw.operator(request)
    account = await gw.accounts.ban((await _named(gw, request)).id, banned=False)
    log.warning("account unbanned", account=account.id)
    return Response.json({"account": account.public()})


async def issue(gw: Gateway, request: Request) -> Response:
    """POST /accounts/{name}/token (operator): a new token for an account, shown once."""
    await gw.operator(request)
    account = await _named(gw, request)
    token = await gw.accounts.rotate(account.id, "token_reissued")
    log.warning("account token issued by the operator", account=account.id)
    return Response.json({"account": account.public(), "token": token})


async def events(gw: Gateway, request: Request) -> LiveResponse:
    """GET /account/stream: the account's events, resumable after an event id; with
    ``play=1``, the account channel (services/gateway/channel.py)."""
    if wants_play(request):
        return await channel_stream(gw, request)
    account = await gw.account(request)
    after = gw.resume_point(request)
    sse = gw.wants_sse(request)
    lease = await gw.open_account_stream(account, request)
    feeds = gw.feeds

    async def state() -> tuple[int, bytes]:
        """Where things stand, as of the feed's latest event: its id and the state line."""
        latest, _, data = await account_state(gw, account)
        return latest, sse_event(latest, data) if sse else data + b"\n"

    # a fresh stream: where things stand, then what happens next
    start, first = (after, b"") if after is not None else await state()

    async def lines() -> AsyncIterator[bytes]:
        seen = start
        if first:
            yield first
        while True:
            oldest, batch = await feeds.since(account.id, seen)
            if seen < oldest - 1:  # trimmed past where the client is: say so, and resync
                yield gap_line(seen, oldest, sse)
                seen, line = await state()
                yield line
                continue
            for n, data in batch:
                seen = n
                yield sse_event(n, data) if sse else data + b"\n"
            if not batch:
                await asyncio.sleep(POLL_S)
                yield b""

    bound = (gw.credentials, gw.account_credential(request, account))
    return LiveResponse(lines(), sse, gw.config.keepalive_s, lease, bound=bound)


async def play(gw: Gateway, request: Request) -> LiveResponse:
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
    account = await gw.account(request)
    sse = gw.wants_sse(request)
    everything = gw.wants_everything(request)
    lease = await gw.open_account_stream(account, request)
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
                            sub, _ = hub.subscribe(feed, seat, False, None, everything, waker=waker)
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
                                out.append(sse_seat(wrapped) if sse else wrapped)
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


OPERATIONS = (
    Operation(
        method="POST",
        path=f"{API}/accounts",
        handler=register,
        summary="Register an account: its token is in the answer, shown only once",
        body=RegisterBody,
        answers={
            "201": spec.answer("registered", spec.ref("Registered")),
            "400": spec.error("not JSON", *spec.BAD_BODY),
            "409": spec.error("the name, or one too like it, is taken", "name_taken"),
            "413": spec.TOO_LARGE,
            "415": spec.NOT_JSON,
            "422": spec.error(
                "JSON of the wrong shape, or a name that may not be registered (2-20 "
                "of A-Z a-z 0-9 _ -, not a house pool's or the service's own word)",
                "invalid_account",
                "bad_name",
                "reserved_name",
            ),
            "429": spec.limited("lobby_per_second", 0.2),
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/accounts/{{name}}",
        handler=public,
        summary="What anyone may know of an account",
        parameters=[spec.NAME],
        answers={
            "200": spec.answer("the account", spec.ref("AccountAnswer")),
            "404": _NO_SUCH_ACCOUNT,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/accounts/{{name}}/ban",
        handler=ban,
        summary="Ban an account (operator): its calls answer 403, its seeks leave "
        "the queue; its matches go on and time out",
        security=spec.OPERATOR,
        parameters=[spec.NAME],
        answers=spec.as_operator(
            {"200": spec.answer("banned", spec.ref("AccountAnswer")), "404": _NO_SUCH_ACCOUNT}
        ),
    ),
    Operation(
        method="POST",
        path=f"{API}/accounts/{{name}}/unban",
        handler=unban,
        summary="Lift an account's ban (operator)",
        security=spec.OPERATOR,
        parameters=[spec.NAME],
        answers=spec.as_operator(
            {
                "200": spec.answer("no longer banned", spec.ref("AccountAnswer")),
                "404": _NO_SUCH_ACCOUNT,
            }
        ),
    ),
    Operation(
        method="POST",
        path=f"{API}/accounts/{{name}}/token",
        handler=issue,
        summary="Issue an account a new token (operator), shown once; the old one stops working",
        security=spec.OPERATOR,
        parameters=[spec.NAME],
        answers=spec.as_operator(
            {"200": spec.answer("the new token", spec.ref("Registered")), "404": _NO_SUCH_ACCOUNT}
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/account",
        handler=me,
        summary="The account, its live matches, its seeks and its latest event id",
        security=spec.ACCOUNT,
        answers=spec.as_account({"200": spec.answer("the account", spec.ref("Me"))}),
    ),
    Operation(
        method="POST",
        path=f"{API}/account/token",
        handler=rotate,
        summary="Rotate the token: a new one, shown once; the old one stops working "
        "(within 5 s on every gateway)",
        security=spec.ACCOUNT,
        answers=spec.as_account({"200": spec.answer("the new token", spec.ref("TokenAnswer"))}),
    ),
    Operation(
        method="DELETE",
        path=f"{API}/account/token",
        handler=revoke,
        summary="Revoke the token: it stops working, and only the operator can issue another",
        security=spec.ACCOUNT,
        answers=spec.as_account({"204": {"description": "revoked"}}),
    ),
    Operation(
        method="GET",
        path=f"{API}/account/stream",
        handler=events,
        summary="The account's events: a fresh stream begins with a `state` line, "
        "then challenges, matches starting and ending, seeks expiring",
        security=spec.ACCOUNT,
        parameters=[
            spec.after("an event id of the account, no state line"),
            spec.LAST_EVENT_ID,
            spec.FORMAT,
            *channel.STREAM_PARAMS,
        ],
        answers=spec.as_account(
            {
                "200": spec.lines(
                    "one `AccountLine` a line, each with its `id` on the account's "
                    "stream (the latest 1,000 are kept: a resume from before them "
                    "begins with a `gap` line, then `state`); as server-sent events "
                    "its `id` is the line's and `event` its type",
                    "AccountLine",
                ),
                "400": spec.error(
                    "a resume point or cursor that is none, or beyond what exists",
                    "bad_resume",
                    channel.BAD_CURSOR,
                ),
                "422": _BAD_FORMAT,
                "429": spec.limited(
                    "streams_per_account", 1.0, "player_streams_per_client", "auth_failures"
                ),
            }
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/account/play",
        handler=play,
        fast=True,
        summary="Every seat the account holds on one connection: each seat "
        "stream's line wrapped with its match and seat; new matches join as they start",
        security=spec.ACCOUNT,
        parameters=[spec.FORMAT, spec.EVENTS],
        answers=spec.as_account(
            {
                "200": spec.lines(
                    "one `PlayLine` a line; each live seat starts with its snapshot "
                    "(and its turn line, on its move). As server-sent events each is "
                    "an event `seat` (no id: resume by reconnecting)",
                    "PlayLine",
                ),
                "422": _BAD_FORMAT,
                "429": spec.limited(
                    "streams_per_account", 1.0, "player_streams_per_client", "auth_failures"
                ),
            }
        ),
    ),
)
