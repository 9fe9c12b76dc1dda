"""The gateway's OpenAPI 3.1 document: paths written here, every schema generated from the
structs the gateway encodes and decodes (msgspec, services/gateway/protocol.py), so the
document cannot drift from the wire; tests/gateway/test_protocol_fixes.py checks real answers
against it, body and headers."""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

import msgspec

from events.model import MatchEnded, RoundEnded, TurnTimedOut
from services.gateway.protocol import (
    API,
    CreateBody,
    Created,
    Error,
    EventLine,
    Health,
    JoinBody,
    Joined,
    LimitError,
    MatchDetail,
    MatchInfo,
    MoveAnswer,
    MoveBody,
    RejectedError,
    SeatOf,
    Snapshot,
    TooLargeError,
    TurnLine,
)
from services.projections.projector import Summary

_REF = "#/components/schemas/{name}"
_STRUCTS: list[Any] = [
    Snapshot,
    EventLine,
    TurnLine,
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
    Health,
    Error,
    RejectedError,
    LimitError,
    TooLargeError,
    TurnTimedOut,
    RoundEnded,
    MatchEnded,
]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(name=name)}


def _json(description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"schema": schema}
    if "example" in extra:
        content["example"] = extra.pop("example")
    return {"description": description, "content": {"application/json": content}, **extra}


def _error(description: str, *codes: str, schema: str = "Error") -> dict[str, Any]:
    """An error answer; ``codes`` are the ``error`` codes it may carry."""
    listed = f" (`error`: {', '.join(codes)})" if codes else ""
    return _json(description + listed, _ref(schema))


_RATE_HEADERS = {
    name: {"$ref": f"#/components/headers/{name}"}
    for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
}


def _limited(limit: str, retry_after: float) -> dict[str, Any]:
    """429 over ``limit``: the body names it; Retry-After and RateLimit-* headers say when."""
    return _json(
        f"over the `{limit}` limit: retry after `Retry-After` seconds",
        _ref("LimitError"),
        headers={"Retry-After": {"$ref": "#/components/headers/Retry-After"}, **_RATE_HEADERS},
        example={
            "error": "rate_limited",
            "limit": limit,
            "retry_after": retry_after,
            "message": f"{limit}: retry in {retry_after} s",
        },
    )


