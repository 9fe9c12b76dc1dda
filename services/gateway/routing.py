"""The gateway's routes, built from its operations' declarations (services/gateway/declare.py),
and what it answers a request no route takes: 404 for a path it has not, 405 for a method of a
path it has (with every method of the path in ``Allow``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Match, Route
from starlette.types import ASGIApp

from services.gateway.commands import Gateway
from services.gateway.declare import Handler, Operation
from services.gateway.http import Endpoint, Request
from services.metrics import GATEWAY_REQUESTS


@dataclass(slots=True)
class Routes:
    """What an app is built with: its routes, the hot ones among them (taken before the
    router's walk), and its WebSockets' handshakes (path as a route spells it, app)."""

    routes: list[Route] = field(default_factory=list)
    fast: list[tuple[str, str, Endpoint]] = field(default_factory=list)
    sockets: list[tuple[str, ASGIApp]] = field(default_factory=list)


def routes_of(operations: Iterable[Operation], gw: Gateway) -> Routes:
    """A route per operation, its handler given ``gw``, counted in the metrics under its
    method and path template; a bulk read waits for its place, a WebSocket's handshake goes
    to the app its declaration makes."""
    built = Routes()
    for op in operations:
        handler = _bound(op.handler, gw)
        if op.bulk:
            handler = gw.bulk.admitted(handler)
        endpoint = Endpoint(handler)
        endpoint.measure(f"{op.method} {op.path}")
        built.routes.append(Route(op.route, endpoint, methods=[op.method]))
        if op.fast:
            built.fast.append((op.method, op.route, endpoint))
        if op.socket is not None:
            built.sockets.append((op.route, op.socket(gw, f"WEBSOCKET {op.path}")))
    return built


def _bound(handler: Handler, gw: Gateway) -> Callable[[Request], Awaitable[ASGIApp]]:
    """``handler`` for ``gw``: what an endpoint calls with the request."""

    async def endpoint(request: Request) -> ASGIApp:
        return await handler(gw, request)

    endpoint.__name__ = getattr(handler, "__name__", "endpoint")
    return endpoint


async def not_found(request: StarletteRequest, exc: Exception) -> JSONResponse:
    """404 for a path no route has."""
    GATEWAY_REQUESTS.labels("unmatched", "404").inc()
    return JSONResponse(
        {"error": "not_found", "message": f"no such endpoint {request.url.path}"}, 404
    )


async def http_error(request: StarletteRequest, exc: Exception) -> JSONResponse:
    """405 (and any other error of the router), as JSON."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = "method_not_allowed" if status == 405 else "http_error"
    GATEWAY_REQUESTS.labels("unmatched", str(status)).inc()
    message = f"{request.method} is not allowed here" if status == 405 else str(exc)
    headers = getattr(exc, "headers", None)
    if status == 405:  # every method of the path, not only those of the first route to match
        headers = {**(headers or {}), "Allow": ", ".join(_allowed(request))}
    return JSONResponse({"error": code, "message": message}, status, headers=headers)


def _allowed(request: StarletteRequest) -> list[str]:
    """The methods the routes of the request's path answer (a path may have one route per
    method: GET and POST /matches)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(route.methods or ())
    return sorted(methods)
