"""What operators and tools ask of the gateway itself: liveness (GET /healthz),
readiness (GET /readyz), its metrics (GET /metrics, for the operator's token) and this API's
OpenAPI document (GET /api/v1/openapi.json).
"""

from __future__ import annotations

from services.gateway import spec
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import Request, Response
from services.gateway.protocol import API, PROTOCOL, SPOKEN, Health
from services.metrics import exposition


async def health(gw: Gateway, request: Request) -> Response:
    """GET /healthz."""
    await gw.redis.ping()
    health = Health(ok=True, following=len(gw.hub.feeds), protocol=PROTOCOL, supported=list(SPOKEN))
    return Response.json(health)


async def ready(gw: Gateway, request: Request) -> Response:
    """GET /readyz: 200 while the gateway serves (it runs, and its Redis answers), else
    503 with the reason."""
    reason = await gw.readiness()
    if reason is not None:
        return Response.json({"ready": False, "reason": reason}, 503)
    return Response.json({"ready": True})


async def metrics(gw: Gateway, request: Request) -> Response:
    """GET /metrics: the gateway's metrics in Prometheus's text format, for the operator's
    token only (the metrics port, when set, serves them without one, to its own network)."""
    await gw.operator(request)
    body, content_type = exposition()
    return Response(200, body, [(b"content-type", content_type.encode())])


async def openapi(gw: Gateway, request: Request) -> Response:
    """GET /openapi.json: the document made from every operation's declaration."""
    return Response.json(gw.document())


OPERATIONS = (
    Operation(
        method="GET",
        path="/healthz",
        handler=health,
        summary="Liveness",
        answers={"200": spec.answer("ok", spec.ref("Health"))},
    ),
    Operation(
        method="GET",
        path="/readyz",
        handler=ready,
        summary="Readiness: the gateway runs and its Redis answers",
        answers={
            "200": spec.answer("ready", spec.ref("Readiness")),
            "503": spec.answer("not ready, and why", spec.ref("Readiness")),
        },
    ),
    Operation(
        method="GET",
        path="/metrics",
        handler=metrics,
        summary="The gateway's metrics in Prometheus's text format (operations.md)",
        security=spec.OPERATOR,
        answers={
            "200": {
                "description": "the metrics",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            "401": spec.NO_OPERATOR,
            "403": spec.NOT_OPERATOR,
            "429": spec.OPERATOR_GUESSING,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/openapi.json",
        handler=openapi,
        summary="This document",
        answers={"200": spec.answer("OpenAPI 3.1", {"type": "object"})},
    ),
)
