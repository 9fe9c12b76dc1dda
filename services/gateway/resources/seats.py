"""A seat of a match: its stream (GET .../seats/{seat}/stream), its socket (the same GET
at .../socket upgraded to a WebSocket: services/gateway/sockets.py), its moves (POST
.../seats/{seat}/moves), and which seat a seat token plays (GET /seat).

Each is opened with the seat's token, or the account token of the account holding the seat.
A move, over HTTP or the socket, is played by the one move function (``Gateway.play_move``).
"""

from __future__ import annotations

from starlette.types import ASGIApp

from services.gateway import spec
from services.gateway.commands import Gateway, why
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response
from services.gateway.moves import TIMED_OUT, move_key
from services.gateway.protocol import API
from services.gateway.sockets import SeatSockets
from services.gateway.streaming import StreamResponse


async def whoami(gw: Gateway, request: Request) -> Response:
    """GET /seat: which match and seat the bearer token plays."""
    _, (match_id, seat) = await gw.seat_of_token(request)
    return Response.json({"match_id": match_id, "seat": seat, "links": gw.links(match_id, seat)})


def _until_turn(request: Request) -> bool:
    """``until=turn``: the seat's stream ends after its first turn line."""
    until = request.query("until")
    if until not in (None, "turn"):
        raise ApiError(422, "invalid_query", "until is turn (or left out)")
    return until == "turn"


async def seat_stream(gw: Gateway, request: Request) -> StreamResponse:
    """GET /matches/{id}/seats/{seat}/stream: what the seat may see, as it happens."""
    match_id = gw.match_id_of(request)
    seat: int = request.params["seat"]
    credential = await gw.authorize(request, match_id, seat)
    after = gw.resume_point(request)
    sse = gw.wants_sse(request)
    everything = gw.wants_everything(request)
    until_turn = _until_turn(request)
    views = gw.wants_views(request)
    release = await gw.seat_places(request, match_id, seat)
    try:
        return await gw.open_stream(
            match_id, seat, sse, after, everything, release, until_turn, views, credential
        )
    except BaseException:
        release()
        raise


