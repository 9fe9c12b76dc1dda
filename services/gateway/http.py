"""A thin request/response layer over ASGI for the gateway's handlers.

Handlers take a :class:`Request` and return a :class:`Response`; any :class:`ApiError` or
:class:`LimitExceeded` they raise becomes a typed JSON error, and anything unexpected a JSON
500 with the details in the log only. Bodies are read with a size limit, so a huge body is
refused before it is buffered. :class:`App` takes the hottest routes (moves) before
Starlette's middleware and router. An Endpoint counts its answers in the gateway's metrics,
by route and status.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec
import structlog
from prometheus_client import Counter, Histogram
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import compile_path
from starlette.types import Message, Receive, Scope, Send

from events.codec import DecodeError
from events.errors import SchemaTooNew
from services.gateway.limits import LimitExceeded
from services.metrics import GATEWAY_RATE_LIMITED, GATEWAY_REQUEST_SECONDS, GATEWAY_REQUESTS

log = structlog.get_logger()
T = TypeVar("T")
_ENCODER = msgspec.json.Encoder()
JSON_TYPE = (b"content-type", b"application/json")


class ApiError(Exception):
    """Raised by a handler to answer with ``status`` and ``{"error": code, "message": ...}``
    (plus any extra fields)."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.extra = extra

    def response(self) -> Response:
        """The error as a JSON response."""
        return Response.json(
            {"error": self.code, "message": str(self), **self.extra}, status=self.status
        )


