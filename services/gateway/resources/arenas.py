"""Arenas: the operator creates one (POST /arenas) and starts it; accounts (and the
operator's house pools) enter and leave it; anyone reads the latest (GET /arenas), one arena
(GET /arenas/{arena_id}) and what happens in it (GET /arenas/{arena_id}/stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable

import msgspec
import structlog

from services.gateway import spec
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.live import POLL_S, LiveResponse, gap_line, sse_event
from services.gateway.lobby_protocol import ArenaBody, EntrantBody
from services.gateway.protocol import API
from services.lobby.arena import Format
from services.lobby.arenas import Arena, ArenaRefused

log = structlog.get_logger()

_ARENA = msgspec.json.Decoder(ArenaBody)
_ENTRANT = msgspec.json.Decoder(EntrantBody)
_FORMATS: dict[str, Format] = {"round_robin": "round_robin", "swiss": "swiss", "arena": "arena"}
_NO_ARENA = spec.error("no such arena", "no_arena")
_BUSY = spec.error(
    "Redis is unreachable, or the arena changed too often to update: retry",
    "unavailable",
    "arena_busy",
)
_BAD_RESUME = spec.error("`after` / Last-Event-ID is not an id: 0, 1, 2, ...", "bad_resume")
_BAD_FORMAT = spec.error("an unknown format", "invalid_query")


async def create_arena(gw: Gateway, request: Request) -> Response:
    """POST /arenas (operator): a new arena, open for entrants."""
    await gw.operator(request)
    body = decode_body(await request.json_body(gw.config.max_body_bytes), _ARENA, "arena")
    fmt = _FORMATS.get(body.format)
    if fmt is None:
        raise ApiError(422, "bad_arena", f"format is {', '.join(_FORMATS)}")
    rules = gw.rules_of(body.rules, body.rules.players or 2)
    deadline = gw.deadline_of(body.deadline_ms, open_seats=True)
    try:
        arena = await gw.arenas.create(
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


async def arenas(gw: Gateway, request: Request) -> Response:
    """GET /arenas: the latest arenas."""
    return Response.json({"arenas": [a.summary() for a in await gw.arenas.latest()]})


async def arena(gw: Gateway, request: Request) -> Response:
    """GET /arenas/{id}: the arena, its entrants, matches in play and standings."""
    return Response.json({"arena": (await _arena(gw, request)).public()})


async def _arena(gw: Gateway, request: Request) -> Arena:
    arena = await gw.arenas.get(request.params["arena_id"])
    if arena is None:
        raise ApiError(404, "no_arena", f"no arena {request.params['arena_id']!r}")
    return arena


async def enter(gw: Gateway, request: Request) -> Response:
    """POST /arenas/{id}/join (an account) — or, with the operator's token and a body
    {"pool"}, a house bot pool."""
    raw = await request.json_body(gw.config.max_body_bytes)
    if raw.strip():
        await gw.operator(request)
        pool = decode_body(raw, _ENTRANT, "entrant").pool
        await gw.check_pools([pool])
        key, name = f"house:{pool}", pool
    else:
        account = await gw.account(request)
        key, name = account.id, account.name
    return await _arena_change(gw.arenas.join(request.params["arena_id"], key, name))


async def leave(gw: Gateway, request: Request) -> Response:
    """POST /arenas/{id}/leave (an account): no more matches for it in the arena."""
    account = await gw.account(request)
    return await _arena_change(gw.arenas.leave(request.params["arena_id"], account.id))


async def start_arena(gw: Gateway, request: Request) -> Response:
    """POST /arenas/{id}/start (operator): its matches begin."""
    await gw.operator(request)
    return await _arena_change(gw.arenas.start(request.params["arena_id"]))


async def _arena_change(change: Awaitable[Arena]) -> Response:
    try:
        arena = await change
    except ArenaRefused as e:
        raise ApiError(e.status, e.code, str(e)) from None
    return Response.json({"arena": arena.public()})


async def arena_stream(gw: Gateway, request: Request) -> LiveResponse:
    """GET /arenas/{id}/stream: what happens in the arena, standings after every result;
    resumable after a line id. It counts against its client address's public streams."""
    arena = await _arena(gw, request)
    after = gw.resume_point(request) or 0
    sse = gw.wants_sse(request)
    arenas = gw.arenas
    close = await gw.open_public_stream(request)

    async def lines() -> AsyncIterator[bytes]:
        seen = after
        while True:
            oldest, batch = await arenas.since(arena.id, seen)
            if seen < oldest - 1:  # trimmed past where the client is: it is told so
                yield gap_line(seen, oldest, sse)
            for n, data in batch:
                seen = n
                yield sse_event(n, data) if sse else data + b"\n"
                if b'"type":"finished"' in data[:40]:
                    return
            if not batch:
                await asyncio.sleep(POLL_S)
                yield b""

    return LiveResponse(lines(), sse, gw.config.keepalive_s, close, "public")


