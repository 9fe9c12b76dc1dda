"""The gateway's OpenAPI 3.1 document: paths written here, every schema generated from the
structs the gateway encodes and decodes (msgspec: services/gateway/protocol.py, and the request
bodies of services/gateway/players.py), so the document cannot drift from the wire.

Each error status of a path pins the ``error`` codes it may carry, and each 429 the limits it
may name, in its schema, so a client can switch on them and a test can hold the gateway to
them: tests/gateway/test_protocol_fixes.py (matches, seats, moves, streams) and
tests/gateway/test_openapi_accounts.py (accounts, challenges, seeks, arenas, cancel, resign)
check real answers against the document, body and headers.

Every operation takes the ``Domino-Protocol`` header, may answer it 400 ``unsupported_protocol``
(a ``ProtocolError``), and states the version of every answer in the same header
(services/gateway/versions.py).
"""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

import msgspec

from events.model import MatchEnded, RoundEnded, TurnTimedOut
from services.gateway.lobby_protocol import (
    AccountAnswer,
    AccountLine,
    ArenaAnswer,
    ArenaBody,
    ArenaLine,
    ArenaList,
    ChallengeAnswer,
    ChallengeBody,
    ChallengeList,
    EntrantBody,
    Me,
    PlayLine,
    RegisterBody,
    Registered,
    SeekAnswer,
    SeekBody,
    SeekList,
    TokenAnswer,
    Withdrawn,
)
from services.gateway.origins import STATE_CHANGING
from services.gateway.protocol import (
    API,
    FILTERED_PAGES,
    LISTED,
    NAME_CHARS,
    PROTOCOL,
    PROTOCOL_HEADER,
    RECENT,
    REPLAYED,
    SPOKEN,
    Cancelled,
    CreateBody,
    Created,
    Error,
    EventLine,
    Gap,
    Health,
    HelloFrame,
    JoinBody,
    Joined,
    LimitError,
    MatchDetail,
    MatchInfo,
    MoveAccepted,
    MoveAnswer,
    MoveBody,
    MoveFrame,
    MoveLimited,
    MoveRejected,
    MoveTimedOut,
    PlayerAnswer,
    ProtocolError,
    RatingsAnswer,
    RejectedError,
    Replay,
    SeatOf,
    Snapshot,
    SocketError,
    SocketLine,
    TooLargeError,
    TurnLine,
)
from services.lobby.arena import FORMATS
from services.lobby.seeks import KINDS
from services.projections.projector import Summary
from services.redis.paging import CURSOR_CHARS

_REF = "#/components/schemas/{name}"
_STRUCTS: list[Any] = [
    Snapshot,
    EventLine,
    TurnLine,
    Gap,
    MoveBody,
    CreateBody,
    JoinBody,
    Created,
    Joined,
    MatchDetail,
    MatchInfo,
    Summary,
    SeatOf,
    MoveAnswer,
    Cancelled,
    Health,
    Error,
    RejectedError,
    LimitError,
    TooLargeError,
    ProtocolError,
    TurnTimedOut,
    RoundEnded,
    MatchEnded,
    # the pages' reads
    Replay,
    RatingsAnswer,
    PlayerAnswer,
    # bots as players
    RegisterBody,
    ChallengeBody,
    SeekBody,
    ArenaBody,
    EntrantBody,
    Registered,
    AccountAnswer,
    TokenAnswer,
    Me,
    ChallengeAnswer,
    ChallengeList,
    SeekAnswer,
    SeekList,
    Withdrawn,
    ArenaAnswer,
    ArenaList,
    AccountLine,
    PlayLine,
    ArenaLine,
    # the seat's socket
    SocketLine,
    HelloFrame,
    MoveFrame,
    MoveAccepted,
    MoveRejected,
    MoveLimited,
    MoveTimedOut,
    SocketError,
]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _json(description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"schema": schema}
    if "example" in extra:
        content["example"] = extra.pop("example")
    return {"description": description, "content": {"application/json": content}, **extra}


def _coded(*codes: str) -> dict[str, Any]:
    """An ``Error`` whose ``error`` is one of ``codes``."""
    return {"allOf": [_ref("Error"), {"properties": {"error": {"enum": list(codes)}}}]}


def _listed(description: str, codes: tuple[str, ...]) -> str:
    return description + (f" (`error`: {', '.join(codes)})" if codes else "")


def _error(description: str, *codes: str, **extra: Any) -> dict[str, Any]:
    """An error answer: an ``Error`` whose ``error`` is one of ``codes``."""
    return _json(_listed(description, codes), _coded(*codes), **extra)


def _refused(description: str, *codes: str, **extra: Any) -> dict[str, Any]:
    """An error answer: the engine's refusal (``RejectedError``, with its reason and rule), or
    an ``Error`` whose ``error`` is one of ``codes``."""
    schema = {"anyOf": [_ref("RejectedError"), _coded(*codes)]} if codes else _ref("RejectedError")
    return _json(_listed(description, ("rejected", *codes)), schema, **extra)


_RATE_HEADERS = {
    name: {"$ref": f"#/components/headers/{name}"}
    for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
}


def _limited(limit: str, retry_after: float, *also: str) -> dict[str, Any]:
    """429 over ``limit`` (or one of ``also``): the body names it; Retry-After and RateLimit-*
    headers say when. The example is ``limit``'s."""
    names = [limit, *also]
    listed = ", ".join(f"`{n}`" for n in names)
    return _json(
        f"over a limit ({listed}): retry after `Retry-After` seconds",
        {"allOf": [_ref("LimitError"), {"properties": {"limit": {"enum": names}}}]},
        headers={"Retry-After": {"$ref": "#/components/headers/Retry-After"}, **_RATE_HEADERS},
        example={
            "error": "rate_limited",
            "limit": limit,
            "retry_after": retry_after,
            "message": f"{limit}: retry in {retry_after} s",
        },
    )