class Response:
    """A complete response: status, headers and a body."""

    __slots__ = ("body", "headers", "status")

    def __init__(
        self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or []

    @classmethod
    def json(
        cls, payload: Any, status: int = 200, headers: list[tuple[bytes, bytes]] | None = None
    ) -> Response:
        """A JSON response."""
        return cls(status, _ENCODER.encode(payload), [JSON_TYPE, *(headers or [])])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [*self.headers, (b"content-length", b"%d" % len(self.body))]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


class Request:
    """The parts of an HTTP request the handlers use."""

    __slots__ = ("_headers", "_query", "receive", "scope")

    def __init__(self, scope: Scope, receive: Receive) -> None:
        self.scope = scope
        self.receive = receive
        self._headers: dict[bytes, bytes] | None = None
        self._query: dict[str, str] | None = None

    @property
    def params(self) -> dict[str, Any]:
        """The path parameters."""
        params: dict[str, Any] = self.scope.get("path_params", {})
        return params

    def header(self, name: bytes) -> str | None:
        """A request header (lower-case name), or None."""
        if self._headers is None:
            self._headers = dict(self.scope["headers"])
        value = self._headers.get(name)
        return None if value is None else value.decode("latin-1")

    def query(self, name: str) -> str | None:
        """A query parameter, or None."""
        if self._query is None:
            query = self.scope.get("query_string", b"").decode("latin-1")
            self._query = dict(parse_qsl(query, keep_blank_values=True))  # ?a= is a, empty
        return self._query.get(name)

    @property
    def client(self) -> str:
        """The client's address."""
        client = self.scope.get("client")
        return str(client[0]) if client else "-"

    async def json_body(self, limit: int) -> bytes:
        """The body of a request that carries JSON: :meth:`body`, refused with 415 when it is
        declared as a form or plain text — the types a browser sends cross-site without asking
        first, so another site's page cannot create or join a match in a visitor's name."""
        raw = await self.body(limit)
        if _is_form_or_text(self.header(b"content-type")):
            raise ApiError(
                415,
                "unsupported_media_type",
                "send the body as JSON, with Content-Type: application/json",
            )
        return raw

    async def body(self, limit: int) -> bytes:
        """The whole body; raise ApiError 413 past ``limit`` bytes without reading it all."""
        declared = self.header(b"content-length")
        if declared is not None:
            # "²" is a digit to isdigit; and int() refuses (500) a number of 4301 digits
            if not (declared.isascii() and declared.isdigit()) or len(declared) > 18:
                raise ApiError(400, "bad_request", "Content-Length is not a number")
            if int(declared) > limit:
                raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ApiError(400, "bad_request", "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "body_too_large",
        f"request bodies are limited to {limit} bytes",
        limit="body_bytes",
        max=limit,
    )


class SeatConvertor(Convertor[int]):
    """A seat in a path (``{seat:seat}``): 1 to 4 digits, so a path of thousands of digits is
    no seat (404), not an int() that fails (500)."""

    regex = "[0-9]{1,4}"

    def convert(self, value: str) -> int:
        """The seat's number."""
        return int(value)

    def to_string(self, value: int) -> str:
        """The seat as a path spells it."""
        return str(value)


register_url_convertor("seat", SeatConvertor())

Handler = Callable[[Request], Awaitable[Callable[[Scope, Receive, Send], Awaitable[None]]]]


class Endpoint:
    """An ASGI app around one handler: errors become typed JSON answers, counted in the
    metrics once the endpoint knows its route (:meth:`measure`)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.__name__ = getattr(handler, "__name__", "endpoint")
        self.route = ""
        self._answers: dict[int, Counter] = {}  # status -> its counter, made on first use
        self._seconds: Histogram | None = None

    def measure(self, route: str) -> None:
        """Count this endpoint's answers, and time them, under ``route`` (its method and path
        template: never the path asked for, which would make a series per match)."""
        self.route = route
        self._seconds = GATEWAY_REQUEST_SECONDS.labels(route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        started = time.perf_counter()
        try:
            response = await self.handler(request)
        except ApiError as e:
            response = e.response()
        except LimitExceeded as e:
            response = limited(e)
        except SchemaTooNew as e:  # a newer release wrote it: a gateway of that release reads it
            log.error("stored data of a newer schema", path=scope.get("path"), error=str(e)[:300])
            response = ApiError(
                503,
                "newer_schema",
                f"{e}: a gateway of that release can answer this; this one cannot",
            ).response()
        except DecodeError as e:  # what Redis holds does not decode: a corrupt match log
            log.error("stored data unreadable", path=scope.get("path"), error=str(e)[:300])
            response = ApiError(
                409,
                "corrupt_data",
                "what is stored for this request cannot be read: an operator must repair it",
            ).response()
        except RedisError as e:
            log.warning("redis failed", path=scope.get("path"), error=repr(e))
            response = ApiError(503, "unavailable", "the store is unavailable; retry").response()
        except Exception as e:
            if isinstance(e, AttributeError | TypeError) and _in_redis_client(e):
                # redis-py lets a write on a connection Redis has just closed fail with the
                # transport's own error instead of ConnectionError (a node killed, a failover)
                log.warning("redis connection lost", path=scope.get("path"), error=repr(e))
                response = ApiError(
                    503, "unavailable", "the store is unavailable; retry"
                ).response()
            else:
                # no exc_info: a rendered traceback may show locals, and a token is one of them
                log.error(
                    "request failed",
                    path=scope.get("path"),
                    method=scope.get("method"),
                    error=repr(e),
                    trace="".join(traceback.format_tb(e.__traceback__)),
                )
                response = ApiError(500, "internal", "the gateway failed; try again").response()
        if self._seconds is not None:
            self._seconds.observe(time.perf_counter() - started)
            status = getattr(response, "status", 200)  # a stream starts with 200
            counter = self._answers.get(status)
            if counter is None:
                counter = self._answers[status] = GATEWAY_REQUESTS.labels(self.route, str(status))
            counter.inc()
        await response(scope, receive, send)


def _in_redis_client(error: BaseException) -> bool:
    """Whether ``error`` was raised inside the Redis client (its innermost frame is)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and f"{os.sep}redis{os.sep}" in tb.tb_frame.f_code.co_filename


