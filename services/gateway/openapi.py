"""The gateway's OpenAPI 3.1 document, generated: its paths from the operations each resource
module declares (services/gateway/resources/, the same declarations create_app builds the routes
from), every schema from the structs the gateway encodes and decodes (msgspec:
services/gateway/protocol.py and lobby_protocol.py), so the document cannot drift from the
routes or the wire. Making it needs no Redis and no running gateway.

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

from collections.abc import Iterable
from functools import cache
from typing import Any, get_args

import msgspec

from events.model import MatchEnded, RoundEnded, TurnTimedOut
from services.gateway.declare import Operation
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
    PROTOCOL,
    PROTOCOL_HEADER,
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
from services.gateway.resources import OPERATIONS, channel
from services.gateway.spec import REF, answer, coded, error, listed, ref
from services.lobby.arena import FORMATS
from services.lobby.seeks import KINDS
from services.projections.projector import Summary

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
    *channel.STRUCTS,  # the account channel
]


def _paths(operations: Iterable[Operation]) -> dict[str, Any]:
    """The document's paths: each operation under its path and method, as it declares itself."""
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = op.document()
    return paths


def _union(description: str, union: Any) -> dict[str, Any]:
    """A component for a tagged union of structs: one of them, by ``type``."""
    return {
        "description": description,
        "oneOf": [ref(t.__name__) for t in get_args(union)],
        "discriminator": {"propertyName": "type"},
    }


def _schemas() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(_STRUCTS, ref_template=REF)
    components["Line"] = {
        "description": "A line of a seat's or the public stream",
        "oneOf": [ref(n) for n in ("Snapshot", "EventLine", "TurnLine", "Gap")],
        "discriminator": {"propertyName": "type"},
    }
    essential = [ref(t.__name__) for t in (TurnTimedOut, RoundEnded, MatchEnded)]
    components["SocketFrame"] = {
        "description": "A frame the seat's socket sends: a line of the seat's stream, or the "
        "answer to a frame sent up (its last, when its credential ends, is the stream's "
        "closing line, `closed`)",
        "oneOf": [
            ref(n)
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
    components |= channel.components()
    components["MinimalEventLine"] = {
        "description": "An event line of a stream opened with events=minimal",
        "allOf": [
            ref("EventLine"),
            {"properties": {"event": {"oneOf": essential}}},
        ],
    }
    components["MinimalLine"] = {
        "description": "A line of a stream opened with events=minimal",
        "oneOf": [ref(n) for n in ("Snapshot", "MinimalEventLine", "TurnLine", "Gap")],
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
            "matches": {"type": "array", "items": {"anyOf": [ref("MatchInfo"), ref("Summary")]}},
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
                answers["403"] = error(_GUARD, *_GUARDED)
                continue
            schema = own["content"]["application/json"]["schema"]
            answers["403"] = {
                **own,
                "description": f"{own['description']}; or {listed(_GUARD, _GUARDED)}",
                "content": {
                    "application/json": {
                        **own["content"]["application/json"],
                        "schema": {"anyOf": [schema, coded(*_GUARDED)]},
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
                answers["400"] = answer(
                    f"{_UNSUPPORTED} (`error`: unsupported_protocol)", ref("ProtocolError")
                )
            else:
                schema = own["content"]["application/json"]["schema"]
                answers["400"] = {
                    **own,
                    "description": f"{own['description']}; or {_UNSUPPORTED} (`ProtocolError`)",
                    "content": {
                        "application/json": {
                            **own["content"]["application/json"],
                            "schema": {"anyOf": [schema, ref("ProtocolError")]},
                        }
                    },
                }
            for status, given in answers.items():
                answers[status] = {**given, "headers": {**given.get("headers", {}), **_STATED}}
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
        "paths": _versioned(_guarded(_paths(OPERATIONS))),
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
