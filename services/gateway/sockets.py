"""The seat's socket: one WebSocket that carries a seat's stream down and its moves up.

``GET /api/v1/matches/{match_id}/seats/{seat}/socket``, upgraded (docs/protocol.md, "Socket").
The handshake is checked as the seat's stream is opened — the protocol's version, the token,
the resume point, the stream's places per address and per seat, the match's feed — and any
refusal is the HTTP answer to the handshake, the same JSON the stream would have answered. A
handshake without a token (a browser cannot set the header) is accepted to wait a few
seconds for a ``hello`` frame carrying it (:class:`Hello`), then checked the same way, a
refusal closing it with 4000 + the status. Once accepted:

- down, each line of the seat's stream (the hub's own subscriber and framing: the socket never
  makes a view of its own, C8), one JSON text frame each, wrapped with its match and seat
  (``SocketLine``); resumed with ``?after=N`` as the stream is;
- up, moves (``MoveFrame``), each played by the gateway's one move function
  (``Gateway.play_move``: the same limits, idempotency and outcomes as POST /moves) and
  answered with an outcome frame under its key; a frame that is not a move gets a typed error
  frame, and the socket stays open. Frames are read one at a time, so a flood waits in the
  connection rather than in the gateway, and every frame is counted against the seat's moves
  limit: past it, each is answered with a ``limited`` frame;
- the socket is closed with a code of its own for each reason (:data:`CLOSE_CODES`): the
  match's end (1000, after its last lines), its credential's end (after the stream's closing
  line), a client that does not read (its queue over DOMINO_GATEWAY_STREAM_BUFFER_BYTES), and
  the gateway ending the seat's stream before the match ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
import structlog
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway import versions
from services.gateway.config import GatewaySettings
from services.gateway.credentials import Binding, Credential, Credentials, closed_line
from services.gateway.http import ApiError, Request, Response
from services.gateway.hub import Feed, Hub, Outcome
from services.gateway.limits import Charge, LimitExceeded
from services.gateway.moves import TIMED_OUT, move_key
from services.gateway.protocol import (
    MoveAccepted,
    MoveLimited,
    MoveRejected,
    MoveTimedOut,
    SocketError,
)
from services.gateway.socket_common import (
    CLOSE_CODES,
    CUT_WAIT_S,
    HELLO_S,
    MATCH_OVER,
    frame_limit,
    handshake,
    hello_token,
    read_frames,
)
from services.gateway.subscribers import Subscriber, Watch
from services.metrics import GATEWAY_OPEN_STREAMS
from services.redis.connection import Client

log = structlog.get_logger()

__all__ = ["CLOSE_CODES", "HELLO_S", "MATCH_OVER", "SeatSockets", "frame_limit"]

CLOSE_REASONS = {
    "too_slow": "the client did not read: its frames went over the gateway's buffer; "
    "reconnect with ?after=<the last id read>",
    "resume": "the gateway ended the seat's stream before the match ended; reconnect with "
    "?after=<the last id read>",
}
_ENCODER = msgspec.json.Encoder()
OPEN_SOCKETS = GATEWAY_OPEN_STREAMS.labels("socket")
"""The seats' sockets open now, in the metrics."""


class _Up(msgspec.Struct, frozen=True, kw_only=True):
    """A frame as it is first read: its type, and a move's fields, the move left as JSON for
    the move function to read as POST /moves reads its body."""

    type: str
    key: Any = None
    move: msgspec.Raw = msgspec.Raw()  # empty: the frame has none
    match_id: Any = None
    seat: Any = None


_UP = msgspec.json.Decoder(_Up)


class Host(Protocol):
    """What the socket needs of the gateway (services/gateway/commands.py's Gateway)."""

    config: GatewaySettings

    @property
    def redis(self) -> Client: ...
    @property
    def hub(self) -> Hub: ...
    @property
    def credentials(self) -> Credentials: ...
    def match_id_of(self, request: Request) -> str: ...
    async def authorize(self, request: Request, match_id: str, seat: int) -> Credential: ...
    def resume_point(self, request: Request) -> int | None: ...
    async def feed_from(self, match_id: str, after: int | None) -> Feed: ...
    async def seat_places(
        self, request: Request, match_id: str, seat: int
    ) -> Callable[[], None]: ...
    def move_charge(self, match_id: str, seat: int) -> Charge: ...
    async def play_move(
        self, match_id: str, seat: int, key: str, raw: bytes, charge: Charge
    ) -> Outcome: ...


