"""Matches: create one (POST /matches), list them (GET /matches), read or cancel one
(GET, DELETE /matches/{match_id}) and take an open seat (POST /matches/{match_id}/join).

A match waits in the lobby until every seat is taken; then its log begins (the referee creates
it), and its seats play through services/gateway/resources/seats.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import msgspec
import structlog

from engine.game import decide
from events.model import CancelMatch, CreateMatch, Rejection
from services.core.commands import new_match_id
from services.gateway import spec
from services.gateway.commands import FAMILIES, Gateway, why
from services.gateway.core import bearer
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.limits import LimitExceeded, release_match
from services.gateway.protocol import API, FILTERED_PAGES, LISTED, NAME_CHARS, CreateBody, JoinBody
from services.gateway.query import count_of, cursor_of
from services.lobby.accounts import is_account_token
from services.lobby.names import BadName, check_name, skeleton
from services.lobby.tables import JoinError, LobbyMatch, parse_record, token_hash
from services.projections.queries import Queries
from services.store.keys import EXTERNAL

log = structlog.get_logger()

_CREATE = msgspec.json.Decoder(CreateBody)
_JOIN = msgspec.json.Decoder(JoinBody)


async def create_match(gw: Gateway, request: Request) -> Response:
    """POST /matches: a new match; open seats wait for players, house bots are set."""
    await gw.lobby_writes.hit(gw.redis, request.client)
    account = await gw.maybe_account(request)
    body = decode_body(await request.json_body(gw.config.max_body_bytes), _CREATE, "match")
    players = body.rules.players or len(body.seats)
    rules = gw.rules_of(body.rules, players)
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
    names = await _seat_names(gw, body.seats, body.names)
    deadline_ms = gw.deadline_of(body.deadline_ms, open_seats=None in body.seats)
    max_rounds = _max_rounds(gw, body.max_rounds)
    await gw.check_pools(body.seats)
    command = CreateMatch(
        rules=rules,
        players=names,
        bots=tuple(body.seats),
        deadline_ms=deadline_ms,
        max_rounds=max_rounds,
        forfeit_after=gw.config.forfeit_after,
    )
    checked = decide(None, command)  # the engine's own checks, before anything is stored
    if isinstance(checked, Rejection):
        raise ApiError(422, "rejected", checked.message, **why(checked))
    match_id = new_match_id()
    owner = None if account else "own_" + secrets.token_urlsafe(24)
    hold = None
    if None in body.seats:  # an open match counts against its creator until it starts
        hold = await gw.open_matches.hold(gw.redis, request.client, match_id)
    counted = []
    if any(pool is not None for pool in body.seats):  # house bots: counted until it ends
        try:
            counted = await gw.lobby_limits.house_match(
                gw.redis,
                match_id,
                [account.id] if account else [],
                [request.client],
                gw.match_over,
            )
        except LimitExceeded:
            if hold is not None:
                await gw.open_matches.drop(gw.redis, hold)
            raise
    try:
        match = await gw.lobby.create(
            match_id,
            rules,
            tuple(body.seats),
            names,
            deadline_ms,
            creator=account.id if account else f"owner:{token_hash(owner or '')}",
            forfeit_after=gw.config.forfeit_after,
            max_rounds=max_rounds,
        )
    except Exception:
        if hold is not None:
            await gw.open_matches.drop(gw.redis, hold)
        await gw.lobby_limits.house_match_failed(gw.redis, counted)
        raise
    if match.status == "started":
        await gw.start_match(match)
    log.info("lobby match created", match_id=match_id, open=match.pools.count(None))
    out: dict[str, Any] = {"match": match.public(), "links": gw.links(match_id)}
    if owner is not None:
        out["owner_token"] = owner  # shown once: it cancels the match while it waits
    return Response.json(out, status=201)


def _max_rounds(gw: Gateway, asked: int | None) -> int:
    cap = gw.config.max_rounds
    if asked is None:
        return cap
    if not 1 <= asked <= cap:
        raise ApiError(422, "invalid_match", f"max_rounds is 1 to {cap}")
    return asked


async def _seat_names(
    gw: Gateway, seats: list[str | None], asked: list[str] | None
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
            out.append(await _guest_name(gw, name))
    return tuple(out)


async def _guest_name(gw: Gateway, name: str, taken: tuple[str, ...] = ()) -> str:
    """A name a player without an account may use: the account names' rules, and not a
    registered account's name, a house pool's, or another seat's of the match."""
    try:
        check_name(name)
    except BadName as e:
        raise ApiError(422, "invalid_name", str(e)) from None
    if await gw.accounts.by_name(name) is not None:
        raise ApiError(422, "invalid_name", f"{name!r} is a registered account's name")
    if skeleton(name) in {skeleton(t) for t in taken}:
        raise ApiError(422, "invalid_name", f"{name!r} is already a player of this match")
    return name


