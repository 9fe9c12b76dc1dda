"""The browser pages: one HTML shell for every page path, and the files under ``web/static``.

:class:`Pages` is an ASGI layer in front of the API's router. A GET (or HEAD) of a page path
(``/``, ``/watch/{id}``, ``/replay/{id}``, ``/play/{id}``, ``/players``, ``/players/{key}``)
answers ``web/index.html``: the page routes itself on the path. ``/static/{file}`` answers a
regular file inside ``web/static`` of a known type; anything else there, a path that leaves the
directory included, is a 404 JSON error like the API's. Everything else goes on to the API.

Every answer carries the same security headers (a Content-Security-Policy that allows only the
gateway's own scripts, styles and connections), ``Cache-Control: no-cache`` and an ETag, and a
request whose ``If-None-Match`` names the current ETag is answered 304 with no body.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.http import Endpoint, Request, Response

WEB = Path(__file__).resolve().parent / "web"
"""The pages' files: ``index.html``, and ``static/`` for scripts, styles and images."""

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
"""The headers of every page, file and error this layer answers."""

TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
}
"""The content type of each kind of file served; a file of another kind is not served."""

PAGE = re.compile(r"/|/players|/(?:watch|replay|play)/[^/]+|/players/.+")
"""The paths the HTML shell answers (a player's key may hold any character, ``/`` too)."""
STATIC = "/static/"


@dataclass(frozen=True, slots=True)
class _File:
    """A file as read: its bytes, its ETag, and what it was read at (to see it change)."""

    stamp: tuple[int, int, int]  # inode, size, modification time (ns)
    body: bytes
    etag: bytes


class Files:
    """Regular files under a directory, read when they change and kept meanwhile."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._read: dict[str, _File] = {}  # bounded by the files the directory holds

    def get(self, relative: str) -> tuple[_File, str] | None:
        """The file at ``relative`` and its content type; None when it is not a regular file
        of a known type inside the directory (``..``, links out of it and hidden files
        included)."""
        if not relative or "\0" in relative:
            return None
        kind = TYPES.get(os.path.splitext(relative)[1].lower())
        if kind is None or any(part.startswith(".") for part in relative.split("/")):
            return None
        root = os.path.realpath(self.root)
        path = os.path.realpath(os.path.join(root, relative))
        if os.path.commonpath([root, path]) != root or path == root:
            return None
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return None
        if not os.path.isfile(path):
            return None
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._read.get(path)
        if cached is None or cached.stamp != stamp:
            try:
                with open(path, "rb") as f:
                    body = f.read()
            except OSError:
                return None
            etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'.encode()
            cached = self._read[path] = _File(stamp, body, etag)
        return cached, kind


def _fresh(request: Request, etag: bytes) -> bool:
    """Whether the request's If-None-Match names ``etag`` (weak or strong), or is ``*``."""
    asked = request.header(b"if-none-match")
    if asked is None:
        return False
    tags = {t.strip().removeprefix("W/") for t in asked.split(",")}
    return "*" in tags or etag.decode() in tags


def _answer(request: Request, file: _File, kind: str) -> Response:
    headers = [*SECURITY, (b"cache-control", b"no-cache"), (b"etag", file.etag)]
    if _fresh(request, file.etag):
        return Response(304, b"", headers)
    return Response(200, file.body, [(b"content-type", kind.encode()), *headers])


def _missing(what: str) -> Response:
    return Response.json({"error": "not_found", "message": f"no such file {what}"}, 404, SECURITY)


class Pages:
    """The ASGI layer serving the pages and their files in front of ``app`` (the API)."""

    def __init__(self, app: ASGIApp, root: Path = WEB) -> None:
        self.app = app
        self.shell = Files(root)
        self.files = Files(root / "static")
        self.page = Endpoint(self._page)
        self.page.measure("GET /{page}")
        self.static = Endpoint(self._static)
        self.static.measure("GET /static/{path}")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path: str = scope["path"]
            if path.startswith(STATIC):
                scope["path_params"] = {"path": path.removeprefix(STATIC)}
                await self.static(scope, receive, send)
                return
            if PAGE.fullmatch(path):
                await self.page(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _page(self, request: Request) -> Response:
        """GET a page path: the HTML shell."""
        found = self.shell.get("index.html")
        if found is None:
            return _missing("index.html")
        return _answer(request, *found)

    async def _static(self, request: Request) -> Response:
        """GET /static/{path}: a script, style or image of the pages."""
        relative: str = request.params["path"]
        found = self.files.get(relative)
        if found is None:
            return _missing(f"/static/{relative}")
        return _answer(request, *found)
