"""The pieces the gateway's operations are declared with (services/gateway/declare.py): what
an operation may answer, by status, with the ``error`` codes each error may carry and the
limits each 429 may name; its parameters; who may call it. The OpenAPI document
(services/gateway/openapi.py) is made of them, so a client can switch on the codes and a test
can hold the gateway to them.
"""

from __future__ import annotations

from typing import Any

from services.redis.paging import CURSOR_CHARS

REF = "#/components/schemas/{name}"
"""Where a component schema is: ``ref`` points there."""


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": REF.format(name=name)}


def answer(description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An answer of JSON ``schema``, described (``example`` and ``headers`` may be given)."""
    content: dict[str, Any] = {"schema": schema}
    if "example" in extra:
        content["example"] = extra.pop("example")
    return {"description": description, "content": {"application/json": content}, **extra}


def coded(*codes: str) -> dict[str, Any]:
    """An ``Error`` whose ``error`` is one of ``codes``."""
    return {"allOf": [ref("Error"), {"properties": {"error": {"enum": list(codes)}}}]}


def listed(description: str, codes: tuple[str, ...]) -> str:
    """``description``, naming the ``error`` codes it may carry."""
    return description + (f" (`error`: {', '.join(codes)})" if codes else "")


def error(description: str, *codes: str, **extra: Any) -> dict[str, Any]:
    """An error answer: an ``Error`` whose ``error`` is one of ``codes``."""
    return answer(listed(description, codes), coded(*codes), **extra)


def refused(description: str, *codes: str, **extra: Any) -> dict[str, Any]:
    """An error answer: the engine's refusal (``RejectedError``, with its reason and rule), or
    an ``Error`` whose ``error`` is one of ``codes``."""
    schema = {"anyOf": [ref("RejectedError"), coded(*codes)]} if codes else ref("RejectedError")
    return answer(listed(description, ("rejected", *codes)), schema, **extra)


RATE_HEADERS = {
    name: {"$ref": f"#/components/headers/{name}"}
    for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
}


def limited(limit: str, retry_after: float, *also: str) -> dict[str, Any]:
    """429 over ``limit`` (or one of ``also``): the body names it; Retry-After and RateLimit-*
    headers say when. The example is ``limit``'s."""
    names = [limit, *also]
    listed = ", ".join(f"`{n}`" for n in names)
    return answer(
        f"over a limit ({listed}): retry after `Retry-After` seconds",
        {"allOf": [ref("LimitError"), {"properties": {"limit": {"enum": names}}}]},
        headers={"Retry-After": {"$ref": "#/components/headers/Retry-After"}, **RATE_HEADERS},
        example={
            "error": "rate_limited",
            "limit": limit,
            "retry_after": retry_after,
            "message": f"{limit}: retry in {retry_after} s",
        },
    )


UNAVAILABLE = error(
    "Redis is unreachable (`unavailable`), or what is stored of the match was written by a "
    "newer release than this gateway's (`newer_schema`, during a rolling deploy): retry",
    "unavailable",
    "newer_schema",
)
BULK = limited("bulk_reads", 0.5)
"""A bulk read (a replay, a list, a fold) that found no place: retry at its turn."""
CORRUPT = error(
    "what is stored of the match (its log, its lobby record) cannot be read: an operator "
    "must repair it",
    "corrupt_data",
)
TOO_LARGE = answer("the body is over `max` bytes (`error`: body_too_large)", ref("TooLargeError"))
NOT_JSON = error(
    "a body declared as a form or plain text: send JSON as application/json",
    "unsupported_media_type",
)
BAD_BODY = ("bad_json", "bad_request")  # not JSON; a Content-Length that is no number

SEAT_AUTH = {
    "401": error("no token, or an unknown one", "unauthorized"),
    "403": error(
        "a token for another match or seat, or an account that does not hold it or is banned",
        "wrong_match",
        "wrong_seat",
        "not_your_seat",
        "account_banned",
    ),
    "404": error(
        "no such match, or a seat that is no whole number (no such path)",
        "no_match",
        "not_found",
    ),
}
"""What a request for a seat (its stream, socket or moves) may be refused with for its token."""
SEAT_OPENING = {
    "400": error("a resume point that is no id of the match", "bad_resume"),
    **SEAT_AUTH,
}
"""What opening a seat's stream or socket may be refused with before its places are taken."""
SEAT_PLACES = {
    "429": limited("streams_per_token", 1.0, "player_streams_per_client", "auth_failures"),
    "503": UNAVAILABLE,
}
"""A seat's stream or socket over its places, or its match's log unreadable."""

# who may call: Authorization: Bearer <token> of one of these schemes
TOKEN: list[dict[str, list[str]]] = [{"seatToken": []}]
SEAT: list[dict[str, list[str]]] = [{"seatToken": []}, {"accountToken": []}]
ACCOUNT: list[dict[str, list[str]]] = [{"accountToken": []}]
MAYBE_ACCOUNT: list[dict[str, list[str]]] = [{}, {"accountToken": []}]
OPERATOR: list[dict[str, list[str]]] = [{"operatorToken": []}]
NO_ACCOUNT = error(
    "no account token (dab_...), or an unknown, rotated or revoked one", "unauthorized"
)
BANNED = error("the account is banned", "account_banned")
NO_OPERATOR = error("no token", "unauthorized")
NOT_OPERATOR = error("not the operator's token", "not_operator")
GUESSING = limited("auth_failures", 5.0)  # too many unknown tokens from this address
OPERATOR_GUESSING = limited("operator_failures", 20.0)  # too many wrong operator tokens


def path_param(name: str, description: str) -> dict[str, Any]:
    """A string path parameter, described."""
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def page_params(most: int, limit: str, first: str) -> list[dict[str, Any]]:
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


FAMILY_FILTER = {
    "name": "family",
    "in": "query",
    "description": "express (the default for ratings) or straight",
    "schema": {"enum": ["express", "straight"]},
}
MATCH = {"name": "match_id", "in": "path", "required": True, "schema": {"type": "string"}}
SEAT_NO = {"name": "seat", "in": "path", "required": True, "schema": {"type": "integer"}}
NAME = path_param(
    "name", "an account's name (or one too like it: names are unique by how they look)"
)
CHALLENGE = path_param("challenge_id", "c- and 12 hex digits")
SEEK = path_param("seek_id", "s- and 12 hex digits")
ARENA = path_param("arena_id", "a- and hex digits")


def after(what: str) -> dict[str, Any]:
    """The ``after`` query parameter of a stream: resume after an id of ``what``."""
    return {
        "name": "after",
        "in": "query",
        "description": f"resume: send the lines after this id ({what})",
        "schema": {"type": "integer", "minimum": 0},
    }


LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "description": "resume, as `after` (the query parameter wins when both are given)",
    "schema": {"type": "string"},
}
FORMAT = {
    "name": "format",
    "in": "query",
    "description": "ndjson (default) or sse; `Accept: text/event-stream` also picks sse",
    "schema": {"enum": ["ndjson", "sse"]},
}
EVENTS = {
    "name": "events",
    "in": "query",
    "description": "all (default), or minimal: of the events only the receiver's own "
    "`turn_timed_out`, `round_ended` and `match_ended` (lines as `MinimalLine`)",
    "schema": {"enum": ["all", "minimal"]},
}
STREAM_PARAMS = [
    after("a match version, no snapshot"),
    LAST_EVENT_ID,
    FORMAT,
    EVENTS,
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
UNTIL = {
    "name": "until",
    "in": "query",
    "description": "turn: the stream ends after its first turn line (a long poll for the "
    "seat's move; the match's end also ends it)",
    "schema": {"enum": ["turn"]},
}


def lines(description: str, component: str) -> dict[str, Any]:
    """200 with a stream: one ``component`` a line, as NDJSON or server-sent events."""
    return {
        "description": f"{description}; a blank line (an SSE comment) is a keep-alive",
        "content": {
            "application/x-ndjson": {"schema": ref(component)},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    }


def stream(what: str) -> dict[str, Any]:
    """200 with a seat's or the public stream: its lines, as NDJSON or server-sent events."""
    return lines(
        f"{what}: one JSON object a line (`Line`; with events=minimal, `MinimalLine`). As "
        "server-sent events each line is an event whose `id` is the line's id, `event` its "
        "type and `data` the object. A resume from events the log no longer holds begins "
        "with a `gap` line, then the snapshot a fresh stream begins with",
        "Line",
    )


def as_account(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers of a call made with an account token: ``answers`` by status, over the
    account's own (401, 403 banned, 429 too many unknown tokens, 503)."""
    own = {"401": NO_ACCOUNT, "403": BANNED, "429": GUESSING, "503": UNAVAILABLE}
    return dict(sorted({**own, **answers}.items()))


def as_operator(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers of an operator's call: ``answers`` by status, over 401, 403, 429 (too
    many wrong operator tokens from the address) and 503."""
    own = {
        "401": NO_OPERATOR,
        "403": NOT_OPERATOR,
        "429": OPERATOR_GUESSING,
        "503": UNAVAILABLE,
    }
    return dict(sorted({**own, **answers}.items()))


BODY_ERRORS = {  # reading a JSON body; its 422 is each path's own
    "400": error("not JSON", *BAD_BODY),
    "413": TOO_LARGE,
    "415": NOT_JSON,
}
