"""An operation of the gateway, declared once: its method and path, its handler, and what the
OpenAPI document says of it. create_app (services/gateway/app.py, through
services/gateway/routing.py) builds its route from the declaration, and the document
(services/gateway/openapi.py) its path: there is no second list of paths.

Each resource module of services/gateway/resources/ declares its operations in a tuple
``OPERATIONS``; adding an operation is adding one :class:`Operation` there. A WebSocket is a
GET declared with ``socket``: the handshake goes to the app ``socket`` makes, and a GET of the
same path without the upgrade to ``handler`` (it answers 426 past the handshake's checks).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from starlette.types import ASGIApp

from services.gateway.commands import Gateway
from services.gateway.http import Request
from services.gateway.spec import ref

Handler = Callable[[Gateway, Request], Awaitable[ASGIApp]]
"""A handler: the gateway and the request to the answer (an ASGI app: a response, a stream)."""
SocketApp = Callable[[Gateway, str], ASGIApp]
"""What serves a WebSocket's handshake: made from the gateway and the route's metrics label."""
Method = Literal["GET", "POST", "DELETE"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One method of one path: how it is served, and how the OpenAPI document describes it.

    ``answers`` are by status, each built with services/gateway/spec.py (an error names the
    ``error`` codes it may carry; a 429 the limits it may name); ``body`` is the request body's
    struct, or the name of its component (a union: ``"Move"``). Every operation also takes
    the ``Domino-Protocol`` header and, when it changes something, may be refused for its Host
    or Origin: the document adds those to all of them (services/gateway/openapi.py)."""

    method: Method
    path: str
    """As the document writes it: ``/api/v1/matches/{match_id}``."""
    handler: Handler
    summary: str
    answers: Mapping[str, dict[str, Any]]
    description: str = ""
    security: Sequence[dict[str, list[str]]] | None = None
    """Who may call (schemes of Authorization: Bearer); None: anyone, with no token."""
    parameters: Sequence[dict[str, Any]] = ()
    body: type[msgspec.Struct] | str | None = None
    body_required: bool = True
    converters: Mapping[str, str] = field(default_factory=dict)
    """A path parameter's Starlette convertor (``seat``: a seat number; ``path``: any text)."""
    bulk: bool = False
    """Served in a place for bulk reads (services/gateway/admission.py), waiting its turn."""
    fast: bool = False
    """A hot path, taken before the router's walk and the middleware (services/gateway/http.py
    App)."""
    socket: SocketApp | None = None
    """A WebSocket: what serves the handshake of this GET upgraded."""

    @property
    def route(self) -> str:
        """The path as a Starlette route spells it, with its convertors: ``{seat:seat}``."""

        def spelled(m: re.Match[str]) -> str:
            name = m.group(1)
            convertor = self.converters.get(name)
            return f"{{{name}:{convertor}}}" if convertor else m.group(0)

        return re.sub(r"\{(\w+)\}", spelled, self.path)

    def document(self) -> dict[str, Any]:
        """The operation as the OpenAPI document has it (before the version's header and the
        Host and Origin refusals are added to it)."""
        out: dict[str, Any] = {"summary": self.summary}
        if self.description:
            out["description"] = self.description
        if self.security is not None:
            out["security"] = list(self.security)
        if self.parameters:
            out["parameters"] = list(self.parameters)
        if self.body is not None:
            name = self.body if isinstance(self.body, str) else self.body.__name__
            out["requestBody"] = {
                "required": self.body_required,
                "content": {"application/json": {"schema": ref(name)}},
            }
        out["responses"] = dict(self.answers)
        return out