_UNAVAILABLE = _error("Redis is unreachable: retry", "unavailable")
_TOO_LARGE = _error("the body is over `max` bytes", "body_too_large", schema="TooLargeError")
_NOT_JSON = _error(
    "a body declared as a form or plain text: send JSON as application/json",
    "unsupported_media_type",
)
_TOKEN: list[dict[str, list[str]]] = [{"seatToken": []}]
_MATCH = {"name": "match_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SEAT = {"name": "seat", "in": "path", "required": True, "schema": {"type": "integer"}}
_STREAM_PARAMS = [
    {
        "name": "after",
        "in": "query",
        "description": "resume: send the events after this id (a match version), no snapshot",
        "schema": {"type": "integer", "minimum": 0},
    },
    {
        "name": "Last-Event-ID",
        "in": "header",
        "description": "resume, as `after` (the query parameter wins when both are given)",
        "schema": {"type": "string"},
    },
    {
        "name": "format",
        "in": "query",
        "description": "ndjson (default) or sse; `Accept: text/event-stream` also picks sse",
        "schema": {"enum": ["ndjson", "sse"]},
    },
    {
        "name": "events",
        "in": "query",
        "description": "all (default), or minimal: of the events only the receiver's own "
        "`turn_timed_out`, `round_ended` and `match_ended` (lines as `MinimalLine`)",
        "schema": {"enum": ["all", "minimal"]},
    },
]
_UNTIL = {
    "name": "until",
    "in": "query",
    "description": "turn: the stream ends after its first turn line (a long poll for the "
    "seat's move; the match's end also ends it)",
    "schema": {"enum": ["turn"]},
}


def _stream(what: str) -> dict[str, Any]:
    return {
        "description": f"{what}: one JSON object a line (`Line`; with events=minimal, "
        "`MinimalLine`); a blank line is a keep-alive. As server-sent events each line is "
        "an event whose `id` is the line's id, `event` its type and `data` the object.",
        "content": {
            "application/x-ndjson": {"schema": _ref("Line")},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }


def _paths() -> dict[str, Any]:
    m = f"{API}/matches/{{match_id}}"
    return {
        f"{API}/matches": {
            "get": {
                "summary": "List matches: open (waiting for players), live or finished",
                "parameters": [
                    {
                        "name": "status",
                        "in": "query",
                        "schema": {"enum": ["open", "live", "finished"], "default": "open"},
                    }
                ],
                "responses": {
                    "200": _json(
                        "the matches: lobby records (open), or summaries (live, finished)",
                        _ref("MatchList"),
                    ),
                    "422": _error("an unknown status", "invalid_query"),
                    "503": _UNAVAILABLE,
                },
            },
            "post": {
                "summary": "Create a match: a house bot pool per seat, or null for an open seat",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("CreateBody")}},
                },
                "responses": {
                    "201": _json(
                        "created; it starts when every open seat is taken", _ref("Created")
                    ),
                    "400": _error("not JSON", "bad_json"),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _json(
                        "JSON of the wrong shape (`Error`, `invalid_match`), or rules the "
                        "engine will not play (`RejectedError`: `bad_rules`, `bad_players`, "
                        "with the rule, e.g. C3 for the player count)",
                        {"anyOf": [_ref("RejectedError"), _ref("Error")]},
                    ),
                    "429": _limited("lobby_per_second", 0.2),
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
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{m}/join": {
            "post": {
                "summary": "Take an open seat; the answer holds the seat token, shown only once",
                "parameters": [_MATCH],
                "requestBody": {"content": {"application/json": {"schema": _ref("JoinBody")}}},
                "responses": {
                    "201": _json("seated", _ref("Joined")),
                    "400": _error("not JSON", "bad_json"),
                    "404": _error("no such match or seat", "no_match", "no_such_seat"),
                    "409": _error(
                        "the seat is not to be had", "seat_taken", "seat_is_house_bot", "match_full"
                    ),
                    "413": _TOO_LARGE,
                    "415": _NOT_JSON,
                    "422": _error("JSON of the wrong shape, or a bad name", "invalid_join"),
                    "429": _limited("lobby_per_second", 0.2),
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
                },
            }
        },
        f"{m}/seats/{{seat}}/stream": {
            "get": {
                "summary": "The seat's stream: a snapshot (and a turn line on its move), then "
                "its events and turns, as the seat may see them (C8)",
                "security": _TOKEN,
                "parameters": [_MATCH, _SEAT, *_STREAM_PARAMS, _UNTIL],
                "responses": {
                    "200": _stream("the seat's lines"),
                    "400": _error("a resume point that is no id of the match", "bad_resume"),
                    "401": _error("no token, or an unknown one", "unauthorized"),
                    "403": _error("a token for another match or seat", "wrong_match", "wrong_seat"),
                    "404": _error("no such match", "no_match"),
                    "422": _error("an unknown format, events or until", "invalid_query"),
                    "429": _limited("streams_per_token", 1.0),
                    "503": _UNAVAILABLE,
                },
            }
        },
        f"{m}/seats/{{seat}}/moves": {
            "post": {
                "summary": "Play, draw or pass: the answer says accepted, or why not",
                "security": _TOKEN,
                "parameters": [
                    _MATCH,
                    _SEAT,
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "description": "1-64 of A-Z a-z 0-9 . _ : - ; the same key is applied "
                        "once, and a post racing another with its key is that one's replay",
                        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("Move")}},
                },
                "responses": {
                    "200": _json(
                        "applied (`replayed`: an earlier post with this key applied it)",
                        _ref("MoveAnswer"),
                        headers=_RATE_HEADERS,
                    ),
                    "400": _error(
                        "not JSON, or a missing or bad Idempotency-Key",
                        "bad_json",
                        "missing_idempotency_key",
                        "bad_idempotency_key",
                    ),
                    "401": _error("no token, or an unknown one", "unauthorized"),
                    "403": _error("a token for another match or seat", "wrong_match", "wrong_seat"),
                    "409": _json(
                        "refused by the referee (`RejectedError`: the engine's reason and "
                        "rule; the log is unchanged), or the key was applied to another move "
                        "(`Error`: idempotency_key_reused)",
                        {"anyOf": [_ref("RejectedError"), _ref("Error")]},
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
                    "429": _limited("moves_per_second", 0.05),
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
                    "422": _error("an unknown format or events", "invalid_query"),
                    "429": _limited("streams_per_client", 1.0),
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
    }


def _schemas() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(_STRUCTS, ref_template=_REF)
    components["Line"] = {
        "description": "A line of a seat's or the public stream",
        "oneOf": [_ref(n) for n in ("Snapshot", "EventLine", "TurnLine")],
        "discriminator": {"propertyName": "type"},
    }
    essential = [_ref(t.__name__) for t in (TurnTimedOut, RoundEnded, MatchEnded)]
    components["MinimalEventLine"] = {
        "description": "An event line of a stream opened with events=minimal",
        "allOf": [
            _ref("EventLine"),
            {"properties": {"event": {"oneOf": essential}}},
        ],
    }
    components["MinimalLine"] = {
        "description": "A line of a stream opened with events=minimal",
        "oneOf": [_ref(n) for n in ("Snapshot", "MinimalEventLine", "TurnLine")],
    }
    components["Move"] = {
        "description": "What a seat posts: an entry of its view.legal as it is, seat optional",
        "oneOf": [_ref(t.__name__) for t in get_args(MoveBody)],
        "discriminator": {"propertyName": "type"},
    }
    components["MatchList"] = {
        "description": "200 to GET /matches: lobby records (open) or summaries (live, finished)",
        "type": "object",
        "required": ["status", "matches"],
        "properties": {
            "status": {"enum": ["open", "live", "finished"]},
            "matches": {"type": "array", "items": {"anyOf": [_ref("MatchInfo"), _ref("Summary")]}},
        },
    }
    return components


def _headers() -> dict[str, Any]:
    def header(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "required": True,
            "schema": {"type": "integer", "minimum": 0},
        }

    return {
        "Retry-After": header("whole seconds until trying again can succeed"),
        "RateLimit-Limit": header("requests allowed at once (the burst)"),
        "RateLimit-Remaining": header("requests left now"),
        "RateLimit-Reset": header("seconds until the allowance is whole again"),
    }


@cache
def openapi() -> dict[str, Any]:
    """The whole document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Domino gateway",
            "version": "1",
            "description": "Play hosted domino matches from any language: see docs/protocol.md.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "headers": _headers(),
            "securitySchemes": {"seatToken": {"type": "http", "scheme": "bearer"}},
        },
    }