async def join(gw: Gateway, request: Request) -> Response:
    """POST /matches/{id}/join: take an open seat; the seat token is in the answer, once.
    With an account token the seat is the account's: its name, its ratings, and its token
    opens the seat too."""
    await gw.lobby_writes.hit(gw.redis, request.client)
    match_id = gw.match_id_of(request)
    account = await gw.maybe_account(request)
    raw = await request.json_body(gw.config.max_body_bytes)
    body = decode_body(raw, _JOIN, "join") if raw.strip() else JoinBody()
    if body.seat is not None and body.seat < 0:
        raise ApiError(404, "no_such_seat", f"seat {body.seat} does not exist (C3)")
    name = body.name
    if account is not None:
        if name is not None and name != account.name:
            raise ApiError(422, "invalid_name", "an account plays under its own name")
        name = account.name
        await gw.under_cap(account)
    elif name is not None:
        waiting = await gw.lobby.get(match_id)
        others = tuple(s.name for s in waiting.seats if s.kind != "open") if waiting else ()
        name = await _guest_name(gw, name, others)
    hold = await gw.waiting_seats.hold(gw.redis, request.client, match_id)
    try:
        match, seat, token = await gw.lobby.join(
            match_id, body.seat, name, account.id if account else None
        )
    except JoinError as e:
        await gw.waiting_seats.drop(gw.redis, hold)
        status = 404 if e.code in ("no_match", "no_such_seat") else 409
        raise ApiError(status, e.code, str(e)) from None
    log.info("seat taken", match_id=match_id, seat=seat, name=match.seats[seat].name)
    if match.status == "started":
        await gw.start_match(match)
    return Response.json(
        {
            "match_id": match_id,
            "seat": seat,
            "token": token,
            "match": match.public(),
            "links": gw.links(match_id, seat),
        },
        status=201,
    )


async def cancel_match(gw: Gateway, request: Request) -> Response:
    """DELETE /matches/{id}: call off a match still waiting for players (its creator or the
    operator); the operator may also end a live match, unrated."""
    match_id = gw.match_id_of(request)
    token = bearer(request, "the creator's account or owner token")
    is_operator = await gw.is_operator(request, token)
    waiting = await gw.lobby.get(match_id)
    if not is_operator:
        # a refusal the operator's token would have passed counts as a wrong one of it
        if waiting is None:
            await gw.operator_failures.count(gw.redis, request.client)
            raise ApiError(404, "no_match", f"no match {match_id!r} in the lobby")
        if is_account_token(token):
            mine = (await gw.account_of(token, request.client)).id == waiting.creator
        else:
            mine = waiting.creator == f"owner:{token_hash(token)}"
        if not mine:
            await gw.operator_failures.count(gw.redis, request.client)
            raise ApiError(403, "not_creator", "only the match's creator may cancel it")
    if waiting is not None:
        cancelled = await gw.lobby.cancel(match_id)
        if cancelled:
            await release_match(gw.redis, gw.topo, match_id)
            log.info("lobby match cancelled", match_id=match_id)
            return Response.json({"match_id": match_id, "status": "cancelled"})
    if not is_operator:
        raise ApiError(409, "match_started", "the match has started: its players resign or abort")
    if await gw.source.version(match_id) == 0:
        raise ApiError(404, "no_match", f"no match {match_id!r}")
    outcome, _ = await gw.await_command(match_id, f"cancel:{match_id}", CancelMatch())
    if outcome is not None and outcome.rejection is not None:
        r = outcome.rejection
        raise ApiError(409, "rejected", r.message, **why(r))
    log.info("match cancelled by the operator", match_id=match_id)
    return Response.json({"match_id": match_id, "status": "cancelled"})


