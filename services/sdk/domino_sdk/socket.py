"""The gateway's sockets: a seat's lines, or an account's, down and its moves up one WebSocket.

The SDK plays over a socket by default (``transport="auto"``): one seat over the seat's socket
(``GET /api/v1/matches/{id}/seats/{seat}/socket``), every seat of an account over the
account's (``GET /api/v1/account/socket``), one connection for all of them. When the socket
cannot be had — its handshake answered 404, 405 or 426: a gateway from before sockets, or a
proxy that does not pass the upgrade on — it plays over HTTP instead (the streams and
``POST /moves``), as ``transport="http"`` asks for from the start; ``transport="socket"``
raises :class:`SocketUnavailable` instead.

Either way a bot sees the same. A connection that is cut is opened again where it was — the
seat's socket with ``?after=`` the last id read, the account's with ``?cursor=`` the last
cursor read — so no line is lost or repeated. A move is sent under its Idempotency-Key, and
sent again under it until it is answered (a key sent over HTTP and over a socket is one move).
The errors are the HTTP clients': StreamClosed when the token ends, ProtocolMismatch for a
gateway of another version, MoveRejected, GatewayError.

A frame is decoded once: its envelope, the seat's line and a turn's view together, and an
event only when its reader wants it — a bot that only answers its turns decodes no event but
the ends of rounds and of the match, and its own timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import urlencode

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
)
from websockets.frames import Frame, Opcode
from websockets.protocol import Event

from domino_sdk.lobby import PlayLine, SeenAccountEvent, decode_account_event
from domino_sdk.model import Move
from domino_sdk.protocol import (
    PROTOCOL_HEADER,
    UNSTATED,
    EventLine,
    Gap,
    Line,
    MoveBody,
    Snapshot,
    TurnLine,
    decode_event,
    decode_line,
)
from domino_sdk.transport import (
    _SPOKEN,
    MOVE_PATIENCE_S,
    RETRYABLE,
    GatewayError,
    MoveRejected,
    MoveResult,
    ProtocolMismatch,
    StreamClosed,
    _tls,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

Transport = Literal["auto", "socket", "http"]
"""How a bot reaches the gateway: ``auto`` (the socket, else HTTP), ``socket`` or ``http``."""
TRANSPORTS: tuple[Transport, ...] = ("auto", "socket", "http")
NO_SOCKET = frozenset({404, 405, 426})
"""The answers to a socket's handshake that say there is no socket there (not that this one
is refused): a gateway from before sockets, or a proxy that does not pass the upgrade on. A
403 with no body says so too: what a gateway's WebSocket layer answers for a route it does
not have (a refusal of the gateway's own always has its JSON body)."""
MATCH_OVER = 1000
CREDENTIAL_ENDS = {
    4001: "token_rotated",
    4002: "token_revoked",
    4003: "token_reissued",
    4004: "account_banned",
    4005: "seat_ended",
}
"""The close codes of a credential's end (docs/protocol.md, "Socket"): never opened again."""
MAX_FRAME = 1 << 24
"""The largest frame read: far over any line the gateway sends (a snapshot of a long match)."""
_ENCODER = msgspec.json.Encoder()


def check_transport(transport: str) -> Transport:
    """``transport`` if it is one of :data:`TRANSPORTS`; ValueError otherwise."""
    for known in TRANSPORTS:
        if transport == known:
            return known
    raise ValueError(f"transport is one of {', '.join(TRANSPORTS)}, not {transport!r}")


class SocketUnavailable(GatewayError):
    """Raised when a socket's handshake is answered 404, 405 or 426 (:data:`NO_SOCKET`), 403
    with no body, or with no HTTP/1.1 answer (``status`` 0): the gateway, or a proxy before
    it, has no socket there. The HTTP streams do the same work."""


class SocketLost(ConnectionError):
    """Raised when a socket could not be opened again after a cut, as often as it was allowed
    to try, or a move could not be sent while it was down (for MOVE_PATIENCE_S seconds)."""


# -- the frames --------------------------------------------------------------------------------


class _EventOnWire(msgspec.Struct, frozen=True, kw_only=True, tag="event", tag_field="type"):
    """An event line, its event left undecoded until someone wants it."""

    id: int
    event: msgspec.Raw


class _LineFrame(msgspec.Struct, frozen=True, kw_only=True, tag="line", tag_field="type"):
    """A seat's line (as its stream sends it), with its match and seat; on the account's
    socket, with the cursor that covers it."""

    match_id: str
    seat: int
    line: Snapshot | _EventOnWire | TurnLine | Gap
    cursor: str | None = None


class _AccountFrame(msgspec.Struct, frozen=True, kw_only=True, tag="account", tag_field="type"):
    """A line of the account's feed, left undecoded until it is read, and its cursor."""

    line: msgspec.Raw
    cursor: str | None = None


class _Closed(msgspec.Struct, frozen=True, kw_only=True, tag="closed", tag_field="type"):
    """The token the socket was opened with ended; its close code follows."""

    reason: str = "closed"
    message: str = ""


class _Answer(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """What every answer to a move frame has: the seat and the key it answers."""

    match_id: str | None = None
    seat: int | None = None
    key: str | None = None

    def body(self) -> dict[str, Any]:
        """The answer as the JSON body POST /moves would have answered it."""
        body = msgspec.structs.asdict(self)
        for field in ("match_id", "seat", "key"):
            body.pop(field)
        return body


class _Accepted(_Answer, frozen=True, tag="accepted"):
    version: int
    replayed: bool = False


class _Rejected(_Answer, frozen=True, tag="rejected"):
    reason: str = ""
    rule: str = ""
    message: str = ""

    def body(self) -> dict[str, Any]:
        return {"error": "rejected", **super().body(), "accepted": False}


class _Limited(_Answer, frozen=True, tag="limited"):
    limit: str = ""
    retry_after: float = 1.0
    message: str = ""

    def body(self) -> dict[str, Any]:
        return {"error": "rate_limited", **super().body()}


class _TimedOut(_Answer, frozen=True, tag="timeout"):
    message: str = ""

    def body(self) -> dict[str, Any]:
        return {"error": "timeout", **super().body()}


class _Error(_Answer, frozen=True, tag="error"):
    error: str = "error"
    message: str = ""


_Down = _LineFrame | _AccountFrame | _Closed | _Accepted | _Rejected | _Limited | _TimedOut | _Error
_DOWN: msgspec.json.Decoder[_Down] = msgspec.json.Decoder(_Down)
DOWN_TYPES = frozenset({"line", "account", "closed", "accepted", "rejected", "limited", "timeout"})


class _Loose(msgspec.Struct, frozen=True):
    """A frame this SDK could not read as it knows it: its type, its cursor, its line."""

    type: str
    cursor: str | None = None
    line: msgspec.Raw = msgspec.Raw(b"null")


class _Id(msgspec.Struct, frozen=True):
    """Only the id of a seat's line."""

    id: int | None = None


_LOOSE = msgspec.json.Decoder(_Loose)
_ID = msgspec.json.Decoder(_Id)


class _MoveUp(msgspec.Struct, frozen=True, kw_only=True, tag="move", tag_field="type"):
    """A move sent up: ``key`` its Idempotency-Key, ``move`` what POST /moves takes."""

    key: str
    move: Move | MoveBody
    match_id: str
    seat: int


_ERROR_STATUS = {
    "rejected": 409,
    "idempotency_key_reused": 409,
    "not_your_seat": 403,
    "wrong_seat": 403,
    "wrong_match": 403,
    "unavailable": 503,
    "internal": 500,
}
"""The HTTP status POST /moves answers each error frame's code with (400 if not here)."""
_ESSENTIAL = (b'"type":"match_ended"', b'"type":"round_ended"', b'"type":"turn_timed_out"')
"""An event a bot that does not follow every event still reads: the ends of rounds and of
the match, and timeouts (its own, as ``events=minimal`` sends them). A string inside an event
cannot hold these bytes: its quotes would be escaped."""


def _essential(event: msgspec.Raw) -> bool:
    data = bytes(event)
    return any(tag in data for tag in _ESSENTIAL)


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter, capped at 5 s."""
    delay: float = min(5.0, 0.05 * 2.0**attempt)
    return delay * (0.5 + random.random() / 2)


def _json(data: bytes | bytearray) -> dict[str, Any]:
    try:
        body = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return {"error": "http_error", "message": bytes(data[:200]).decode(errors="replace")}
    return body if isinstance(body, dict) else {"error": "http_error", "message": str(body)}


def ws_url(base: str, path: str) -> str:
    """The WebSocket URL of ``path`` on the gateway at ``base`` (http: ws, https: wss)."""
    base = base.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + path
    if base.startswith("http://"):
        return "ws://" + base.removeprefix("http://") + path
    return base + path


# -- a socket ----------------------------------------------------------------------------------


class _Direct(ClientConnection):
    """A connection that hands each text message to :meth:`take` as soon as it is parsed,
    rather than queueing it for ``recv()``: a frame costs no wake and no queue. What ``take``
    raises aborts the connection and is kept in :attr:`failure`, for its reader to raise."""

    failure: Exception | None = None
    _parts: list[bytes] | None = None  # a fragmented message's frames so far

    def take(self, data: bytes) -> None:
        """Read one whole text message."""
        raise NotImplementedError

    def process_event(self, event: Event) -> None:
        if self.response is None or not isinstance(event, Frame) or self.failure is not None:
            super().process_event(event)  # the handshake's answer
            return
        if event.opcode is Opcode.TEXT and event.fin:
            data = bytes(event.data)
        elif event.opcode is Opcode.TEXT:
            self._parts = [bytes(event.data)]
            return
        elif event.opcode is Opcode.CONT and self._parts is not None:
            self._parts.append(bytes(event.data))
            if not event.fin:
                return
            data, self._parts = b"".join(self._parts), None
        else:
            super().process_event(event)  # pongs; binary frames, which the gateway never sends
            return
        try:
            self.take(data)
        except Exception as e:  # a frame this SDK cannot read: the socket ends with why
            self.failure = e
            self.transport.abort()


def _reading(take: Callable[[bytes], None]) -> type[_Direct]:
    """A :class:`_Direct` connection whose messages go to ``take``."""

    class Reading(_Direct):
        def take(self, data: bytes) -> None:
            take(data)

    return Reading


class _Socket(Generic[T]):
    """One WebSocket to the gateway, opened again after a cut where it was (by a task of its
    own, :meth:`_read`): each frame is read as it is parsed, what it carries handed to the
    sink of :meth:`feed` or left in :attr:`ready` for :meth:`items`, each answer to the move
    waiting for it. Subclasses say where to resume (:meth:`query`) and how to read a frame
    (:meth:`frame`)."""

    def __init__(
        self, url: str, path: str, auth: dict[str, str], *, attempts: int, retries: int
    ) -> None:
        self.url = ws_url(url, path)
        self.auth = auth  # the client's own: a token rotated since is the one a reopen sends
        self.attempts = attempts  # failed openings in a row before it gives up
        self.retries = retries  # a move limited or timed out is sent again this many times
        self.reconnects = 0
        self.ready: deque[T] = deque()
        self.closed: dict[str, Any] | None = None  # the closing line of a credential's end
        self._ws: _Direct | None = None
        self._open = asyncio.Event()
        self._wake = asyncio.Event()
        self._waiting: dict[tuple[str, int, str], asyncio.Future[_Answer | None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._sink: Callable[[T], None] | None = None  # what takes each item, if not ready
        self._connection = _reading(self.frame)

    # -- what the subclasses say -----------------------------------------------------------

    def query(self) -> dict[str, str]:
        """The query of the next opening: where to resume."""
        return {}

    def frame(self, data: bytes) -> None:
        """Read one frame the gateway sent."""
        raise NotImplementedError

    def finished(self, code: int) -> bool:
        """Whether a close with ``code`` ends the socket for good, normally."""
        return False

    def refused(self, status: int, body: dict[str, Any]) -> bool:
        """Whether a handshake refused with ``status`` is to be tried again at once (with
        what the refusal mended); False raises it."""
        return False

    # -- opening -----------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        """Whether the socket has ended for good (or never opened)."""
        return self._reader is None or self._reader.done()

    async def open(self) -> None:
        """Open the socket and start reading it. Raises SocketUnavailable when there is no
        socket there, ProtocolMismatch, GatewayError for a handshake refused as a stream would
        be (401, 403, 400), SocketLost when it cannot be reached."""
        self._ws = await self._connect()
        self._open.set()
        self._reader = asyncio.create_task(self._read())

    async def _connect(self) -> _Direct:
        attempt = 0
        while True:
            query = self.query()
            url = f"{self.url}?{urlencode(query)}" if query else self.url
            spoken = _SPOKEN[PROTOCOL_HEADER]  # one place says it, for every request
            try:
                ws = await connect(
                    url,
                    additional_headers={PROTOCOL_HEADER: spoken, **self.auth},
                    compression=None,  # lines are small and come fast: not worth the CPU
                    max_size=MAX_FRAME,
                    max_queue=None,  # every frame is taken as it comes
                    create_connection=self._connection,
                    ssl=_tls() if url.startswith("wss:") else None,
                    open_timeout=15.0,
                )
            except InvalidStatus as e:
                status, body = e.response.status_code, _json(e.response.body)
                stated = e.response.headers.get(PROTOCOL_HEADER) or str(UNSTATED)
                if stated != spoken:
                    raise ProtocolMismatch(status, stated) from None
                if status in NO_SOCKET or (status == 403 and not e.response.body):
                    raise SocketUnavailable(status, body) from None
                if status == 429:
                    wait = body.get("retry_after")
                    await asyncio.sleep(float(wait) if isinstance(wait, int | float) else 1.0)
                    continue
                if self.refused(status, body):
                    continue
                if status not in RETRYABLE:
                    raise GatewayError(status, body) from None
                failure: Exception = e
            except InvalidMessage as e:
                if isinstance(e.__cause__, ValueError):  # an answer, but no HTTP/1.1 one
                    raise SocketUnavailable(0, {"error": "no_socket", "message": str(e)}) from e
                failure = e
            except (OSError, TimeoutError, InvalidHandshake) as e:
                failure = e
            else:
                upgraded = ws.response.headers.get(PROTOCOL_HEADER) if ws.response else None
                if (upgraded or str(UNSTATED)) != spoken:
                    await ws.close()
                    raise ProtocolMismatch(101, str(upgraded))
                assert isinstance(ws, _Direct)  # made by self._connection
                return ws
            if attempt >= self.attempts:
                raise SocketLost(f"{self.url} could not be opened: {failure!r}") from failure
            log.debug("%s not opened (%r); trying again", self.url, failure)
            await asyncio.sleep(_backoff(attempt))
            attempt += 1

    # -- reading -------------------------------------------------------------------------------

    async def _read(self) -> None:
        """Wait for each connection to close (its frames are read as they are parsed) and
        open it again after a cut, until the socket ends for good."""
        try:
            while True:
                ws = self._ws
                assert ws is not None  # set before the reader starts, and at each reopening
                await ws.wait_closed()  # its frames are read as they come (_Direct)
                if ws.failure is not None:
                    raise ws.failure
                code, said = ws.close_code or 1006, ws.close_reason or ""
                self._open.clear()
                self._settle(None)  # each move waiting is sent again once it is open again
                if self.closed is not None:
                    raise StreamClosed(self.closed)
                if code in CREDENTIAL_ENDS:
                    raise StreamClosed({"reason": CREDENTIAL_ENDS[code], "message": said})
                if self.finished(code):
                    return
                if 4400 <= code < 4600:  # a hello refused: a socket opened with a header has none
                    raise GatewayError(code - 4000, {"error": "refused", "message": said})
                self.reconnects += 1
                log.info("socket closed (%d %s); opening it again", code, said)
                self._ws = await self._connect()
                self._open.set()
        finally:
            self._open.clear()
            self._settle(None)  # each move waiting finds it over
            self._wake.set()

    async def items(self) -> AsyncGenerator[T, None]:
        """What the socket reads, in order, until it ends; then raises why, if not normally."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("open() the socket first")
        try:
            while True:
                ready = self.ready
                while ready:
                    yield ready.popleft()
                if reader.done():
                    reader.result()  # raises what ended it
                    return
                self._wake.clear()
                if not ready and not reader.done():
                    await self._wake.wait()
        finally:
            await self.aclose()

    async def feed(self, sink: Callable[[T], None]) -> None:
        """Hand what the socket reads to ``sink``, in order, as each frame is read (no queue
        between: the cheapest way to follow many seats), until the socket ends; then raise
        why, if not normally. ``sink`` must not block: it runs in the socket's reader."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("open() the socket first")
        try:
            while self.ready:
                sink(self.ready.popleft())
            self._sink = sink
            await asyncio.wait([reader])
            reader.result()  # raises what ended it
        finally:
            self._sink = None
            await self.aclose()

    def _push(self, item: T) -> None:
        sink = self._sink
        if sink is not None:
            sink(item)
            return
        self.ready.append(item)
        self._wake.set()

    def _answered(self, answer: _Answer) -> None:
        """Hand an answer to the move waiting for it."""
        key = answer.key
        if key is None:
            log.warning("an answer to no move: %s", answer)
            return
        waiting = None
        if answer.match_id is not None and answer.seat is not None:
            waiting = self._waiting.get((answer.match_id, answer.seat, key))
        else:  # an answer that does not say its seat: the one move under that key
            found = [f for (_, _, k), f in self._waiting.items() if k == key]
            waiting = found[0] if len(found) == 1 else None
        if waiting is not None and not waiting.done():
            waiting.set_result(answer)

    def _settle(self, answer: _Answer | None) -> None:
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_result(answer)

    # -- moves -------------------------------------------------------------------------------

    async def move(self, match_id: str, seat: int, move: Move | MoveBody, key: str) -> MoveResult:
        """Send a move up for the seat under its Idempotency-Key and wait for its answer,
        sending it again under the key after a cut, a ``limited`` answer (after its
        ``retry_after``) or a ``timeout``. Raises MoveRejected when the referee refuses it,
        GatewayError for another answer (its status the one POST /moves would have
        answered), SocketLost when it cannot be sent."""
        text = _ENCODER.encode(_MoveUp(key=key, move=move, match_id=match_id, seat=seat))
        loop = asyncio.get_running_loop()
        give_up = loop.time() + MOVE_PATIENCE_S
        attempt = 0
        while True:
            answer = await self._send(match_id, seat, key, text, give_up - loop.time())
            if answer is None:  # cut before its answer came: sent again under its key
                if loop.time() > give_up:
                    raise SocketLost(f"the move under {key!r} could not be sent")
                continue
            if isinstance(answer, _Accepted):
                return MoveResult(version=answer.version, replayed=answer.replayed)
            if isinstance(answer, _Rejected):
                raise MoveRejected(409, answer.body())
            if isinstance(answer, _Limited):
                status, wait = 429, max(0.0, answer.retry_after)
                log.info("move %s: rate limited (%s); waiting %.2f s", key, answer.limit, wait)
            elif isinstance(answer, _TimedOut):
                status, wait = 504, _backoff(attempt)
            elif isinstance(answer, _Error):
                status, wait = _ERROR_STATUS.get(answer.error, 400), _backoff(attempt)
            else:
                status, wait = 400, 0.0
            if attempt >= self.retries or (status != 429 and status not in RETRYABLE):
                raise GatewayError(status, answer.body())
            await asyncio.sleep(wait)
            attempt += 1

    async def _send(
        self, match_id: str, seat: int, key: str, text: bytes, patience: float
    ) -> _Answer | None:
        """Send one move frame once the socket is open; its answer, or None if it was cut
        before one came."""
        if not self._open.is_set():
            if self.over:
                raise self._gone()
            try:
                await asyncio.wait_for(self._open.wait(), max(0.0, patience))
            except TimeoutError:
                raise SocketLost(f"the move under {key!r} could not be sent") from None
        ws = self._ws
        if ws is None or self.over:
            raise self._gone()
        waiting: asyncio.Future[_Answer | None] = asyncio.get_running_loop().create_future()
        self._waiting[(match_id, seat, key)] = waiting
        try:
            try:
                await ws.send(text, text=True)
            except ConnectionClosed:  # before the reader has seen it: wait for it to reopen
                if ws is self._ws:
                    self._open.clear()
                return None
            return await waiting  # settled by the reader if it ends first
        finally:
            self._waiting.pop((match_id, seat, key), None)

    def _gone(self) -> GatewayError:
        """Why a move cannot be sent on a socket that has ended."""
        if self.closed is not None:
            return StreamClosed(self.closed)
        message = "the socket has closed: its match is over, or it ended for good"
        return GatewayError(410, {"error": "socket_closed", "message": message})

    async def aclose(self) -> None:
        """Close the socket and stop reading it."""
        reader = self._reader
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait([reader])  # never raises: what ended it was said by items()
        if reader is not None and not reader.cancelled():
            reader.exception()  # retrieved: it was raised to the reader of items(), or moot
        self._settle(None)
        if self._ws is not None:
            await self._ws.close()


class SeatSocket(_Socket[Line]):
    """One seat's socket: its lines, in order, until the match ends (close 1000), resumed with
    ``?after=`` the last id read; its moves up. ``everything`` False: of the events only the
    ends of rounds and of the match and timeouts are decoded and read (``events=minimal``)."""

    def __init__(
        self,
        url: str,
        match_id: str,
        seat: int,
        auth: dict[str, str],
        *,
        after: int | None,
        everything: bool,
        attempts: int,
        retries: int,
    ) -> None:
        path = f"/api/v1/matches/{match_id}/seats/{seat}/socket"
        super().__init__(url, path, auth, attempts=attempts, retries=retries)
        self.match_id = match_id
        self.seat = seat
        self.last_id = after  # the id of the last line read: where a reopening resumes
        self.everything = everything

    def query(self) -> dict[str, str]:
        return {} if self.last_id is None else {"after": str(self.last_id)}

    def finished(self, code: int) -> bool:
        return code == MATCH_OVER

    def frame(self, data: bytes) -> None:
        try:
            down = _DOWN.decode(data)
        except msgspec.ValidationError:
            self._loose(data)
            return
        if isinstance(down, _LineFrame):
            line = down.line
            self.last_id = line.id
            if isinstance(line, _EventOnWire):
                if self.everything or _essential(line.event):
                    self._push(EventLine(id=line.id, event=decode_event(line.event)))
                return
            self._push(line)
        elif isinstance(down, _Answer):
            self._answered(down)
        elif isinstance(down, _Closed):
            self.closed = {"reason": down.reason, "message": down.message}

    def _loose(self, data: bytes) -> None:
        """A frame of a type this SDK does not know is skipped, a line of one too (its id
        kept); one of a type it knows, but of the wrong shape, raises ValidationError."""
        loose = _LOOSE.decode(data)
        if loose.type == "line":
            line = bytes(loose.line)
            self.last_id = _ID.decode(line).id or self.last_id
            decode_line(line)  # raises for a known line of the wrong shape
        elif loose.type in DOWN_TYPES:
            _DOWN.decode(data)  # raises, saying what is wrong


AccountItem = SeenAccountEvent | PlayLine
"""What the account's socket reads: an event of the account, or a line of one of its seats."""


class AccountSocket(_Socket[AccountItem]):
    """The account's socket: the account's events and every line of every seat it holds, under
    one cursor, resumed with ``?cursor=`` the last one read; the moves of all its seats up."""

    def __init__(
        self,
        url: str,
        auth: dict[str, str],
        *,
        everything: bool,
        attempts: int,
        retries: int,
    ) -> None:
        super().__init__(url, "/api/v1/account/socket", auth, attempts=attempts, retries=retries)
        self.cursor: str | None = None  # the cursor of the last frame read
        self.everything = everything

    def query(self) -> dict[str, str]:
        query = {} if self.everything else {"events": "minimal"}
        if self.cursor is not None:
            query["cursor"] = self.cursor
        return query

    def refused(self, status: int, body: dict[str, Any]) -> bool:
        if status == 400 and body.get("error") == "bad_cursor" and self.cursor is not None:
            log.warning("the gateway refused the cursor %r; starting afresh", self.cursor)
            self.cursor = None  # a fresh start: the state, and a snapshot of every live seat
            return True
        return False

    def frame(self, data: bytes) -> None:
        try:
            down = _DOWN.decode(data)
        except msgspec.ValidationError:
            self._loose(data)
            return
        if isinstance(down, _LineFrame):
            if down.cursor is not None:
                self.cursor = down.cursor
            line = down.line
            if isinstance(line, _EventOnWire):
                if not (self.everything or _essential(line.event)):
                    return
                seen: Line = EventLine(id=line.id, event=decode_event(line.event))
            else:
                seen = line
            self._push(PlayLine(match_id=down.match_id, seat=down.seat, line=seen))
        elif isinstance(down, _AccountFrame):
            if down.cursor is not None:
                self.cursor = down.cursor
            self._push(decode_account_event(bytes(down.line)))
        elif isinstance(down, _Answer):
            self._answered(down)
        elif isinstance(down, _Closed):
            self.closed = {"reason": down.reason, "message": down.message}

    def _loose(self, data: bytes) -> None:
        """As :meth:`SeatSocket._loose`, keeping the frame's cursor."""
        loose = _LOOSE.decode(data)
        if loose.cursor is not None:
            self.cursor = loose.cursor
        if loose.type == "line":
            decode_line(bytes(loose.line))  # raises for a known line of the wrong shape
        elif loose.type in DOWN_TYPES:
            _DOWN.decode(data)


def fall_back(transport: Transport, error: SocketUnavailable, what: str) -> None:
    """Log that ``what`` is played over HTTP as the socket is not there; raise ``error`` if
    the socket was asked for."""
    if transport == "socket":
        raise error
    log.info("%s: no socket (%s); playing over HTTP", what, error.status)
