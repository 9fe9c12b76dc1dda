"""The gateway's OpenAPI 3.1 document: paths written here, schemas generated from the structs
the gateway encodes and decodes (msgspec), so the document cannot drift from the wire."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from services.gateway.protocol import (
    API,
    CreateBody,
    EventLine,
    JoinBody,
    MoveBody,
    Snapshot,
    TurnLine,
)

_REF = "#/components/schemas/{name}"


def _error(description: str, example: dict[str, Any] | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"schema": {"$ref": _REF.format(name="Error")}}
    if example:
        content["example"] = example
    return {"description": description, "content": {"application/json": content}}


def _ok(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema or {"type": "object"}}},
    }


_TOKEN: list[dict[str, list[str]]] = [{"seatToken": []}]
_MATCH = {"name": "match_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SEAT = {"name": "seat", "in": "path", "required": True, "schema": {"type": "integer"}}
_AFTER = [
    {
        "name": "after",
        "in": "query",
        "description": "resume: send the events after this id (a match version)",
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
]
_STREAM = {
    "description": "one JSON line per snapshot, event or turn; a blank line is a keep-alive",
    "content": {
        "application/x-ndjson": {"schema": {"$ref": _REF.format(name="Line")}},
        "text/event-stream": {"schema": {"type": "string"}},
    },
}
_LIMITED = _error(
    "over a limit (Retry-After says when to retry)",
    {"error": "rate_limited", "limit": "moves_per_second", "retry_after": 0.05, "message": "..."},
)


@cache
def openapi() -> dict[str, Any]:
    """The whole document."""
    _, components = msgspec.json.schema_components(
        [Snapshot, EventLine, TurnLine, MoveBody, CreateBody, JoinBody], ref_template=_REF
    )
    components["Line"] = {
        "oneOf": [{"$ref": _REF.format(name=n)} for n in ("Snapshot", "EventLine", "TurnLine")],
        "discriminator": {"propertyName": "type"},
    }
    components["Move"] = {
        "oneOf": [{"$ref": _REF.format(name=n)} for n in ("PlayBody", "DrawBody", "PassBody")],
        "discriminator": {"propertyName": "type"},
    }
    components["Error"] = {
        "type": "object",
        "required": ["error", "message"],
        "properties": {
            "error": {"type": "string", "description": "a stable code, e.g. rejected"},
            "message": {"type": "string"},
            "reason": {"type": "string", "description": "the engine's reason (rejections)"},
            "rule": {"type": "string", "description": "the rule broken, e.g. C4 (rejections)"},
            "limit": {"type": "string", "description": "the limit hit (429, 413)"},
            "retry_after": {"type": "number", "description": "seconds (429)"},
        },
    }
    m = f"{API}/matches/{{match_id}}"
    paths: dict[str, Any] = {
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
                "responses": {"200": _ok("the matches")},
            },
            "post": {
                "summary": "Create a match: a house bot pool per seat, or null for an open seat",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": _REF.format(name="CreateBody")}}
                    },
                },
                "responses": {
                    "201": _ok("created; it starts when every open seat is taken"),
                    "400": _error("not JSON"),
                    "413": _error("body too large"),
                    "422": _error("invalid rules or seats (the engine's reason)"),
                    "429": _LIMITED,
                },
            },
        },
        m: {
            "get": {
                "summary": "One match: its seats, status and version",
                "parameters": [_MATCH],
                "responses": {"200": _ok("the match"), "404": _error("no such match")},
            }
        },
        f"{m}/join": {
            "post": {
                "summary": "Take an open seat; the answer holds the seat token, shown only once",
                "parameters": [_MATCH],
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"$ref": _REF.format(name="JoinBody")}}
                    }
                },
                "responses": {
                    "201": _ok("seated: match_id, seat, token, links"),
                    "404": _error("no such match or seat"),
                    "409": _error("seat taken, a house bot's, or no seat left"),
                    "429": _LIMITED,
                },
            }
        },
        f"{API}/seat": {
            "get": {
                "summary": "Which match and seat a token plays",
                "security": _TOKEN,
                "responses": {"200": _ok("match_id, seat, links"), "401": _error("bad token")},
            }
        },
        f"{m}/seats/{{seat}}/stream": {
            "get": {
                "summary": "The seat's stream: a snapshot, then its events and turns (C8)",
                "security": _TOKEN,
                "parameters": [_MATCH, _SEAT, *_AFTER],
                "responses": {
                    "200": _STREAM,
                    "400": _error("bad resume point"),
                    "401": _error("missing or unknown token"),
                    "403": _error("token for another match or seat"),
                    "429": _LIMITED,
                },
            }
        },
        f"{m}/seats/{{seat}}/moves": {
            "post": {
                "summary": "Play, draw or pass; the answer says accepted or why not",
                "security": _TOKEN,
                "parameters": [
                    _MATCH,
                    _SEAT,
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "description": "1-64 of A-Z a-z 0-9 . _ : - ; a retry with the same "
                        "key is applied once",
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": _REF.format(name="Move")}}},
                },
                "responses": {
                    "200": _ok(
                        "accepted (replayed: true when the key was applied before)",
                        {
                            "type": "object",
                            "properties": {
                                "accepted": {"const": True},
                                "version": {"type": "integer"},
                                "replayed": {"type": "boolean"},
                            },
                        },
                    ),
                    "400": _error("not JSON, or a missing or bad Idempotency-Key"),
                    "401": _error("missing or unknown token"),
                    "403": _error("token for another match or seat"),
                    "409": _error(
                        "rejected by the referee, or the key was used for another move",
                        {
                            "error": "rejected",
                            "reason": "not_your_turn",
                            "rule": "C4",
                            "message": "it is seat 0's turn, not seat 1's",
                        },
                    ),
                    "413": _error("body too large"),
                    "422": _error("not a move: unknown type, wrong field types"),
                    "429": _LIMITED,
                    "504": _error("no answer in time: send it again with the same key"),
                },
            }
        },
        f"{m}/stream": {
            "get": {
                "summary": "The public stream: the public view and events (hands at round end)",
                "parameters": [_MATCH, *_AFTER],
                "responses": {"200": _STREAM, "404": _error("no such match"), "429": _LIMITED},
            }
        },
        f"{API}/openapi.json": {
            "get": {"summary": "This document", "responses": {"200": _ok("OpenAPI 3.1")}}
        },
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": _ok("ok")}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Domino gateway",
            "version": "1",
            "description": "Play hosted domino matches from any language: see docs/protocol.md.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"seatToken": {"type": "http", "scheme": "bearer"}},
        },
    }