def limited(e: LimitExceeded) -> Response:
    """The 429 answer to a request over a limit: ``Retry-After`` (whole seconds, rounded up)
    agrees with the body's exact ``retry_after``; the ``RateLimit-*`` headers come along."""
    GATEWAY_RATE_LIMITED.labels(e.limit).inc()
    return Response.json(
        {
            "error": "rate_limited",
            "limit": e.limit,
            "retry_after": e.retry_after,
            "message": str(e),
        },
        status=429,
        headers=e.headers(),
    )


_SIMPLE_TYPES = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data")
"""The content types a browser may POST to another site without a preflight request."""


def _is_form_or_text(content_type: str | None) -> bool:
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() in _SIMPLE_TYPES


def decode_body(body: bytes, decoder: msgspec.json.Decoder[T], what: str) -> T:
    """Decode a JSON body: ApiError 400 ``bad_json`` when it is not JSON, 422 ``invalid_<what>``
    when it is JSON of the wrong shape (the message says where)."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as e:
        raise ApiError(422, f"invalid_{what}", f"not a valid {what}: {e}") from None
    except msgspec.DecodeError as e:
        raise ApiError(400, "bad_json", f"the body is not valid JSON: {e}") from None


class App(Starlette):
    """Starlette, with a few hot routes taken before its middleware and router walk the
    routes: a request for one of ``fast`` (method, path as a Route spells it, endpoint) goes
    straight to its :class:`Endpoint`, with the path parameters the Route would give. An
    Endpoint answers every error itself, so the middleware has nothing to do for these; the
    same routes stay in ``routes`` (documentation, and any request not taken here).

    Before any of it, each of ``guards`` in turn may refuse a request (a protocol version not
    spoken, a Host or an Origin not allowed): the first ApiError is the answer. Every answer,
    whoever makes it, carries ``stated`` among its headers. A WebSocket's handshake for a path
    of ``sockets`` (path, ASGI app) goes to its app, which checks it itself."""

    def __init__(
        self,
        *args: Any,
        fast: Sequence[tuple[str, str, Endpoint]] = (),
        guards: Sequence[Callable[[Scope], ApiError | None]] = (),
        stated: Sequence[tuple[bytes, bytes]] = (),
        sockets: Sequence[tuple[str, Callable[[Scope, Receive, Send], Awaitable[None]]]] = (),
        **kw: Any,
    ):
        super().__init__(*args, **kw)
        self.guards = tuple(guards)
        self.stated = tuple(stated)
        self.fast = []
        for method, path, endpoint in fast:
            regex, _, convertors = compile_path(path)
            self.fast.append((method, regex, convertors, endpoint))
        self.sockets = []
        for path, app in sockets:
            regex, _, convertors = compile_path(path)
            self.sockets.append((regex, convertors, app))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.stated:
                send = _stating(send, self.stated)
            for guard in self.guards:
                refused = guard(scope)
                if refused is not None:
                    await refused.response()(scope, receive, send)
                    return
        if scope["type"] == "websocket":  # a WebSocket route checks its own handshake
            for regex, convertors, app in self.sockets:
                match = regex.match(scope["path"])
                if match is not None:
                    scope["app"] = self
                    scope["path_params"] = {
                        k: convertors[k].convert(v) for k, v in match.groupdict().items()
                    }
                    await app(scope, receive, send)
                    return
        if scope["type"] == "http" and not scope.get("root_path"):
            for method, regex, convertors, endpoint in self.fast:
                if scope["method"] != method:
                    continue
                match = regex.match(scope["path"])
                if match is None:
                    continue
                scope["app"] = self
                scope["path_params"] = {
                    k: convertors[k].convert(v) for k, v in match.groupdict().items()
                }
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _stating(send: Send, headers: tuple[tuple[bytes, bytes], ...]) -> Send:
    """``send``, adding ``headers`` to the start of the answer (the body passes untouched)."""

    async def stating(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *headers]}
        await send(message)

    return stating
