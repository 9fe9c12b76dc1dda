"""The gateway's operations are declared once (services/gateway/declare.py): the app's routes,
its hot paths and its WebSockets are built from the declarations, and so is the OpenAPI
document. No Redis: create_app connects only when its lifespan starts."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from starlette.routing import Route

from services.config import Settings
from services.gateway.app import create_app
from services.gateway.declare import Operation
from services.gateway.http import App, Request, Response
from services.gateway.openapi import openapi
from services.gateway.protocol import API
from services.gateway.resources import OPERATIONS

pytestmark = pytest.mark.behaviour

SOCKET = f"{API}/matches/{{match_id}}/seats/{{seat}}/socket"


def built() -> App:
    app = create_app(Settings(redis_url="redis://127.0.0.1:1"))  # never started: no Redis
    assert isinstance(app, App)
    return app


def test_each_method_of_each_path_is_declared_once() -> None:
    declared = Counter((op.method, op.path) for op in OPERATIONS)
    assert [key for key, n in declared.items() if n > 1] == []


def test_each_declared_operation_is_one_route_and_one_operation_of_the_document() -> None:
    app = built()
    routes = [r for r in app.routes if isinstance(r, Route)]
    assert len(routes) == len(OPERATIONS)
    for route, op in zip(routes, OPERATIONS, strict=True):
        assert route.path == op.route
        assert route.methods is not None and op.method in route.methods
        assert re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path) == op.path
    paths = openapi()["paths"]
    assert sum(len(methods) for methods in paths.values()) == len(OPERATIONS)
    for op in OPERATIONS:
        assert paths[op.path][op.method.lower()]["summary"] == op.summary


def test_the_hot_paths_and_the_sockets_are_served_as_declared() -> None:
    app = built()
    fast = {op.route for op in OPERATIONS if op.fast}
    assert fast == {
        f"{API}/matches/{{match_id}}/seats/{{seat:seat}}/moves",
        f"{API}/matches/{{match_id}}/seats/{{seat:seat}}/stream",
        f"{API}/account/play",
    }
    assert len(app.fast) == len(fast)
    sockets = [(op.method, op.path) for op in OPERATIONS if op.socket is not None]
    assert sockets == [("GET", SOCKET), ("GET", f"{API}/account/socket")]
    assert len(app.sockets) == 2
    regex, _, _ = app.sockets[0]
    assert regex.match(f"{API}/matches/m-1/seats/0/socket")
    assert not regex.match(f"{API}/matches/m-1/seats/x/socket")  # a seat is a number
    account, _, _ = app.sockets[1]
    assert account.match(f"{API}/account/socket")
    for _, path in sockets:
        assert "101" in openapi()["paths"][path]["get"]["responses"]


def test_a_declaration_spells_its_route_with_its_convertors_and_documents_its_body() -> None:
    async def handler(gw: object, request: Request) -> Response:
        return Response.json({})

    op = Operation(
        method="POST",
        path=f"{API}/things/{{thing_id}}/seats/{{seat}}",
        handler=handler,
        summary="A thing's seat",
        answers={"200": {"description": "done"}},
        body="Move",
        body_required=False,
        converters={"seat": "seat"},
    )
    assert op.route == f"{API}/things/{{thing_id}}/seats/{{seat:seat}}"
    document = op.document()
    assert document["requestBody"] == {
        "required": False,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Move"}}},
    }
    assert "security" not in document and "parameters" not in document