class SeatSockets:
    """The handlers of the seat's socket route: the upgrade, and a GET without one."""

    def __init__(self, gw: Host) -> None:
        self.gw = gw

    def app(self, route: str) -> ASGIApp:
        """The ASGI app of the socket's handshake: :meth:`open`, counted under ``route``."""
        return handshake(self.open, route)

    async def upgrade_required(self, request: Request) -> Response:
        """GET .../socket without the WebSocket upgrade: what the handshake would refuse is
        refused alike (its token, its resume point), the rest 426, naming the upgrade."""
        gw = self.gw
        match_id = gw.match_id_of(request)
        await gw.authorize(request, match_id, request.params["seat"])
        gw.resume_point(request)
        raise ApiError(
            426,
            "upgrade_required",
            "this is a WebSocket: connect with ws:// (Upgrade: websocket); the seat's stream "
            "over HTTP is .../stream",
        )

    async def open(self, request: Request) -> SeatSocket | Hello:
        """The handshake of GET .../socket: checked as the seat's stream is opened; any
        refusal is its HTTP answer (ApiError, LimitExceeded). A handshake without a token is
        accepted to wait for its ``hello`` frame (:class:`Hello`)."""
        refused = versions.refusal(request.scope)
        if refused is not None:
            raise refused
        match_id = self.gw.match_id_of(request)
        self.gw.resume_point(request)  # a resume point that is none is refused at once
        if request.header(b"authorization") is None:
            return Hello(self, request, match_id)
        return await self.checked(request, match_id)

    async def checked(self, request: Request, match_id: str) -> SeatSocket:
        """The socket of a request whose token opens its seat, its places taken and its
        stream subscribed; ApiError or LimitExceeded when the seat's stream would be refused."""
        gw = self.gw
        seat: int = request.params["seat"]
        credential = await gw.authorize(request, match_id, seat)
        after = gw.resume_point(request)
        release = await gw.seat_places(request, match_id, seat)
        try:
            hub = gw.hub
            feed = await gw.feed_from(match_id, after)
            waker = Watch()
            sub, version = hub.subscribe(feed, seat, False, after, waker=waker)
            first = [] if after is None else await hub.backlog(feed, sub, after, version)
        except BaseException:
            release()
            raise
        log.debug("socket opened", match_id=match_id, seat=seat, after=after)
        return SeatSocket(gw, feed, sub, waker, first, release, credential, seat)


