"""Which Host and Origin a state-changing request (POST, PUT, PATCH, DELETE) may carry.

Two attacks from a browser, both against a visitor of another site:

- another site's page posts to the gateway in the visitor's name (the gateway's pages keep
  tokens the page can use). The browser sends an ``Origin`` header with every cross-origin
  POST, so a request whose Origin is present and is not the gateway's own (``scheme://`` and
  the request's Host) nor one of ``DOMINO_GATEWAY_ALLOWED_ORIGINS`` is refused. (The 415 for
  forms and plain text stays; a body with no Content-Type at all, which a page can send
  without asking first, is stopped here by its Origin.)
- DNS rebinding: a name the attacker controls is pointed at the gateway's address, and the
  page's requests become same-origin. Only the Host header tells them apart, so when
  ``DOMINO_GATEWAY_ALLOWED_HOSTS`` is set a request with another Host is refused. With it
  unset any Host is accepted, and that is allowed only while the gateway listens on loopback
  (``domino up``, tests): listening anywhere else without a list is a configuration error,
  and ``*`` says "any Host" on purpose (a proxy in front that checks it itself).

Either refusal is a 403 with a typed error (``host_not_allowed``, ``origin_not_allowed``).
Requests that change nothing (GET, HEAD, OPTIONS) are not checked.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import structlog
from starlette.types import Scope

from services.gateway.config import GatewayConfigError, GatewaySettings
from services.gateway.http import ApiError

log = structlog.get_logger()

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""The methods whose requests are checked."""
ANY = "*"


@dataclass(frozen=True, slots=True)
class Origins:
    """The Hosts (None: any) and the other sites' origins a state-changing request may
    carry."""

    hosts: frozenset[str] | None
    origins: frozenset[str]

    @classmethod
    def of(cls, config: GatewaySettings, bound: str) -> Origins:
        """What ``config`` allows for a gateway listening on ``bound``; raises
        GatewayConfigError when it listens beyond loopback with no list of hosts."""
        hosts = _items(config.allowed_hosts)
        if ANY in hosts:
            allowed = None
        elif hosts:
            allowed = frozenset(hosts)
        elif is_loopback(bound):
            allowed = None
        else:
            raise GatewayConfigError(
                f"the gateway listens on {bound}, beyond loopback: set "
                "DOMINO_GATEWAY_ALLOWED_HOSTS to the names clients reach it by "
                "(or * when a proxy in front checks the Host)"
            )
        origins = frozenset(o.rstrip("/") for o in _items(config.allowed_origins))
        return cls(hosts=allowed, origins=origins)

    def refusal(self, scope: Scope) -> ApiError | None:
        """Why a request may not be served (403), or None when it may."""
        if scope["method"] not in STATE_CHANGING:
            return None
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1").strip().lower()
            elif name == b"origin":
                origin = value.decode("latin-1").strip().lower()
        if self.hosts is not None and (host is None or not _listed(self.hosts, host)):
            log.info("request for another host refused", host=(host or "")[:100])
            return ApiError(403, "host_not_allowed", "this gateway does not answer for that Host")
        if origin is None or origin in self.origins or _own(origin, host):
            return None
        log.info("request from another origin refused", origin=origin[:100])
        return ApiError(
            403,
            "origin_not_allowed",
            "requests that change something are taken only from this gateway's own pages "
            "(and the origins its operator allows)",
        )


def _listed(hosts: frozenset[str], host: str) -> bool:
    """Whether a Host header is one of ``hosts``, with its port or without."""
    return host in hosts or _hostname(host) in hosts


def _items(listed: str) -> list[str]:
    return [item.strip().lower() for item in listed.split(",") if item.strip()]


def _hostname(host: str) -> str:
    """A Host header without its port (``[::1]:8080`` is ``[::1]``)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _own(origin: str, host: str | None) -> bool:
    """Whether ``origin`` is the gateway's own: a web scheme and the request's Host."""
    scheme, sep, rest = origin.partition("://")
    return bool(sep) and scheme in ("http", "https") and host is not None and rest == host


def is_loopback(bound: str) -> bool:
    """Whether an address to listen on is loopback only (``localhost`` is)."""
    if bound.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bound.strip("[]")).is_loopback
    except ValueError:
        return False