async def list_matches(gw: Gateway, request: Request) -> Response:
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
    limit = count_of(request, "limit", 1, LISTED, LISTED)
    cursor = cursor_of(request)
    family = request.query("family")
    if family is not None and family not in FAMILIES:
        raise ApiError(422, "invalid_query", "family is express or straight")
    player = request.query("player")
    if player is not None and not 0 < len(player) <= NAME_CHARS:
        raise ApiError(422, "invalid_query", f"player is a name of 1 to {NAME_CHARS} characters")

    def wanted(family_of: str, players: Sequence[str]) -> bool:
        return (family is None or family_of == family) and (player is None or player in players)

    rows: list[Any] = []
    after = cursor
    queries = Queries(gw.redis, gw.settings)
    for _ in range(FILTERED_PAGES if family or player else 1):
        need = limit - len(rows)
        if status == "open":
            waiting, after = await gw.lobby.open_page(need, after)
            rows += [m.public() for m in waiting if wanted(m.rules.family, m.names)]
        else:  # newest first, each page oldest first: an older page goes before
            summaries, after = await queries.page(status == "finished", need, after)
            rows[:0] = [msgspec.to_builtins(s) for s in summaries if wanted(s.family, s.players)]
        if after is None or len(rows) >= limit:
            break
    next_page = None if after is None else after.text()
    return Response.json({"status": status, "matches": rows, "next": next_page})


async def get_match(gw: Gateway, request: Request) -> Response:
    """GET /matches/{id}: the lobby record and how far the match has got."""
    match_id = gw.match_id_of(request)
    match = await gw.lobby.get(match_id)
    version = await gw.source.version(match_id)
    if match is None and version == 0:
        raise ApiError(404, "no_match", f"no match {match_id!r}")
    if match is None and await gw.source.archived(match_id):
        match = await _archived_lobby(gw, match_id)
    out: dict[str, Any] = match.public() if match else {"match_id": match_id}
    out["version"] = version
    out["links"] = gw.links(match_id)
    return Response.json(out)


async def _archived_lobby(gw: Gateway, match_id: str) -> LobbyMatch | None:
    """The lobby record an archived match had, if it had one."""
    fields = await gw.archived_fields(match_id)
    return parse_record(match_id, fields) if fields else None