OPERATIONS = (
    Operation(
        method="POST",
        path=f"{API}/arenas",
        handler=create_arena,
        summary="Create an arena (operator), open for entrants",
        security=spec.OPERATOR,
        body=ArenaBody,
        answers=spec.as_operator(
            {
                "201": spec.answer("created", spec.ref("ArenaAnswer")),
                **spec.BODY_ERRORS,
                "409": spec.error("an arena with the id drawn exists: retry", "bad_arena"),
                "422": spec.refused(
                    "JSON of the wrong shape, a bad deadline_ms, or a name, format or "
                    "settings out of range (`Error`), or rules the engine will not play "
                    "(`RejectedError`: bad_rules)",
                    "invalid_arena",
                    "invalid_match",
                    "bad_arena",
                ),
            }
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/arenas",
        handler=arenas,
        summary="The latest arenas, newest first",
        answers={
            "200": spec.answer("the arenas", spec.ref("ArenaList")),
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/arenas/{{arena_id}}",
        handler=arena,
        summary="An arena: its entrants, the matches in play and the standings",
        parameters=[spec.ARENA],
        answers={
            "200": spec.answer("the arena", spec.ref("ArenaAnswer")),
            "404": _NO_ARENA,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/arenas/{{arena_id}}/join",
        handler=enter,
        summary="Enter the arena: an account (no body), or a house pool (the "
        'operator, with a body `{"pool"}`)',
        security=[{"accountToken": []}, {"operatorToken": []}],
        parameters=[spec.ARENA],
        body=EntrantBody,
        body_required=False,
        answers={
            "200": spec.answer("in (joining again is harmless)", spec.ref("ArenaAnswer")),
            "400": spec.error("not JSON", *spec.BAD_BODY),
            "401": spec.error(
                "no token, or an unknown, rotated or revoked account token",
                "unauthorized",
            ),
            "403": spec.error(
                "a pool entered without the operator's token, or a banned account",
                "not_operator",
                "account_banned",
            ),
            "404": _NO_ARENA,
            "409": spec.error(
                "the arena is over, a round robin already started, the arena is "
                "full, or no worker serves the pool",
                "arena_over",
                "arena_started",
                "arena_full",
                "pool_unavailable",
            ),
            "413": spec.TOO_LARGE,
            "415": spec.NOT_JSON,
            "422": spec.error(
                "JSON of the wrong shape, an unknown pool, or an entrant that cannot be",
                "invalid_entrant",
                "unknown_pool",
                "bad_entrant",
            ),
            "429": spec.limited("auth_failures", 5.0, "operator_failures"),
            "503": _BUSY,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/arenas/{{arena_id}}/leave",
        handler=leave,
        summary="Leave the arena: no more matches for the account in it (a match in play goes on)",
        security=spec.ACCOUNT,
        parameters=[spec.ARENA],
        answers=spec.as_account(
            {
                "200": spec.answer("out", spec.ref("ArenaAnswer")),
                "404": _NO_ARENA,
                "409": spec.error("the account is not in the arena", "not_entered"),
                "503": _BUSY,
            }
        ),
    ),
    Operation(
        method="POST",
        path=f"{API}/arenas/{{arena_id}}/start",
        handler=start_arena,
        summary="Start the arena (operator): its entrants now are its roster, and "
        "its matches begin",
        security=spec.OPERATOR,
        parameters=[spec.ARENA],
        answers=spec.as_operator(
            {
                "200": spec.answer("running", spec.ref("ArenaAnswer")),
                "404": _NO_ARENA,
                "409": spec.error(
                    "not open (running or over), or too few entrants to fill a table",
                    "not_open",
                    "too_few_entrants",
                ),
                "503": _BUSY,
            }
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/arenas/{{arena_id}}/stream",
        handler=arena_stream,
        summary="What happens in the arena, standings after every result; it ends "
        "after the `finished` line",
        parameters=[
            spec.ARENA,
            spec.after("a line id of the arena"),
            spec.LAST_EVENT_ID,
            spec.FORMAT,
        ],
        answers={
            "200": spec.lines(
                "one `ArenaLine` a line, from the arena's first (or after `after`; "
                "the latest 1,000 are kept: a stream from before them begins with a "
                "`gap` line, then the oldest kept); as server-sent events its `id` "
                "is the line's and `event` its type",
                "ArenaLine",
            ),
            "400": _BAD_RESUME,
            "404": _NO_ARENA,
            "422": _BAD_FORMAT,
            "429": spec.limited("streams_per_client", 1.0),
            "503": spec.UNAVAILABLE,
        },
    ),
)