def _body(component: str, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": _ref(component)}}}


_UNAVAILABLE = _error(
    "Redis is unreachable (`unavailable`), or what is stored of the match was written by a "
    "newer release than this gateway's (`newer_schema`, during a rolling deploy): retry",
    "unavailable",
    "newer_schema",
)
_BULK = _limited("bulk_reads", 0.5)
"""A bulk read (a replay, a list, a fold) that found no place: retry at its turn."""
_CORRUPT = _error(
    "what is stored of the match (its log, its lobby record) cannot be read: an operator "
    "must repair it",
    "corrupt_data",
)
_TOO_LARGE = _json("the body is over `max` bytes (`error`: body_too_large)", _ref("TooLargeError"))
_NOT_JSON = _error(
    "a body declared as a form or plain text: send JSON as application/json",
    "unsupported_media_type",
)
_BAD_BODY = ("bad_json", "bad_request")  # not JSON; a Content-Length that is no number

_SEAT_AUTH = {
    "401": _error("no token, or an unknown one", "unauthorized"),
    "403": _error(
        "a token for another match or seat, or an account that does not hold it or is banned",
        "wrong_match",
        "wrong_seat",
        "not_your_seat",
        "account_banned",
    ),
    "404": _error(
        "no such match, or a seat that is no whole number (no such path)",
        "no_match",
        "not_found",
    ),
}
"""What a request for a seat (its stream, socket or moves) may be refused with for its token."""
_SEAT_OPENING = {
    "400": _error("a resume point that is no id of the match", "bad_resume"),
    **_SEAT_AUTH,
}
"""What opening a seat's stream or socket may be refused with before its places are taken."""
_SEAT_PLACES = {
    "429": _limited("streams_per_token", 1.0, "player_streams_per_client", "auth_failures"),
    "503": _UNAVAILABLE,
}
"""A seat's stream or socket over its places, or its match's log unreadable."""

# who may call: Authorization: Bearer <token> of one of these schemes
_TOKEN: list[dict[str, list[str]]] = [{"seatToken": []}]
_SEAT: list[dict[str, list[str]]] = [{"seatToken": []}, {"accountToken": []}]
_ACCOUNT: list[dict[str, list[str]]] = [{"accountToken": []}]
_MAYBE_ACCOUNT: list[dict[str, list[str]]] = [{}, {"accountToken": []}]
_OPERATOR: list[dict[str, list[str]]] = [{"operatorToken": []}]
_NO_ACCOUNT = _error(
    "no account token (dab_...), or an unknown, rotated or revoked one", "unauthorized"
)
_BANNED = _error("the account is banned", "account_banned")
_NO_OPERATOR = _error("no token", "unauthorized")
_NOT_OPERATOR = _error("not the operator's token", "not_operator")
_GUESSING = _limited("auth_failures", 5.0)  # too many unknown tokens from this address
_OPERATOR_GUESSING = _limited("operator_failures", 20.0)  # too many wrong operator tokens


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _page_params(most: int, limit: str, first: str) -> list[dict[str, Any]]:
    """A paged list's ``limit`` (1 to ``most``, described as ``limit``) and ``cursor`` (the
    ``next`` of the page before; ``first`` says what a request without one gets)."""
    return [
        {
            "name": "limit",
            "in": "query",
            "description": limit,
            "schema": {"type": "integer", "minimum": 1, "maximum": most},
        },
        {
            "name": "cursor",
            "in": "query",
            "description": f"the `next` of the page before ({first})",
            "schema": {"type": "string", "minLength": 3, "maxLength": CURSOR_CHARS},
        },
    ]


_FAMILY_FILTER = {
    "name": "family",
    "in": "query",
    "description": "express (the default for ratings) or straight",
    "schema": {"enum": ["express", "straight"]},
}
_MATCH = {"name": "match_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SEAT_NO = {"name": "seat", "in": "path", "required": True, "schema": {"type": "integer"}}
_NAME = _path("name", "an account's name (or one too like it: names are unique by how they look)")
_CHALLENGE = _path("challenge_id", "c- and 12 hex digits")
_SEEK = _path("seek_id", "s- and 12 hex digits")
_ARENA = _path("arena_id", "a- and hex digits")


def _after(what: str) -> dict[str, Any]:
    return {
        "name": "after",
        "in": "query",
        "description": f"resume: send the lines after this id ({what})",
        "schema": {"type": "integer", "minimum": 0},
    }


_LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "description": "resume, as `after` (the query parameter wins when both are given)",
    "schema": {"type": "string"},
}
_FORMAT = {
    "name": "format",
    "in": "query",
    "description": "ndjson (default) or sse; `Accept: text/event-stream` also picks sse",
    "schema": {"enum": ["ndjson", "sse"]},
}
_EVENTS = {
    "name": "events",
    "in": "query",
    "description": "all (default), or minimal: of the events only the receiver's own "
    "`turn_timed_out`, `round_ended` and `match_ended` (lines as `MinimalLine`)",
    "schema": {"enum": ["all", "minimal"]},
}
_STREAM_PARAMS = [
    _after("a match version, no snapshot"),
    _LAST_EVENT_ID,
    _FORMAT,
    _EVENTS,
    {
        "name": "views",
        "in": "query",
        "description": "1: a `snapshot` line (the receiver's view) after each batch of events "
        "and after a resumed stream's backlog, and one last at the match's end; its "
        "`deadline` is the seat to move's, whoever receives it. 0 (the default): none but a "
        "fresh stream's first",
        "schema": {"enum": ["0", "1"]},
    },
]
_UNTIL = {
    "name": "until",
    "in": "query",
    "description": "turn: the stream ends after its first turn line (a long poll for the "
    "seat's move; the match's end also ends it)",
    "schema": {"enum": ["turn"]},
}


def _lines(description: str, component: str) -> dict[str, Any]:
    """200 with a stream: one ``component`` a line, as NDJSON or server-sent events."""
    return {
        "description": f"{description}; a blank line (an SSE comment) is a keep-alive",
        "content": {
            "application/x-ndjson": {"schema": _ref(component)},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }


def _stream(what: str) -> dict[str, Any]:
    return _lines(
        f"{what}: one JSON object a line (`Line`; with events=minimal, `MinimalLine`). As "
        "server-sent events each line is an event whose `id` is the line's id, `event` its "
        "type and `data` the object. A resume from events the log no longer holds begins "
        "with a `gap` line, then the snapshot a fresh stream begins with",
        "Line",
    )


def _paths() -> dict[str, Any]:
    m = f"{API}/matches/{{match_id}}"
    return {
        f"{API}/matches": {
            "get": {
                "summary": "List matches: open (waiting for players), live or finished",
                "description": "A page: open matches oldest first; live and finished ones "
                "the most recently updated, oldest of them first. `next` is the cursor of the "
                "page after (older live or finished matches, newer open ones); pass it as "
                "`cursor`. A page reads at most `limit` matches of each partition; with a "
                f"filter, pages are read on until `limit` pass it or {FILTERED_PAGES} were "
                "read, so the page of a rare filter may hold fewer (even none) and still have "
                "a `next`.",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"enum": ["open", "live", "finished"], "default": "open"},
                    },
                    *_page_params(LISTED, "at most this many", "none: the first page"),
                    _FAMILY_FILTER,
                    {
                        "name": "player",
                        "in": "query",
                        "description": "only matches with a seat of this name, exactly",
                        "schema": {"type": "string", "minLength": 1, "maxLength": NAME_CHARS},
                    },
                ],
                "responses": {
                    "200": _json(
                        "the matches: lobby records (open), or summaries (live, finished)",
                        _ref("MatchList"),
                    ),
                    "422": _error(
                        "an unknown status or family, a limit out of 1 to "
                        f"{LISTED}, a player name too long, or a cursor no page answered",
                        "invalid_query",
                    ),
                    "429": _BULK,
                    "503": _UNAVAILABLE,
                },
            },
            "post": {
                "summary": "Create a match: a house bot pool per seat, or null for an open seat",
                "description": "With an account token the account is the match's creator; "
                "without one the answer's `owner_token` (shown once) is, and cancels it "
                "(DELETE) while it waits for players.",
                "security": _MAYBE_ACCOUNT,
                "requestBody": _body("CreateBody"),
                "responses": {
                    "201": _json(
                        "created; it starts when every open seat is taken", _ref("Created")
                    ),
                    "400": _error("not JSON", *_BAD_BODY),
                    "401": _NO_ACCOUNT,
                    "403": _BANNED,
                    "409": _refused(
                        "a house pool no worker serves, or (every seat a house bot's) the "
                        "referee refused to create it",
                        "pool_unavailable",
                    ),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _refused(
                        "JSON of the wrong shape, a bad name or an unknown pool (`Error`), or "
                        "rules the engine will not play (`RejectedError`: `bad_rules`, "
                        "`bad_players`, with the rule, e.g. C3 for the player count)",
                        "invalid_match",
                        "invalid_name",
                        "unknown_pool",
                    ),
                    "429": _limited(
                        "lobby_per_second",
                        0.2,
                        "open_matches_per_client",
                        "house_matches_per_client",
                        "house_matches_per_account",
                        "auth_failures",
                    ),
                    "503": _UNAVAILABLE,
                },
            },
        },
        m: {
            "get": {
                "summary": "One match: its lobby record (seats, status) and its log's version",
                "parameters": [_MATCH],
                "responses": {
                    "200": _json("the match", _ref("MatchDetail")),
                    "404": _error("no such match", "no_match"),
                    "409": _CORRUPT,
                    "503": _UNAVAILABLE,
                },
            },
            "delete": {
                "summary": "Cancel a match: its creator while it waits for players; the "
                "operator at any time (a started match ends unrated, reason cancelled)",
                "description": "The creator is the account that created it (its account "
                "token) or, for a match created without one, the bearer of its "
                "`owner_token`.",
                "security": [{"accountToken": []}, {"ownerToken": []}, {"operatorToken": []}],
                "parameters": [_MATCH],
                "responses": {
                    "200": _json("cancelled", _ref("Cancelled")),
                    "401": _error(
                        "no token, or an unknown, rotated or revoked account token",
                        "unauthorized",
                    ),
                    "403": _error(
                        "not the match's creator, or a banned account",
                        "not_creator",
                        "account_banned",
                    ),
                    "404": _error("no such match (for its creator: in the lobby)", "no_match"),
                    "409": _refused(
                        "it has started (only the operator ends a started match: its players "
                        "resign or abort), or the referee refused the operator's cancel",
                        "match_started",
                    ),
                    "429": _limited("auth_failures", 5.0, "operator_failures"),
                    "503": _UNAVAILABLE,
                },
            },
        },
        f"{m}/join": {
            "post": {
                "summary": "Take an open seat; the answer holds the seat token, shown only once",
                "description": "With an account token the seat is the account's: it plays "
                "under the account's name and rating, and the account token opens it too.",
                "security": _MAYBE_ACCOUNT,
                "parameters": [_MATCH],
                "requestBody": _body("JoinBody", required=False),
                "responses": {
                    "201": _json("seated", _ref("Joined")),
                    "400": _error("not JSON", *_BAD_BODY),
                    "401": _NO_ACCOUNT,
                    "403": _BANNED,
                    "404": _error("no such match or seat", "no_match", "no_such_seat"),
                    "409": _refused(
                        "the seat is not to be had, the account plays its most matches at "
                        "once, or (the last seat taken) the referee refused to create it",
                        "seat_taken",
                        "seat_is_house_bot",
                        "match_full",
                        "too_many_matches",
                        "corrupt_data",
                    ),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _error(
                        "JSON of the wrong shape, or a bad name", "invalid_join", "invalid_name"
                    ),
                    "429": _limited(
                        "lobby_per_second", 0.2, "waiting_seats_per_client", "auth_failures"
                    ),
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{API}/seat": {
            "get": {
                "summary": "Which match and seat a seat token plays",
                "security": _TOKEN,
                "responses": {
                    "200": _json("the token's seat", _ref("SeatOf")),
                    "401": _error("no token, or an unknown one", "unauthorized"),
                    "429": _GUESSING,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{m}/seats/{{seat}}/stream": {
            "get": {
                "summary": "The seat's stream: a snapshot (and a turn line on its move), then "
                "its events and turns, as the seat may see them (C8)",
                "security": _SEAT,
                "parameters": [_MATCH, _SEAT_NO, *_STREAM_PARAMS, _UNTIL],
                "responses": {
                    "200": _stream("the seat's lines"),
                    **_SEAT_OPENING,
                    "422": _error("an unknown format, events, until or views", "invalid_query"),
                    **_SEAT_PLACES,
                },
            }
        },
        f"{m}/seats/{{seat}}/socket": {
            "get": {
                "summary": "The seat's socket: a WebSocket carrying the seat's stream down, one "
                "`SocketLine` a frame, and its moves up (`MoveFrame`), each answered under its "
                "key (`SocketFrame`)",
                "description": "Opened like the seat's stream (the same token, places and "
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
                "security": _SEAT,
                "parameters": [
                    _MATCH,
                    _SEAT_NO,
                    _after("a match version, no snapshot"),
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
                "responses": {
                    "101": {
                        "description": "Switching Protocols: the socket is open; every frame "
                        "it sends is JSON text, a `SocketFrame`, and it takes `MoveFrame`s",
                    },
                    **_SEAT_OPENING,
                    "426": _error(
                        "a GET without the WebSocket upgrade: connect with a WebSocket client",
                        "upgrade_required",
                    ),
                    **_SEAT_PLACES,
                },
            }
        },
        f"{m}/seats/{{seat}}/moves": {
            "post": {
                "summary": "Play, draw or pass, resign or abort: the answer says accepted, or "
                "why not",
                "description": "`resign` concedes the match for the seat's side at any time; "
                "`abort` calls it off, unrated, while the seat's side has made no move of its "
                "own (else 409 `too_late_to_abort`).",
                "security": _SEAT,
                "parameters": [
                    _MATCH,
                    _SEAT_NO,
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "description": "1-64 of A-Z a-z 0-9 . _ : - ; the same key is applied "
                        "once, and a post racing another with its key is that one's replay",
                        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
                    },
                ],
                "requestBody": _body("Move"),
                "responses": {
                    "200": _json(
                        "applied (`replayed`: an earlier post with this key applied it)",
                        _ref("MoveAnswer"),
                        headers=_RATE_HEADERS,
                    ),
                    "400": _error(
                        "not JSON, or a missing or bad Idempotency-Key",
                        *_BAD_BODY,
                        "missing_idempotency_key",
                        "bad_idempotency_key",
                    ),
                    **_SEAT_AUTH,
                    "409": _refused(
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
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _error(
                        "not a move: an unknown type, field or field type", "invalid_move"
                    ),
                    "429": _limited("moves_per_second", 0.05, "rejected_moves", "auth_failures"),
                    "503": _UNAVAILABLE,
                    "504": _error(
                        "no answer in time: send it again with the same key",
                        "timeout",
                    ),
                },
            }
        },
        f"{m}/stream": {
            "get": {
                "summary": "The public stream: the public view and events (hands at round end)",
                "parameters": [_MATCH, *_STREAM_PARAMS],
                "responses": {
                    "200": _stream("the public lines (never a turn line)"),
                    "400": _error("a resume point that is no id of the match", "bad_resume"),
                    "404": _error("no such match", "no_match"),
                    "422": _error("an unknown format, events or views", "invalid_query"),
                    "429": _limited("streams_per_client", 1.0, "bulk_reads"),
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{m}/replay": {
            "get": {
                "summary": "Replay a match: each event and the view just after it, as a "
                "spectator sees them (C8) or, once the match is over, as one seat did",
                "description": "Frame v's view is what `domino replay ID --at v [--seat K] "
                f"--json` prints last. A log of more than {REPLAYED} events is not replayed "
                "(413).",
                "parameters": [
                    _MATCH,
                    {
                        "name": "seat",
                        "in": "query",
                        "description": "the seat whose view to show (the match must be over)",
                        "schema": {"type": "integer", "minimum": 0},
                    },
                ],
                "responses": {
                    "200": _json("every event, from 1, with the view after it", _ref("Replay")),
                    "403": _error(
                        "a seat's replay of a match not over (it would show a live hand)",
                        "match_not_over",
                    ),
                    "404": _error(
                        "no such match (or not started), or seat", "no_match", "no_such_seat"
                    ),
                    "409": _CORRUPT,
                    "413": _error(f"a log of more than {REPLAYED} events", "replay_too_long"),
                    "422": _error("a seat that is no whole number", "invalid_query"),
                    "429": _BULK,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{API}/ratings": {
            "get": {
                "summary": "A game family's ratings: accounts and house bot pools, best first",
                "description": "Folded from every finished match's result in the order the "
                "matches ended; the gateway answers from one fold for a few seconds.",
                "parameters": [_FAMILY_FILTER],
                "responses": {
                    "200": _json("the family's table", _ref("RatingsAnswer")),
                    "422": _error("an unknown family", "invalid_query"),
                    "429": _BULK,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{API}/players/{{key}}": {
            "get": {
                "summary": "One player: its results, ratings, their history and a page of its "
                f"latest matches ({RECENT} at most)",
                "description": "`recent` is a page, newest first, read from the player's own "
                "index; `next` is the cursor of the page of older matches (pass it as "
                "`cursor`), null on the last.",
                "parameters": [
                    _path(
                        "key",
                        "an account id, house:<pool> or guest:<name>, URL-encoded",
                    ),
                    *_page_params(RECENT, "at most this many recent matches", "none: the latest"),
                ],
                "responses": {
                    "200": _json("the player", _ref("PlayerAnswer")),
                    "422": _error(
                        f"a limit out of 1 to {RECENT}, or a cursor no page answered",
                        "invalid_query",
                    ),
                    "404": _error(
                        "nobody of that key has played here (a key with a line break is no "
                        "path at all)",
                        "no_player",
                        "not_found",
                    ),
                    "429": _BULK,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{API}/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})},
            }
        },
        "/healthz": {
            "get": {"summary": "Liveness", "responses": {"200": _json("ok", _ref("Health"))}}
        },
        "/readyz": {
            "get": {
                "summary": "Readiness: the gateway runs and its Redis answers",
                "responses": {
                    "200": _json("ready", _ref("Readiness")),
                    "503": _json("not ready, and why", _ref("Readiness")),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "The gateway's metrics in Prometheus's text format (operations.md)",
                "security": _OPERATOR,
                "responses": {
                    "200": {
                        "description": "the metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "401": _NO_OPERATOR,
                    "403": _NOT_OPERATOR,
                    "429": _OPERATOR_GUESSING,
                },
            }
        },
    }


def _as_account(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers of a call made with an account token: ``answers`` by status, over the
    account's own (401, 403 banned, 429 too many unknown tokens, 503)."""
    own = {"401": _NO_ACCOUNT, "403": _BANNED, "429": _GUESSING, "503": _UNAVAILABLE}
    return dict(sorted({**own, **answers}.items()))


def _as_operator(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers of an operator's call: ``answers`` by status, over 401, 403, 429 (too
    many wrong operator tokens from the address) and 503."""
    own = {
        "401": _NO_OPERATOR,
        "403": _NOT_OPERATOR,
        "429": _OPERATOR_GUESSING,
        "503": _UNAVAILABLE,
    }
    return dict(sorted({**own, **answers}.items()))


_BODY_ERRORS = {  # reading a JSON body; its 422 is each path's own
    "400": _error("not JSON", *_BAD_BODY),
    "413": _TOO_LARGE,
    "415": _NOT_JSON,
}


def _player_paths() -> dict[str, Any]:
    """The routes for bots as players: accounts, their streams, challenges, seeks, arenas."""
    name = f"{API}/accounts/{{name}}"
    challenge = f"{API}/challenges/{{challenge_id}}"
    arena = f"{API}/arenas/{{arena_id}}"
    no_account = _error("no account of that name", "no_account")
    no_challenge = _error("no such challenge that names this account", "no_challenge")
    closed = _error("the challenge is no longer open", "challenge_closed")
    no_arena = _error("no such arena", "no_arena")
    busy = _error(
        "Redis is unreachable, or the arena changed too often to update: retry",
        "unavailable",
        "arena_busy",
    )
    bad_resume = _error("`after` / Last-Event-ID is not an id: 0, 1, 2, ...", "bad_resume")
    bad_format = _error("an unknown format", "invalid_query")
    return {
        f"{API}/accounts": {
            "post": {
                "summary": "Register an account: its token is in the answer, shown only once",
                "requestBody": _body("RegisterBody"),
                "responses": {
                    "201": _json("registered", _ref("Registered")),
                    "400": _error("not JSON", *_BAD_BODY),
                    "409": _error("the name, or one too like it, is taken", "name_taken"),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _error(
                        "JSON of the wrong shape, or a name that may not be registered (2-20 "
                        "of A-Z a-z 0-9 _ -, not a house pool's or the service's own word)",
                        "invalid_account",
                        "bad_name",
                        "reserved_name",
                    ),
                    "429": _limited("lobby_per_second", 0.2),
                    "503": _UNAVAILABLE,
                },
            }
        },
        name: {
            "get": {
                "summary": "What anyone may know of an account",
                "parameters": [_NAME],
                "responses": {
                    "200": _json("the account", _ref("AccountAnswer")),
                    "404": no_account,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{name}/ban": {
            "post": {
                "summary": "Ban an account (operator): its calls answer 403, its seeks leave "
                "the queue; its matches go on and time out",
                "security": _OPERATOR,
                "parameters": [_NAME],
                "responses": _as_operator(
                    {"200": _json("banned", _ref("AccountAnswer")), "404": no_account}
                ),
            }
        },
        f"{name}/unban": {
            "post": {
                "summary": "Lift an account's ban (operator)",
                "security": _OPERATOR,
                "parameters": [_NAME],
                "responses": _as_operator(
                    {"200": _json("no longer banned", _ref("AccountAnswer")), "404": no_account}
                ),
            }
        },
        f"{name}/token": {
            "post": {
                "summary": "Issue an account a new token (operator), shown once; the old one "
                "stops working",
                "security": _OPERATOR,
                "parameters": [_NAME],
                "responses": _as_operator(
                    {"200": _json("the new token", _ref("Registered")), "404": no_account}
                ),
            }
        },
        f"{API}/account": {
            "get": {
                "summary": "The account, its live matches, its seeks and its latest event id",
                "security": _ACCOUNT,
                "responses": _as_account({"200": _json("the account", _ref("Me"))}),
            }
        },
        f"{API}/account/token": {
            "post": {
                "summary": "Rotate the token: a new one, shown once; the old one stops working "
                "(within 5 s on every gateway)",
                "security": _ACCOUNT,
                "responses": _as_account({"200": _json("the new token", _ref("TokenAnswer"))}),
            },
            "delete": {
                "summary": "Revoke the token: it stops working, and only the operator can "
                "issue another",
                "security": _ACCOUNT,
                "responses": _as_account({"204": {"description": "revoked"}}),
            },
        },
        f"{API}/account/stream": {
            "get": {
                "summary": "The account's events: a fresh stream begins with a `state` line, "
                "then challenges, matches starting and ending, seeks expiring",
                "security": _ACCOUNT,
                "parameters": [
                    _after("an event id of the account, no state line"),
                    _LAST_EVENT_ID,
                    _FORMAT,
                ],
                "responses": _as_account(
                    {
                        "200": _lines(
                            "one `AccountLine` a line, each with its `id` on the account's "
                            "stream (the latest 1,000 are kept: a resume from before them "
                            "begins with a `gap` line, then `state`); as server-sent events "
                            "its `id` is the line's and `event` its type",
                            "AccountLine",
                        ),
                        "400": bad_resume,
                        "422": bad_format,
                        "429": _limited(
                            "streams_per_account", 1.0, "player_streams_per_client", "auth_failures"
                        ),
                    }
                ),
            }
        },
        f"{API}/account/play": {
            "get": {
                "summary": "Every seat the account holds on one connection: each seat "
                "stream's line wrapped with its match and seat; new matches join as they start",
                "security": _ACCOUNT,
                "parameters": [_FORMAT, _EVENTS],
                "responses": _as_account(
                    {
                        "200": _lines(
                            "one `PlayLine` a line; each live seat starts with its snapshot "
                            "(and its turn line, on its move). As server-sent events each is "
                            "an event `seat` (no id: resume by reconnecting)",
                            "PlayLine",
                        ),
                        "422": bad_format,
                        "429": _limited(
                            "streams_per_account", 1.0, "player_streams_per_client", "auth_failures"
                        ),
                    }
                ),
            }
        },
        f"{API}/challenges": {
            "post": {
                "summary": "Challenge named accounts: the challenger sits at seat 0, the "
                "challenged in the order named; the match starts when the last one accepts. "
                "Opponents that are all house bot pools (`greedy`, `random`, ...) always accept: "
                "the match starts at once, and the answer is the challenge started",
                "security": _ACCOUNT,
                "requestBody": _body("ChallengeBody"),
                "responses": _as_account(
                    {
                        "201": _json(
                            "made; those named get a `challenge` event (house pools: started, "
                            "with its `match_id`)",
                            _ref("ChallengeAnswer"),
                        ),
                        **_BODY_ERRORS,
                        "404": _error("no account of a name given", "no_account"),
                        "409": _error(
                            "an account named is banned, the challenger plays its most "
                            "matches at once, or no worker of a house pool named is running",
                            "account_banned",
                            "too_many_matches",
                            "pool_unavailable",
                        ),
                        "422": _refused(
                            "JSON of the wrong shape, a bad deadline_ms, or opponents that do not "
                            "fill the rules' seats or repeat (`Error`), or rules the engine will "
                            "not play (`RejectedError`: bad_rules, with the rule)",
                            "invalid_challenge",
                            "invalid_match",
                            "bad_players",
                        ),
                        "429": _limited(
                            "lobby_per_second",
                            0.2,
                            "challenges_per_minute",
                            "challenges_received_per_minute",
                            "open_challenges_per_account",
                            "open_challenges_to_account",
                            "open_challenges_per_pair",
                            "house_matches_per_account",
                            "house_matches_per_client",
                            "auth_failures",
                        ),
                    }
                ),
            },
            "get": {
                "summary": "The account's challenges, made and received, newest first: every "
                "open one, and the latest closed within the hour",
                "security": _ACCOUNT,
                "responses": _as_account({"200": _json("the challenges", _ref("ChallengeList"))}),
            },
        },
        f"{challenge}/accept": {
            "post": {
                "summary": "Accept a challenge made to the account; the last acceptance starts "
                "the match (`match_id` in the answer, `match_started` on every account's stream)",
                "security": _ACCOUNT,
                "parameters": [_CHALLENGE],
                "responses": _as_account(
                    {
                        "200": _json("accepted", _ref("ChallengeAnswer")),
                        "403": _error(
                            "the challenge was not made to this account, or the account is banned",
                            "not_challenged",
                            "account_banned",
                        ),
                        "404": no_challenge,
                        "409": _refused(
                            "closed (answered, withdrawn, expired), the account plays its most "
                            "matches at once, an account of it is gone, or the referee refused to "
                            "create the match",
                            "challenge_closed",
                            "too_many_matches",
                            "challenge_failed",
                        ),
                    }
                ),
            }
        },
        f"{challenge}/decline": {
            "post": {
                "summary": "Decline a challenge made to the account: it is closed",
                "security": _ACCOUNT,
                "parameters": [_CHALLENGE],
                "responses": _as_account(
                    {
                        "200": _json("declined", _ref("ChallengeAnswer")),
                        "403": _error(
                            "the challenge was not made to this account, or the account is banned",
                            "not_yours",
                            "account_banned",
                        ),
                        "404": no_challenge,
                        "409": closed,
                    }
                ),
            }
        },
        f"{challenge}/cancel": {
            "post": {
                "summary": "Withdraw a challenge the account made",
                "security": _ACCOUNT,
                "parameters": [_CHALLENGE],
                "responses": _as_account(
                    {
                        "200": _json("withdrawn", _ref("ChallengeAnswer")),
                        "403": _error(
                            "the challenge is another account's, or the account is banned",
                            "not_yours",
                            "account_banned",
                        ),
                        "404": no_challenge,
                        "409": closed,
                    }
                ),
            }
        },
        f"{API}/seeks": {
            "post": {
                "summary": "Wait for a game of a kind; the match comes as `match_started` on "
                "the account stream (house bots fill the seats left after a while)",
                "security": _ACCOUNT,
                "requestBody": _body("SeekBody"),
                "responses": _as_account(
                    {
                        "200": _json(
                            "the account's seek of that kind, already waiting", _ref("SeekAnswer")
                        ),
                        "201": _json("queued", _ref("SeekAnswer")),
                        **_BODY_ERRORS,
                        "422": _error(
                            "JSON of the wrong shape, or a kind there is none of",
                            "invalid_seek",
                            "unknown_kind",
                        ),
                        "409": _error(
                            "the account plays its most matches at once", "too_many_matches"
                        ),
                        "429": _limited("seeks_per_account", 10.0, "auth_failures"),
                    }
                ),
            },
            "get": {
                "summary": "The account's waiting seeks",
                "security": _ACCOUNT,
                "responses": _as_account({"200": _json("the seeks", _ref("SeekList"))}),
            },
        },
        f"{API}/seeks/{{seek_id}}": {
            "delete": {
                "summary": "Withdraw a waiting seek",
                "security": _ACCOUNT,
                "parameters": [_SEEK],
                "responses": _as_account(
                    {
                        "200": _json("withdrawn", _ref("Withdrawn")),
                        "404": _error("no waiting seek of the account by that id", "no_seek"),
                    }
                ),
            }
        },
        f"{API}/arenas": {
            "post": {
                "summary": "Create an arena (operator), open for entrants",
                "security": _OPERATOR,
                "requestBody": _body("ArenaBody"),
                "responses": _as_operator(
                    {
                        "201": _json("created", _ref("ArenaAnswer")),
                        **_BODY_ERRORS,
                        "409": _error("an arena with the id drawn exists: retry", "bad_arena"),
                        "422": _refused(
                            "JSON of the wrong shape, a bad deadline_ms, or a name, format or "
                            "settings out of range (`Error`), or rules the engine will not play "
                            "(`RejectedError`: bad_rules)",
                            "invalid_arena",
                            "invalid_match",
                            "bad_arena",
                        ),
                    }
                ),
            },
            "get": {
                "summary": "The latest arenas, newest first",
                "responses": {
                    "200": _json("the arenas", _ref("ArenaList")),
                    "503": _UNAVAILABLE,
                },
            },
        },
        arena: {
            "get": {
                "summary": "An arena: its entrants, the matches in play and the standings",
                "parameters": [_ARENA],
                "responses": {
                    "200": _json("the arena", _ref("ArenaAnswer")),
                    "404": no_arena,
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{arena}/join": {
            "post": {
                "summary": "Enter the arena: an account (no body), or a house pool (the "
                'operator, with a body `{"pool"}`)',
                "security": [{"accountToken": []}, {"operatorToken": []}],
                "parameters": [_ARENA],
                "requestBody": _body("EntrantBody", required=False),
                "responses": {
                    "200": _json("in (joining again is harmless)", _ref("ArenaAnswer")),
                    "400": _error("not JSON", *_BAD_BODY),
                    "401": _error(
                        "no token, or an unknown, rotated or revoked account token",
                        "unauthorized",
                    ),
                    "403": _error(
                        "a pool entered without the operator's token, or a banned account",
                        "not_operator",
                        "account_banned",
                    ),
                    "404": no_arena,
                    "409": _error(
                        "the arena is over, a round robin already started, the arena is "
                        "full, or no worker serves the pool",
                        "arena_over",
                        "arena_started",
                        "arena_full",
                        "pool_unavailable",
                    ),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _error(
                        "JSON of the wrong shape, an unknown pool, or an entrant that cannot be",
                        "invalid_entrant",
                        "unknown_pool",
                        "bad_entrant",
                    ),
                    "429": _limited("auth_failures", 5.0, "operator_failures"),
                    "503": busy,
                },
            }
        },
        f"{arena}/leave": {
            "post": {
                "summary": "Leave the arena: no more matches for the account in it (a match "
                "in play goes on)",
                "security": _ACCOUNT,
                "parameters": [_ARENA],
                "responses": _as_account(
                    {
                        "200": _json("out", _ref("ArenaAnswer")),
                        "404": no_arena,
                        "409": _error("the account is not in the arena", "not_entered"),
                        "503": busy,
                    }
                ),
            }
        },
        f"{arena}/start": {
            "post": {
                "summary": "Start the arena (operator): its entrants now are its roster, and "
                "its matches begin",
                "security": _OPERATOR,
                "parameters": [_ARENA],
                "responses": _as_operator(
                    {
                        "200": _json("running", _ref("ArenaAnswer")),
                        "404": no_arena,
                        "409": _error(
                            "not open (running or over), or too few entrants to fill a table",
                            "not_open",
                            "too_few_entrants",
                        ),
                        "503": busy,
                    }
                ),
            }
        },
        f"{arena}/stream": {
            "get": {
                "summary": "What happens in the arena, standings after every result; it ends "
                "after the `finished` line",
                "parameters": [_ARENA, _after("a line id of the arena"), _LAST_EVENT_ID, _FORMAT],
                "responses": {
                    "200": _lines(
                        "one `ArenaLine` a line, from the arena's first (or after `after`; "
                        "the latest 1,000 are kept: a stream from before them begins with a "
                        "`gap` line, then the oldest kept); as server-sent events its `id` "
                        "is the line's and `event` its type",
                        "ArenaLine",
                    ),
                    "400": bad_resume,
                    "404": no_arena,
                    "422": bad_format,
                    "429": _limited("streams_per_client", 1.0),
                    "503": _UNAVAILABLE,
                },
            }
        },
    }


def _union(description: str, union: Any) -> dict[str, Any]:
    """A component for a tagged union of structs: one of them, by ``type``."""
    return {
        "description": description,
        "oneOf": [_ref(t.__name__) for t in get_args(union)],
        "discriminator": {"propertyName": "type"},
    }


def _schemas() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(_STRUCTS, ref_template=_REF)
    components["Line"] = {
        "description": "A line of a seat's or the public stream",
        "oneOf": [_ref(n) for n in ("Snapshot", "EventLine", "TurnLine", "Gap")],
        "discriminator": {"propertyName": "type"},
    }
    essential = [_ref(t.__name__) for t in (TurnTimedOut, RoundEnded, MatchEnded)]
    components["SocketFrame"] = {
        "description": "A frame the seat's socket sends: a line of the seat's stream, or the "
        "answer to a frame sent up (its last, when its credential ends, is the stream's "
        "closing line, `closed`)",
        "oneOf": [
            _ref(n)
            for n in (
                "SocketLine",
                "MoveAccepted",
                "MoveRejected",
                "MoveLimited",
                "MoveTimedOut",
                "SocketError",
            )
        ],
        "discriminator": {"propertyName": "type"},
    }
    components["MinimalEventLine"] = {
        "description": "An event line of a stream opened with events=minimal",
        "allOf": [
            _ref("EventLine"),
            {"properties": {"event": {"oneOf": essential}}},
        ],
    }
    components["MinimalLine"] = {
        "description": "A line of a stream opened with events=minimal",
        "oneOf": [_ref(n) for n in ("Snapshot", "MinimalEventLine", "TurnLine", "Gap")],
    }
    components["Move"] = _union(
        "What a seat posts: an entry of its view.legal as it is, or resign / abort; seat optional",
        MoveBody,
    )
    components["MatchList"] = {
        "description": "200 to GET /matches: lobby records (open) or summaries (live, finished)",
        "type": "object",
        "required": ["status", "matches", "next"],
        "properties": {
            "status": {"enum": ["open", "live", "finished"]},
            "matches": {"type": "array", "items": {"anyOf": [_ref("MatchInfo"), _ref("Summary")]}},
            "next": {
                "description": "the cursor of the page after; null when there is none",
                "type": ["string", "null"],
            },
        },
    }
    components["Readiness"] = {
        "description": "200 or 503 to GET /readyz: ready, or why not",
        "type": "object",
        "required": ["ready"],
        "properties": {"ready": {"type": "boolean"}, "reason": {"type": "string"}},
    }
    components["AccountLine"] = _union(
        "A line of the account stream: the first of a fresh stream is `state`, the first of "
        "one resumed from before what the feed still holds is `gap` (then `state`)",
        AccountLine,
    )
    components["ArenaLine"] = _union("A line of an arena's stream", ArenaLine)
    # what the structs leave a plain string, the gateway checks against a fixed list
    for component, field, values in (
        ("SeekBody", "kind", list(KINDS)),
        ("SeekInfo", "kind", list(KINDS)),
        ("ArenaBody", "format", list(FORMATS)),
    ):
        components[component]["properties"][field]["enum"] = values
    return components


def _headers() -> dict[str, Any]:
    def header(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "required": True,
            "schema": {"type": "integer", "minimum": 0},
        }

    return {
        PROTOCOL_HEADER: {
            "description": "the version of the protocol the answer is in (docs/protocol.md, "
            "Versions)",
            "required": True,
            "schema": {"type": "integer", "enum": list(SPOKEN)},
        },
        "Retry-After": header("whole seconds until trying again can succeed"),
        "RateLimit-Limit": header("requests allowed at once (the burst)"),
        "RateLimit-Remaining": header("requests left now"),
        "RateLimit-Reset": header("seconds until the allowance is whole again"),
    }


def _bearer(description: str, prefix: str | None = None) -> dict[str, Any]:
    scheme = {"type": "http", "scheme": "bearer", "description": description}
    if prefix is not None:
        scheme["bearerFormat"] = f"{prefix}..."
    return scheme


_GUARDED = ("host_not_allowed", "origin_not_allowed")
_GUARD = (
    "a Host this gateway does not answer for, or an Origin not its own nor allowed "
    "(services/gateway/origins.py)"
)


def _guarded(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation that changes something may also be refused 403 for its Host or its
    Origin, before anything else is looked at."""
    for operations in paths.values():
        for method, operation in operations.items():
            if method.upper() not in STATE_CHANGING:
                continue
            answers = operation["responses"]
            own = answers.get("403")
            if own is None:
                answers["403"] = _error(_GUARD, *_GUARDED)
                continue
            schema = own["content"]["application/json"]["schema"]
            answers["403"] = {
                **own,
                "description": f"{own['description']}; or {_listed(_GUARD, _GUARDED)}",
                "content": {
                    "application/json": {
                        **own["content"]["application/json"],
                        "schema": {"anyOf": [schema, _coded(*_GUARDED)]},
                    }
                },
            }
    return paths


_ASKED = {
    "name": PROTOCOL_HEADER,
    "in": "header",
    "description": "the version of the protocol the client speaks; without it, "
    f"{PROTOCOL}. Any other than those the gateway speaks is refused (400 "
    "`unsupported_protocol`), streams included, before anything is sent",
    "schema": {"type": "integer", "enum": list(SPOKEN)},
}
_UNSUPPORTED = f"a {PROTOCOL_HEADER} header naming a version this gateway does not speak"
_STATED = {PROTOCOL_HEADER: {"$ref": f"#/components/headers/{PROTOCOL_HEADER}"}}


def _versioned(paths: dict[str, Any]) -> dict[str, Any]:
    """Every operation takes the version its client speaks in a header, may be refused 400
    for it before anything else is looked at, and states the version of each answer."""
    for operations in paths.values():
        for operation in operations.values():
            operation["parameters"] = [*operation.get("parameters", []), _ASKED]
            answers = operation["responses"]
            own = answers.get("400")
            if own is None:
                answers["400"] = _json(
                    f"{_UNSUPPORTED} (`error`: unsupported_protocol)", _ref("ProtocolError")
                )
            else:
                schema = own["content"]["application/json"]["schema"]
                answers["400"] = {
                    **own,
                    "description": f"{own['description']}; or {_UNSUPPORTED} (`ProtocolError`)",
                    "content": {
                        "application/json": {
                            **own["content"]["application/json"],
                            "schema": {"anyOf": [schema, _ref("ProtocolError")]},
                        }
                    },
                }
            for status, answer in answers.items():
                answers[status] = {**answer, "headers": {**answer.get("headers", {}), **_STATED}}
            operation["responses"] = dict(sorted(answers.items()))
    return paths


@cache
def openapi() -> dict[str, Any]:
    """The whole document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Domino gateway",
            "version": str(PROTOCOL),
            "description": "Play hosted domino matches from any language: see docs/protocol.md "
            "(matches, seats, streams, moves) and docs/accounts.md (accounts, challenges, "
            "seeks, arenas). This is version "
            f"{PROTOCOL} of the protocol: a client names the version it speaks in the "
            f"`{PROTOCOL_HEADER}` header, and every answer states its own there.",
        },
        "paths": _versioned(_guarded({**_paths(), **_player_paths()})),
        "components": {
            "schemas": _schemas(),
            "headers": _headers(),
            "securitySchemes": {
                "seatToken": _bearer(
                    "a seat token, from POST /matches/{match_id}/join: it opens that one seat"
                ),
                "accountToken": _bearer(
                    "an account token, from POST /accounts: the account's calls, and every "
                    "seat the account holds",
                    "dab_",
                ),
                "ownerToken": _bearer(
                    "the owner_token POST /matches returns to a creator without an account: "
                    "it cancels that match while it waits for players",
                    "own_",
                ),
                "operatorToken": _bearer(
                    "the service's DOMINO_OPERATOR_TOKEN: bans, tokens, arenas, and "
                    "cancelling any match"
                ),
            },
        },
    }