OPERATIONS = (
    Operation(
        method="GET",
        path=f"{API}/matches",
        handler=list_matches,
        bulk=True,
        summary="List matches: open (waiting for players), live or finished",
        description="A page: open matches oldest first; live and finished ones "
        "the most recently updated, oldest of them first. `next` is the cursor of the "
        "page after (older live or finished matches, newer open ones); pass it as "
        "`cursor`. A page reads at most `limit` matches of each partition; with a "
        f"filter, pages are read on until `limit` pass it or {FILTERED_PAGES} were "
        "read, so the page of a rare filter may hold fewer (even none) and still have "
        "a `next`.",
        parameters=[
            {
                "name": "status",
                "in": "query",
                "schema": {"enum": ["open", "live", "finished"], "default": "open"},
            },
            *spec.page_params(LISTED, "at most this many", "none: the first page"),
            spec.FAMILY_FILTER,
            {
                "name": "player",
                "in": "query",
                "description": "only matches with a seat of this name, exactly",
                "schema": {"type": "string", "minLength": 1, "maxLength": NAME_CHARS},
            },
        ],
        answers={
            "200": spec.answer(
                "the matches: lobby records (open), or summaries (live, finished)",
                spec.ref("MatchList"),
            ),
            "422": spec.error(
                "an unknown status or family, a limit out of 1 to "
                f"{LISTED}, a player name too long, or a cursor no page answered",
                "invalid_query",
            ),
            "429": spec.BULK,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/matches",
        handler=create_match,
        summary="Create a match: a house bot pool per seat, or null for an open seat",
        description="With an account token the account is the match's creator; "
        "without one the answer's `owner_token` (shown once) is, and cancels it "
        "(DELETE) while it waits for players.",
        security=spec.MAYBE_ACCOUNT,
        body=CreateBody,
        answers={
            "201": spec.answer(
                "created; it starts when every open seat is taken", spec.ref("Created")
            ),
            "400": spec.error("not JSON", *spec.BAD_BODY),
            "401": spec.NO_ACCOUNT,
            "403": spec.BANNED,
            "409": spec.refused(
                "a house pool no worker serves, or (every seat a house bot's) the "
                "referee refused to create it",
                "pool_unavailable",
            ),
            "413": spec.TOO_LARGE,
            "415": spec.NOT_JSON,
            "422": spec.refused(
                "JSON of the wrong shape, a bad name or an unknown pool (`Error`), or "
                "rules the engine will not play (`RejectedError`: `bad_rules`, "
                "`bad_players`, with the rule, e.g. C3 for the player count)",
                "invalid_match",
                "invalid_name",
                "unknown_pool",
            ),
            "429": spec.limited(
                "lobby_per_second",
                0.2,
                "open_matches_per_client",
                "house_matches_per_client",
                "house_matches_per_account",
                "auth_failures",
            ),
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/matches/{{match_id}}",
        handler=get_match,
        summary="One match: its lobby record (seats, status) and its log's version",
        parameters=[spec.MATCH],
        answers={
            "200": spec.answer("the match", spec.ref("MatchDetail")),
            "404": spec.error("no such match", "no_match"),
            "409": spec.CORRUPT,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="DELETE",
        path=f"{API}/matches/{{match_id}}",
        handler=cancel_match,
        summary="Cancel a match: its creator while it waits for players; the "
        "operator at any time (a started match ends unrated, reason cancelled)",
        description="The creator is the account that created it (its account "
        "token) or, for a match created without one, the bearer of its "
        "`owner_token`.",
        security=[{"accountToken": []}, {"ownerToken": []}, {"operatorToken": []}],
        parameters=[spec.MATCH],
        answers={
            "200": spec.answer("cancelled", spec.ref("Cancelled")),
            "401": spec.error(
                "no token, or an unknown, rotated or revoked account token",
                "unauthorized",
            ),
            "403": spec.error(
                "not the match's creator, or a banned account",
                "not_creator",
                "account_banned",
            ),
            "404": spec.error("no such match (for its creator: in the lobby)", "no_match"),
            "409": spec.refused(
                "it has started (only the operator ends a started match: its players "
                "resign or abort), or the referee refused the operator's cancel",
                "match_started",
            ),
            "429": spec.limited("auth_failures", 5.0, "operator_failures"),
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/matches/{{match_id}}/join",
        handler=join,
        summary="Take an open seat; the answer holds the seat token, shown only once",
        description="With an account token the seat is the account's: it plays "
        "under the account's name and rating, and the account token opens it too.",
        security=spec.MAYBE_ACCOUNT,
        parameters=[spec.MATCH],
        body=JoinBody,
        body_required=False,
        answers={
            "201": spec.answer("seated", spec.ref("Joined")),
            "400": spec.error("not JSON", *spec.BAD_BODY),
            "401": spec.NO_ACCOUNT,
            "403": spec.BANNED,
            "404": spec.error("no such match or seat", "no_match", "no_such_seat"),
            "409": spec.refused(
                "the seat is not to be had, the account plays its most matches at "
                "once, or (the last seat taken) the referee refused to create it",
                "seat_taken",
                "seat_is_house_bot",
                "match_full",
                "too_many_matches",
                "corrupt_data",
            ),
            "413": spec.TOO_LARGE,
            "415": spec.NOT_JSON,
            "422": spec.error(
                "JSON of the wrong shape, or a bad name", "invalid_join", "invalid_name"
            ),
            "429": spec.limited(
                "lobby_per_second", 0.2, "waiting_seats_per_client", "auth_failures"
            ),
            "503": spec.UNAVAILABLE,
        },
    ),
)