async def move(gw: Gateway, request: Request) -> Response:
    """POST /matches/{id}/seats/{seat}/moves: play, draw or pass, confirmed or rejected."""
    match_id = gw.match_id_of(request)
    seat: int = request.params["seat"]
    await gw.authorize(request, match_id, seat)
    charge = gw.move_charge(match_id, seat)
    try:
        key = move_key(request.header(b"idempotency-key"))
        raw = await request.json_body(gw.config.max_body_bytes)
    except ApiError:
        await charge.hit(gw.redis)
        raise
    played = await gw.play_move(match_id, seat, key, raw, charge)
    headers = charge.headers()
    r = played.rejection
    if r is not None:
        return Response.json(
            {"error": "rejected", **why(r), "message": r.message, "accepted": False},
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


async def socket_without_upgrade(gw: Gateway, request: Request) -> Response:
    """GET .../socket without the WebSocket upgrade (services/gateway/sockets.py)."""
    return await SeatSockets(gw).upgrade_required(request)


def socket(gw: Gateway, route: str) -> ASGIApp:
    """The seat's socket's handshake, counted under ``route`` (services/gateway/sockets.py)."""
    return SeatSockets(gw).app(route)


OPERATIONS = (
    Operation(
        method="GET",
        path=f"{API}/seat",
        handler=whoami,
        summary="Which match and seat a seat token plays",
        security=spec.TOKEN,
        answers={
            "200": spec.answer("the token's seat", spec.ref("SeatOf")),
            "401": spec.error("no token, or an unknown one", "unauthorized"),
            "429": spec.GUESSING,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/matches/{{match_id}}/seats/{{seat}}/stream",
        handler=seat_stream,
        converters={"seat": "seat"},
        fast=True,
        summary="The seat's stream: a snapshot (and a turn line on its move), then "
        "its events and turns, as the seat may see them (C8)",
        security=spec.SEAT,
        parameters=[spec.MATCH, spec.SEAT_NO, *spec.STREAM_PARAMS, spec.UNTIL],
        answers={
            "200": spec.stream("the seat's lines"),
            **spec.SEAT_OPENING,
            "422": spec.error("an unknown format, events, until or views", "invalid_query"),
            **spec.SEAT_PLACES,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/matches/{{match_id}}/seats/{{seat}}/socket",
        handler=socket_without_upgrade,
        converters={"seat": "seat"},
        socket=socket,
        summary="The seat's socket: a WebSocket carrying the seat's stream down, one "
        "`SocketLine` a frame, and its moves up (`MoveFrame`), each answered under its "
        "key (`SocketFrame`)",
        description="Opened like the seat's stream (the same token, places and "
        "resume, `after` only); a refusal is the HTTP answer to the handshake. Once "
        "open, a frame that is no move is answered with a `SocketError` and the socket "
        "stays open. Close codes: 1000 the match is over (after its last lines); 4001 "
        "token_rotated, 4002 token_revoked, 4003 token_reissued, 4004 account_banned, "
        "4005 seat_ended (each after the stream's closing line); 4008 the client did "
        "not read (its frames over the gateway's buffer); 4010 the gateway ended the "
        "seat's stream before the match ended; 1009 a frame far over the body limit. "
        "A handshake without Authorization (a browser's) is accepted to wait 5 s for a "
        "`HelloFrame` with the token, then closed with 4000 + the status its refusal "
        "would have had (4401, 4403, 4408 no hello, 4429, ...). "
        "After any but 1000, open it again with `after` the last id read "
        "(docs/protocol.md, Socket).",
        security=spec.SEAT,
        parameters=[
            spec.MATCH,
            spec.SEAT_NO,
            spec.after("a match version, no snapshot"),
            {
                "name": "Upgrade",
                "in": "header",
                "required": True,
                "description": "websocket (with the rest of the WebSocket handshake, "
                "RFC 6455: Connection: Upgrade, Sec-WebSocket-Key, "
                "Sec-WebSocket-Version: 13)",
                "schema": {"enum": ["websocket"]},
            },
        ],
        answers={
            "101": {
                "description": "Switching Protocols: the socket is open; every frame "
                "it sends is JSON text, a `SocketFrame`, and it takes `MoveFrame`s",
            },
            **spec.SEAT_OPENING,
            "426": spec.error(
                "a GET without the WebSocket upgrade: connect with a WebSocket client",
                "upgrade_required",
            ),
            **spec.SEAT_PLACES,
        },
    ),
    Operation(
        method="POST",
        path=f"{API}/matches/{{match_id}}/seats/{{seat}}/moves",
        handler=move,
        converters={"seat": "seat"},
        fast=True,
        summary="Play, draw or pass, resign or abort: the answer says accepted, or why not",
        description="`resign` concedes the match for the seat's side at any time; "
        "`abort` calls it off, unrated, while the seat's side has made no move of its "
        "own (else 409 `too_late_to_abort`).",
        security=spec.SEAT,
        parameters=[
            spec.MATCH,
            spec.SEAT_NO,
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": True,
                "description": "1-64 of A-Z a-z 0-9 . _ : - ; the same key is applied "
                "once, and a post racing another with its key is that one's replay",
                "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
            },
        ],
        body="Move",
        answers={
            "200": spec.answer(
                "applied (`replayed`: an earlier post with this key applied it)",
                spec.ref("MoveAnswer"),
                headers=spec.RATE_HEADERS,
            ),
            "400": spec.error(
                "not JSON, or a missing or bad Idempotency-Key",
                *spec.BAD_BODY,
                "missing_idempotency_key",
                "bad_idempotency_key",
            ),
            **spec.SEAT_AUTH,
            "409": spec.refused(
                "refused by the referee (`RejectedError`: the engine's reason and "
                "rule, e.g. not_your_turn C4, too_late_to_abort; the log is "
                "unchanged), or the key was applied to another move (`Error`)",
                "idempotency_key_reused",
                example={
                    "error": "rejected",
                    "reason": "not_your_turn",
                    "rule": "C4",
                    "message": "it is seat 0's turn, not seat 1's",
                    "accepted": False,
                },
            ),
            "413": spec.TOO_LARGE,
            "415": spec.NOT_JSON,
            "422": spec.error("not a move: an unknown type, field or field type", "invalid_move"),
            "429": spec.limited("moves_per_second", 0.05, "rejected_moves", "auth_failures"),
            "503": spec.UNAVAILABLE,
            "504": spec.error(
                "no answer in time: send it again with the same key",
                "timeout",
            ),
        },
    ),
)