class Hello:
    """A socket opened without a token (a browser's: its WebSocket cannot set a header):
    accepted, it must send ``{"type": "hello", "token": ...}`` first, within
    :data:`HELLO_S`; then it is checked as a handshake with that token is. A refusal is an
    error frame (or a limited frame), then the close code 4000 + the status the handshake
    would have been answered (4401 unauthorized, 4403, 4429, ...; 4408 no hello in time)."""

    def __init__(self, sockets: SeatSockets, request: Request, match_id: str) -> None:
        self.sockets = sockets
        self.request = request
        self.match_id = match_id
        self.seat: int = request.params["seat"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept", "headers": [versions.STATED]})
        try:
            message = await asyncio.wait_for(receive(), HELLO_S)
        except TimeoutError:
            late = f"send the hello frame within {HELLO_S} s"
            await self._refuse(send, 408, "hello_timeout", late)
            return
        if message["type"] != "websocket.receive":
            return  # gone
        token = hello_token(message.get("text"))
        if token is None:
            await self._refuse(
                send, 400, "hello_expected", 'the first frame is {"type": "hello", "token": ...}'
            )
            return
        headers = [*self.request.scope["headers"], (b"authorization", b"Bearer " + token)]
        request = Request({**self.request.scope, "headers": headers}, receive)
        try:
            socket = await self.sockets.checked(request, self.match_id)
        except ApiError as e:
            await self._refuse(send, e.status, e.code, str(e))
            return
        except LimitExceeded as e:
            frame = MoveLimited(
                match_id=self.match_id,
                seat=self.seat,
                key=None,
                limit=e.limit,
                retry_after=e.retry_after,
                message=str(e),
            )
            await send({"type": "websocket.send", "text": _ENCODER.encode(frame).decode()})
            await send({"type": "websocket.close", "code": 4429})
            return
        except RedisError:
            await self._refuse(send, 503, "unavailable", "the store is unavailable; retry")
            return
        await socket.serve(send, receive)

    async def _refuse(self, send: Send, status: int, error: str, message: str) -> None:
        frame = SocketError(match_id=self.match_id, seat=self.seat, error=error, message=message)
        await send({"type": "websocket.send", "text": _ENCODER.encode(frame).decode()})
        await send({"type": "websocket.close", "code": 4000 + status})


class SeatSocket:
    """One accepted socket of one seat: writes the seat's lines, reads and plays its moves."""

    def __init__(
        self,
        gw: Host,
        feed: Feed,
        sub: Subscriber,
        waker: Watch,
        first: list[bytes],
        release: Callable[[], None],
        credential: Credential,
        seat: int,
    ) -> None:
        self.gw = gw
        self.feed = feed
        self.sub = sub
        self.waker = waker
        self.first = first
        self.release = release
        self.credential = credential
        self.match_id = feed.match_id
        self.seat = seat
        self.head = b'{"type":"line","match_id":"%s","seat":%d,"line":' % (
            feed.match_id.encode(),
            seat,
        )
        self.ended: str | None = None  # the credential's end, once told
        self.binding: Binding | None = None
        self.limited_until = 0.0  # frames before this (loop time) are answered limited at once
        self.last_limit: LimitExceeded | None = None
        self._done = False
        self.counted = False  # in the open sockets' gauge

    # -- the connection --------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if (await receive())["type"] != "websocket.connect":
                return
            await send({"type": "websocket.accept", "headers": [versions.STATED]})
        except BaseException:
            self._end()
            raise
        await self.serve(send, receive)

    async def serve(self, send: Send, receive: Receive) -> None:
        """Carry the accepted socket until it ends: lines down, moves up; then free it."""
        self.send = send
        try:
            OPEN_SOCKETS.inc()
            self.counted = True
            self.binding = self.gw.credentials.bind(self.credential, self._credential_ended)
            writer = asyncio.create_task(self._write())
            reader = asyncio.create_task(self._read(receive))
            cut = asyncio.create_task(self.waker.cut.wait())
            tasks = {writer, reader, cut}
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            if cut in done and writer not in done:
                self._end()  # its places and its subscriber free before the close is tried
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._close("too_slow"), CUT_WAIT_S)
            elif writer in done and not isinstance(writer.exception(), OSError | None):
                log.error("socket writer failed", error=repr(writer.exception()))
        except OSError:
            pass  # the client went away
        finally:
            self._end()

    def _end(self) -> None:
        """Free what the socket holds: its subscriber, its places, its binding (once)."""
        if self._done:
            return
        self._done = True
        if self.counted:
            OPEN_SOCKETS.dec()
        if self.binding is not None:
            self.gw.credentials.unbind(self.binding)
        self.gw.hub.unsubscribe(self.feed, self.sub)
        self.release()

    def _credential_ended(self, reason: str) -> None:
        """The credential the socket was opened with ended: nothing more of the match is sent,
        only the closing line; then the socket is closed with the reason's code."""
        self.ended = reason
        self.first = []
        self.sub.chunks.clear()
        self.sub.size = 0
        self.sub.finish()

    async def _text(self, data: bytes) -> None:
        await self.send({"type": "websocket.send", "text": data.decode()})

    async def _close(self, reason: str) -> None:
        code = CLOSE_CODES.get(reason, MATCH_OVER)
        await self.send(
            {"type": "websocket.close", "code": code, "reason": CLOSE_REASONS.get(reason, "")}
        )

    # -- down ------------------------------------------------------------------------------

    async def _write(self) -> None:
        """The backlog, then the seat's lines as they come, one frame each; then the close
        that says why they ended."""
        sub, head = self.sub, self.head
        for chunk in self.first:
            for line in chunk.split(b"\n"):
                if line and self.ended is None:
                    await self._text(head + line + b"}")
        self.first = []
        while True:
            data = sub.drain()  # before waiting: the wake of lines just sent may have been
            if data is None:  # the one that told of their end too
                break
            if not data:
                await self.waker.wait(self.gw.config.keepalive_s)
                continue
            for line in data.split(b"\n"):
                if line and self.ended is None:
                    await self._text(head + line + b"}")
        if self.ended is not None:
            await self._text(closed_line(self.ended, False).rstrip(b"\n"))
            await self._close(self.ended)
        elif sub.overflow:
            await self._close("too_slow")
        elif self.feed.over:
            await self.send({"type": "websocket.close", "code": MATCH_OVER, "reason": "match over"})
        else:
            await self._close("resume")

    # -- up --------------------------------------------------------------------------------

    async def _read(self, receive: Receive) -> None:
        """Frames from the client, one at a time, until it goes away."""
        await read_frames(
            receive, self.gw.config.max_body_bytes, self._frame, self._answer, self._failed
        )

    async def _failed(self, e: Exception) -> None:
        """A frame whose handling failed, as a request's 500: said in the log, answered."""
        log.error("socket frame failed", match_id=self.match_id, error=repr(e)[:300])
        await self._send(
            SocketError(
                match_id=self.match_id,
                seat=self.seat,
                error="internal",
                message="the gateway failed; try again",
            )
        )

    async def _frame(self, data: bytes) -> None:
        """Act on one frame: play a move, or say why not."""
        try:
            up = _UP.decode(data)
        except msgspec.ValidationError:
            await self._answer(None, "bad_frame", "a frame is a JSON object with a string type")
            return
        except msgspec.DecodeError as e:
            await self._answer(None, "bad_json", f"the frame is not valid JSON: {e}")
            return
        key = up.key if isinstance(up.key, str) else None
        if up.type != "move":
            await self._answer(key, "unknown_type", f"no frame of type {up.type[:40]!r}: move")
            return
        if up.match_id is not None and up.match_id != self.match_id:
            await self._answer(key, "wrong_match", "this socket plays another match")
            return
        if up.seat is not None and (type(up.seat) is not int or up.seat != self.seat):
            # a seat is a whole number: false, 0.0 or "0" is no seat 0
            message = f"this socket plays seat {self.seat}, not seat {str(up.seat)[:8]}"
            await self._answer(key, "wrong_seat", message)
            return
        if not up.move:
            await self._answer(key, "invalid_frame", "a move frame has a move: {...}")
            return
        gw = self.gw
        charge = gw.move_charge(self.match_id, self.seat)
        try:
            if self._still_limited():
                raise self._limit()
            try:
                checked = move_key(key)
            except ApiError:
                await charge.hit(gw.redis)
                raise
            outcome = await gw.play_move(self.match_id, self.seat, checked, bytes(up.move), charge)
        except ApiError as e:
            await self._send(
                SocketError(
                    match_id=self.match_id, seat=self.seat, error=e.code, message=str(e), key=key
                )
            )
            return
        except LimitExceeded as e:
            await self._limited(key, e)
            return
        except RedisError:
            await self._answer(key, "unavailable", "the store is unavailable; retry")
            return
        m, s, r = self.match_id, self.seat, outcome.rejection
        if r is not None:
            rejected = MoveRejected(
                match_id=m, seat=s, key=checked, reason=r.reason, rule=r.rule, message=r.message
            )
            await self._send(rejected)
        elif outcome.version is None:
            await self._send(MoveTimedOut(match_id=m, seat=s, key=checked, message=TIMED_OUT))
        else:
            version, replayed = outcome.version, outcome.replayed
            accepted = MoveAccepted(
                match_id=m, seat=s, key=checked, version=version, replayed=replayed
            )
            await self._send(accepted)

    async def _answer(self, key: str | None, error: str, message: str) -> None:
        """An error frame for a frame that is no move, counted as a move is (a flood of them
        is answered ``limited``)."""
        try:
            if self._still_limited():
                raise self._limit()
            await self.gw.move_charge(self.match_id, self.seat).hit(self.gw.redis)
        except LimitExceeded as e:
            await self._limited(key, e)
            return
        except RedisError:
            error, message = "unavailable", "the store is unavailable; retry"
        m, s = self.match_id, self.seat
        await self._send(SocketError(match_id=m, seat=s, error=error, message=message, key=key))

    def _still_limited(self) -> bool:
        return asyncio.get_running_loop().time() < self.limited_until

    def _limit(self) -> LimitExceeded:
        """The last limit the socket went over, its wait counted down: frames that come while
        it lasts are answered without asking Redis."""
        last = self.last_limit
        assert last is not None  # set with limited_until
        return last

    async def _limited(self, key: str | None, e: LimitExceeded) -> None:
        now = asyncio.get_running_loop().time()
        if e is not self.last_limit:
            self.last_limit = e
            self.limited_until = now + e.retry_after
        left = max(0.001, round(self.limited_until - now, 3))
        await self._send(
            MoveLimited(
                match_id=self.match_id,
                seat=self.seat,
                key=key,
                limit=e.limit,
                retry_after=left,
                message=str(e),
            )
        )

    async def _send(self, frame: Any) -> None:
        await self._text(_ENCODER.encode(frame))
