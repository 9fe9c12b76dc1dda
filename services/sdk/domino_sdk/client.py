"""HTTP clients for the gateway: the lobby, and one seat's stream and moves.

Everything here survives the network: a dropped stream reconnects and resumes after the last
event id it saw (nothing lost, nothing repeated); a 429 waits as long as the gateway says; a
move that got no answer is sent again with the same Idempotency-Key, so it is applied once.

Every request says which version of the protocol it speaks (``Domino-Protocol``), and every
answer is checked for the version the gateway states before its body is decoded: another
version raises :class:`ProtocolMismatch`, never a misread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

from domino_sdk.model import MatchEnded, Move
from domino_sdk.protocol import (
    PROTOCOL_HEADER,
    UNSTATED,
    CreateBody,
    EventLine,
    Gap,
    JoinBody,
    Line,
    MoveBody,
    RulesBody,
    decode_line,
)
from domino_sdk.transport import (
    _SPOKEN,
    MOVE_PATIENCE_S,
    RETRYABLE,
    _tls,
)
from domino_sdk.transport import GatewayError as GatewayError
from domino_sdk.transport import MoveRejected as MoveRejected
from domino_sdk.transport import MoveResult as MoveResult
from domino_sdk.transport import ProtocolMismatch as ProtocolMismatch
from domino_sdk.transport import StreamClosed as StreamClosed

if TYPE_CHECKING:
    from domino_sdk.socket import SeatSocket

log = logging.getLogger(__name__)
API = "/api/v1"
_ENCODER = msgspec.json.Encoder()
_JSON = {"content-type": "application/json"}
TIMEOUT = httpx.Timeout(15.0, connect=5.0)
_TIMEOUTS = {"timeout": TIMEOUT.as_dict()}


def _check_protocol(response: httpx.Response) -> None:
    """Raise ProtocolMismatch unless ``response`` is in this SDK's version of the protocol;
    an answer stating none is :data:`~domino_sdk.protocol.UNSTATED` (a gateway from before
    versions were stated)."""
    stated = response.headers.get(PROTOCOL_HEADER)
    if stated is None:
        stated = str(UNSTATED)
    if stated != _SPOKEN[PROTOCOL_HEADER]:
        raise ProtocolMismatch(response.status_code, stated)


_CLOSED = b'{"type":"closed"'


@dataclass(frozen=True, slots=True)
class Seat:
    """A seat someone plays: its match, its number and its token."""

    match_id: str
    seat: int
    token: str


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {"error": "http_error", "message": response.text[:200]}
    return data if isinstance(data, dict) else {"error": "http_error", "message": str(data)}


def _retry_after(response: httpx.Response) -> float:
    body = _body(response)
    value = body.get("retry_after")
    if isinstance(value, int | float) and value >= 0:
        return float(value)
    header = response.headers.get("retry-after", "1")
    return float(header) if header.replace(".", "", 1).isdigit() else 1.0


class _Http:
    """An httpx client (ours or the caller's) and the retry policy shared by the clients."""

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient | None,
        retries: int,
        max_backoff: float,
    ) -> None:
        self.base = url.rstrip("/")
        self.own = client is None
        self.transport: httpx.AsyncHTTPTransport | None = None
        if client is None:
            self.transport = httpx.AsyncHTTPTransport(verify=_tls())
            client = httpx.AsyncClient(transport=self.transport, timeout=TIMEOUT)
        self.http = client
        self.retries = retries
        self.max_backoff = max_backoff

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter, capped."""
        delay: float = min(self.max_backoff, 0.05 * 2.0**attempt)
        return delay * (0.5 + random.random() / 2)

    async def request(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
        patience_s: float = 0.0,
    ) -> httpx.Response:
        """Send, honouring 429s and retrying network errors and 502/503/504 with backoff;
        a network error is retried past the retries until ``patience_s`` seconds have gone
        since the first try (a gateway restarting on a loaded host takes a while). Raises
        ProtocolMismatch for an answer in another version of the protocol."""
        attempt = 0
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + patience_s
        headers = {**_SPOKEN, **headers} if headers else _SPOKEN
        while True:
            try:
                response = await self._send(method, self.base + path, headers, content, params)
            except httpx.TransportError as e:
                if attempt >= self.retries and loop.time() >= give_up_at:
                    raise
                log.info("%s failed (%r); retrying", path, e)
                await asyncio.sleep(self.backoff(attempt))
                attempt += 1
                continue
            _check_protocol(response)
            if response.status_code == 429 and attempt < self.retries:
                wait = _retry_after(response)
                limit = _body(response).get("limit")
                log.info("%s: rate limited (%s); waiting %.2f s", path, limit, wait)
                await asyncio.sleep(wait)
                attempt += 1
                continue
            if response.status_code in RETRYABLE and attempt < self.retries:
                await asyncio.sleep(self.backoff(attempt))
                attempt += 1
                continue
            return response

    async def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None,
        content: bytes | None,
        params: dict[str, str] | None,
    ) -> httpx.Response:
        if self.transport is None or params:
            return await self.http.request(
                method, url, headers=headers, content=content, params=params
            )
        # Our own client has no auth, cookies, redirects or hooks to apply: its transport takes
        # the request directly, for about two thirds of httpx's cost per request (measured).
        request = httpx.Request(method, url, headers=headers, content=content, extensions=_TIMEOUTS)
        response = await self.transport.handle_async_request(request)
        response.request = request
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def lines(
        self,
        path: str,
        headers: dict[str, str],
        params: Callable[[], dict[str, str]],
        *,
        read_timeout: float,
        attempts: int,
        on_reconnect: Callable[[], None],
    ) -> AsyncGenerator[bytes, None]:
        """The lines of a stream, keep-alives left out, for as long as the server sends them.

        A dropped connection, a 429 (after waiting as it says) or a 502/503/504 opens it again,
        with ``params()`` as they are then and after calling ``on_reconnect``; raises the
        transport error after ``attempts`` failures in a row, GatewayError for any other
        answer than 200, and ProtocolMismatch, before reading a line, for an answer in another
        version of the protocol.
        """
        attempt = 0
        timeout = httpx.Timeout(10.0, read=read_timeout)
        while True:
            try:
                async with self.http.stream(
                    "GET",
                    self.base + path,
                    headers={**_SPOKEN, **headers},  # as they are now: a token may be rotated
                    params=params(),
                    timeout=timeout,
                ) as response:
                    _check_protocol(response)
                    status = response.status_code
                    if status == 429:
                        await response.aread()
                        await asyncio.sleep(_retry_after(response))
                        continue
                    if status in RETRYABLE:
                        await response.aread()
                        raise httpx.TransportError(f"gateway answered {status}")
                    if status != 200:
                        await response.aread()
                        raise GatewayError(status, _body(response))
                    attempt = 0
                    buffer = b""
                    async for chunk in response.aiter_raw():
                        buffer += chunk
                        if b"\n" not in buffer:
                            continue
                        *complete, buffer = buffer.split(b"\n")
                        for raw in complete:
                            if raw.startswith(_CLOSED):  # its token ended: nothing follows
                                raise StreamClosed(msgspec.json.decode(raw, type=dict[str, Any]))
                            if raw.strip():  # a blank line is a keep-alive
                                yield raw
            except (httpx.TransportError, httpx.StreamError) as e:
                if attempt >= attempts:
                    raise
                log.debug("%s dropped (%r)", path, e)
                await asyncio.sleep(self.backoff(attempt))
                attempt += 1
            on_reconnect()

    async def move(
        self, path: str, auth: dict[str, str], move: Move | MoveBody, key: str
    ) -> MoveResult:
        """Post a move to a seat's moves path; raise MoveRejected when the referee refuses it,
        GatewayError for anything else that is not an acceptance."""
        response = await self.request(
            "POST",
            path,
            headers={**auth, "idempotency-key": key, "content-type": "application/json"},
            content=_ENCODER.encode(move),
            patience_s=MOVE_PATIENCE_S,
        )
        body = _body(response)
        if response.status_code == 200:
            return MoveResult(version=int(body["version"]), replayed=bool(body["replayed"]))
        if body.get("error") == "rejected":
            raise MoveRejected(response.status_code, body)
        raise GatewayError(response.status_code, body)

    async def aclose(self) -> None:
        """Close the httpx client if it is ours."""
        if self.own:
            await self.http.aclose()


class LobbyClient:
    """Create, list and join matches."""

    def __init__(
        self, url: str, *, client: httpx.AsyncClient | None = None, retries: int = 8
    ) -> None:
        self._http = _Http(url, client, retries, 5.0)

    async def create(
        self,
        seats: Sequence[str | None],
        *,
        rules: RulesBody | Mapping[str, Any] | None = None,
        names: Sequence[str] | None = None,
        deadline_ms: int = 0,
    ) -> dict[str, Any]:
        """Open a match: a house bot pool per seat, None for a seat played from outside.

        ``rules`` holds the options of :class:`RulesBody`; one it does not name raises
        msgspec.ValidationError before anything is sent."""
        if rules is None:
            rules = RulesBody()
        elif not isinstance(rules, RulesBody):
            rules = msgspec.convert(rules, RulesBody)
        body = CreateBody(
            seats=list(seats),
            rules=rules,
            names=None if names is None else list(names),
            deadline_ms=deadline_ms,
        )
        response = await self._http.request(
            "POST", f"{API}/matches", headers=_JSON, content=_ENCODER.encode(body)
        )
        if response.status_code != 201:
            raise GatewayError(response.status_code, _body(response))
        match: dict[str, Any] = response.json()["match"]
        return match

    async def join(
        self, match_id: str, *, name: str | None = None, seat: int | None = None
    ) -> Seat:
        """Take a seat (the first open one unless ``seat`` is given); return it with its token."""
        body = JoinBody(name=name, seat=seat)
        response = await self._http.request(
            "POST", f"{API}/matches/{match_id}/join", headers=_JSON, content=_ENCODER.encode(body)
        )
        if response.status_code != 201:
            raise GatewayError(response.status_code, _body(response))
        data = response.json()
        return Seat(match_id=data["match_id"], seat=data["seat"], token=data["token"])

    async def matches(self, status: str = "open") -> list[dict[str, Any]]:
        """Open, live or finished matches."""
        response = await self._http.request("GET", f"{API}/matches", params={"status": status})
        if response.status_code != 200:
            raise GatewayError(response.status_code, _body(response))
        rows: list[dict[str, Any]] = response.json()["matches"]
        return rows

    async def aclose(self) -> None:
        """Close the connection pool (if the client created it)."""
        await self._http.aclose()


class SeatClient:
    """One seat: its stream of lines (reconnecting, resuming) and its moves."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        client: httpx.AsyncClient | None = None,
        retries: int = 8,
        read_timeout: float = 35.0,
        transport: str = "auto",
    ) -> None:
        from domino_sdk.socket import check_transport  # it builds on this module

        self._http = _Http(url, client, retries, 5.0)
        self._auth = {"authorization": f"Bearer {token}"}
        self.read_timeout = read_timeout
        self.transport = check_transport(transport)
        self.match_id: str | None = None
        self.seat: int | None = None
        self.last_id: int | None = None  # the last event id seen: where a reconnect resumes
        self.reconnects = 0
        self._socket: SeatSocket | None = None

    async def whoami(self) -> tuple[str, int]:
        """The match and seat this token plays."""
        response = await self._http.request("GET", f"{API}/seat", headers=self._auth)
        if response.status_code != 200:
            raise GatewayError(response.status_code, _body(response))
        data = response.json()
        self.match_id, self.seat = data["match_id"], data["seat"]
        return data["match_id"], data["seat"]

    def _path(self, what: str) -> str:
        if self.match_id is None or self.seat is None:
            raise RuntimeError("call whoami() first")
        return f"{API}/matches/{self.match_id}/seats/{self.seat}/{what}"

    async def lines(self, after: int | None = None, events: str = "all") -> AsyncIterator[Line]:
        """The seat's lines, until the match ends: a snapshot first (or, with ``after``, the
        events after that id), then events and turns. Reconnects resume after the last id.

        ``events="minimal"`` leaves out every event but the seat's own timeouts and the ends
        of rounds and of the match: enough for a bot that only answers its turns.
        """
        if after is not None:
            self.last_id = after
        if self.transport != "http":
            over = await self._over_socket(events)
            if over is not None:
                async with contextlib.aclosing(over):
                    async for line in over:
                        yield line
                if self._socket is not None:
                    return  # the match is over
        async with contextlib.aclosing(self._over_http(events)) as over_http:
            async for line in over_http:
                yield line

    async def _over_socket(self, events: str) -> AsyncGenerator[Line, None] | None:
        """The seat's lines over its socket, or None when there is none (404, 405, 426) and
        the client may play over HTTP. A socket that is no longer there when it is opened
        again ends the lines with ``_socket`` None: the rest come over HTTP."""
        from domino_sdk.socket import SeatSocket, SocketUnavailable, fall_back

        if self.match_id is None or self.seat is None:
            await self.whoami()
        assert self.match_id is not None and self.seat is not None
        socket = SeatSocket(
            self._http.base,
            self.match_id,
            self.seat,
            self._auth,
            after=self.last_id,
            everything=events != "minimal",
            attempts=self._http.retries * 4,
            retries=self._http.retries,
        )
        try:
            await socket.open()
        except SocketUnavailable as e:
            fall_back(self.transport, e, f"{self.match_id} seat {self.seat}")
            return None
        self._socket = socket

        async def lines() -> AsyncGenerator[Line, None]:
            items = socket.items()
            try:
                async for line in items:
                    self.last_id = line.id
                    yield line
            except SocketUnavailable as e:  # opened again, through a proxy without the upgrade
                fall_back(self.transport, e, f"{self.match_id} seat {self.seat}")
                self.last_id = socket.last_id  # every line read was yielded before this
                self._socket = None
            finally:
                self.reconnects += socket.reconnects
                await items.aclose()

        return lines()

    async def _over_http(self, events: str) -> AsyncGenerator[Line, None]:
        """The seat's lines over its NDJSON stream."""

        def params() -> dict[str, str]:
            if self.last_id is None:
                return {"events": events}
            return {"events": events, "after": str(self.last_id)}

        raw_lines = self._http.lines(
            self._path("stream"),
            self._auth,
            params,
            read_timeout=self.read_timeout,
            attempts=self._http.retries * 4,
            on_reconnect=self._reconnected,
        )
        async with contextlib.aclosing(raw_lines):
            async for raw in raw_lines:
                line = decode_line(raw)
                if line is None:
                    continue  # a kind of line newer than this SDK
                self.last_id = line.id
                yield line
                if _ends(line):
                    return

    def _reconnected(self) -> None:
        log.info("stream dropped; resuming after %s", self.last_id)
        self.reconnects += 1

    async def move(self, move: Move | MoveBody, key: str) -> MoveResult:
        """Post a move (an entry of ``view.legal``, or a body without the seat); raise
        MoveRejected when the referee refuses it, GatewayError for anything else that is not
        an acceptance. Sent up the seat's socket while the lines come over it."""
        socket = self._socket
        if socket is not None and not socket.over:
            assert self.match_id is not None and self.seat is not None  # known: it is open
            return await socket.move(self.match_id, self.seat, move, key)
        return await self._http.move(self._path("moves"), self._auth, move, key)

    async def aclose(self) -> None:
        """Close the socket and the connection pool (if the client created it)."""
        if self._socket is not None:
            await self._socket.aclose()
        await self._http.aclose()


def _ends(line: Line) -> bool:
    """Whether nothing can follow this line: the match is over."""
    if isinstance(line, EventLine):
        return isinstance(line.event, MatchEnded)
    if isinstance(line, Gap):
        return False
    return line.view is not None and line.view.phase == "over"
