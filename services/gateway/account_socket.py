"""The account's socket: the account channel down, the moves of every seat it holds up.

``GET /api/v1/account/socket``, upgraded (docs/protocol.md, "The account channel"). The
handshake is checked as the account stream is opened — the protocol's version, the account
token, the cursor, one of the account's stream places and one of its address's — and any
refusal is the HTTP answer to the handshake. A handshake without a token is accepted to wait
for its ``hello`` frame, as the seat's socket is (a refusal then closes it with 4000 + the
status). Once accepted:

- down, the channel's frames (services/gateway/channel.py), one text frame each, each under
  its cursor; a reconnect with the last cursor read gets exactly the frames it missed;
- up, moves (``AccountMoveFrame``) for any seat the account holds, each played by the
  gateway's one move function (``Gateway.play_move``: the limits, idempotency and outcomes of
  POST /moves) and answered under its key; a frame that is no move, or names a seat the
  account does not hold, gets a typed error frame, counted against the account's moves;
- closed with a code of its own for each reason: the credential's end (4001-4005, after the
  closing frame), a client that does not read (4008), and the gateway ending the channel
  (4010: resume with the last cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
import structlog
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway import versions
from services.gateway.channel import Channel, Ended, StreamHost, open_channel, request_cursor
from services.gateway.channel_wire import ChannelError, ChannelLimited
from services.gateway.credentials import Binding, Credential, closed_line
from services.gateway.http import ApiError, Request, Response
from services.gateway.hub import Outcome
from services.gateway.limits import Charge, LimitExceeded, RateLimit
from services.gateway.moves import TIMED_OUT, move_key
from services.gateway.protocol import MoveAccepted, MoveRejected, MoveTimedOut
from services.gateway.socket_common import (
    CLOSE_CODES,
    CUT_WAIT_S,
    HELLO_S,
    handshake,
    hello_token,
    read_frames,
)
from services.lobby.accounts import Account
from services.metrics import GATEWAY_OPEN_STREAMS
from services.redis.connection import Client

log = structlog.get_logger()

CLOSE_REASONS = {
    "too_slow": "the client did not read: its frames went over the gateway's buffer; "
    "reconnect with ?cursor=<the last cursor read>",
    "resume": "the gateway ended the account's channel; reconnect with ?cursor=<the last "
    "cursor read>",
}
HELD_KEPT = 256
"""The most matches whose seats a socket remembers the account holds."""
_ENCODER = msgspec.json.Encoder()
OPEN_SOCKETS = GATEWAY_OPEN_STREAMS.labels("account_socket")
"""The accounts' sockets open now, in the metrics."""


class _Up(msgspec.Struct, frozen=True, kw_only=True):
    """A frame as it is first read: its type, and a move's fields, the move left as JSON for
    the move function to read as POST /moves reads its body."""

    type: str
    key: Any = None
    move: msgspec.Raw = msgspec.Raw()  # empty: the frame has none
    match_id: Any = None
    seat: Any = None


_UP = msgspec.json.Decoder(_Up)


class Host(StreamHost, Protocol):
    """What the account socket needs of the gateway (services/gateway/commands.py's Gateway)."""

    moves: RateLimit

    @property
    def redis(self) -> Client: ...
    def move_charge(self, match_id: str, seat: int) -> Charge: ...
    async def play_move(
        self, match_id: str, seat: int, key: str, raw: bytes, charge: Charge
    ) -> Outcome: ...


class AccountSockets:
    """The handlers of the account socket's route: the upgrade, and a GET without one."""

    def __init__(self, gw: Host) -> None:
        self.gw = gw

    def app(self, route: str) -> ASGIApp:
        """The ASGI app of the socket's handshake: :meth:`open`, counted under ``route``."""
        return handshake(self.open, route)

    async def upgrade_required(self, request: Request) -> Response:
        """GET /account/socket without the upgrade: its token and cursor are checked as the
        handshake's would be, the rest 426, naming the upgrade."""
        await self.gw.account(request)
        request_cursor(request, self.gw.config)
        self.gw.wants_everything(request)
        raise ApiError(
            426,
            "upgrade_required",
            "this is a WebSocket: connect with ws:// (Upgrade: websocket); the account channel "
            "over HTTP is /account/stream?play=1",
        )

    async def open(self, request: Request) -> AccountSocket | AccountHello:
        """The handshake: checked as the account stream with ``play=1`` is opened; any
        refusal is its HTTP answer. Without a token it waits for its ``hello`` frame."""
        refused = versions.refusal(request.scope)
        if refused is not None:
            raise refused
        request_cursor(request, self.gw.config)  # a malformed cursor is refused at once
        self.gw.wants_everything(request)
        if request.header(b"authorization") is None:
            return AccountHello(self, request)
        return await self.checked(request)

    async def checked(self, request: Request) -> AccountSocket:
        """The socket of a request whose account token is good, its places taken and its
        channel open at its cursor; ApiError or LimitExceeded when it would be refused."""
        gw = self.gw
        account = await gw.account(request)
        credential = gw.account_credential(request, account)
        cursor = request_cursor(request, self.gw.config)
        everything = gw.wants_everything(request)
        channel, close = await open_channel(gw, request, account, cursor, everything)
        log.debug("account socket opened", account=account.id, resumed=cursor is not None)
        return AccountSocket(gw, account, channel, close, credential)


class AccountHello:
    """An account socket opened without a token: accepted, it must send
    ``{"type": "hello", "token": ...}`` first, within :data:`HELLO_S`; then it is checked as
    a handshake with that token is, a refusal an error frame and the close 4000 + status."""

    def __init__(self, sockets: AccountSockets, request: Request) -> None:
        self.sockets = sockets
        self.request = request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept", "headers": [versions.STATED]})
        try:
            message = await asyncio.wait_for(receive(), HELLO_S)
        except TimeoutError:
            late = f"send the hello frame within {HELLO_S} s"
            await _refuse(send, 408, "hello_timeout", late)
            return
        if message["type"] != "websocket.receive":
            return  # gone
        token = hello_token(message.get("text"))
        if token is None:
            await _refuse(
                send, 400, "hello_expected", 'the first frame is {"type": "hello", "token": ...}'
            )
            return
        headers = [*self.request.scope["headers"], (b"authorization", b"Bearer " + token)]
        request = Request({**self.request.scope, "headers": headers}, receive)
        try:
            socket = await self.sockets.checked(request)
        except ApiError as e:
            await _refuse(send, e.status, e.code, str(e))
            return
        except LimitExceeded as e:
            await _refuse(send, 429, "rate_limited", str(e))
            return
        except RedisError:
            await _refuse(send, 503, "unavailable", "the store is unavailable; retry")
            return
        await socket.serve(send, receive)


async def _refuse(send: Send, status: int, error: str, message: str) -> None:
    frame = ChannelError(error=error, message=message)
    await send({"type": "websocket.send", "text": _ENCODER.encode(frame).decode()})
    await send({"type": "websocket.close", "code": 4000 + status})


class AccountSocket:
    """One accepted account socket: writes the channel's frames, reads and plays moves."""

    def __init__(
        self,
        gw: Host,
        account: Account,
        channel: Channel,
        close: Callable[[], Awaitable[None]],
        credential: Credential,
    ) -> None:
        self.gw = gw
        self.account = account
        self.channel = channel
        self.close = close
        self.credential = credential
        self.ended: str | None = None  # the credential's end, once told
        self.binding: Binding | None = None
        self.held: dict[str, list[int]] = {}  # match -> the seats the account holds in it
        self.limits: dict[str, tuple[float, LimitExceeded]] = {}  # subject -> until, why
        self.counted = False
        self._done = False
        self.send: Send | None = None

    # -- the connection --------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if (await receive())["type"] != "websocket.connect":
                await self._end()
                return
            await send({"type": "websocket.accept", "headers": [versions.STATED]})
        except BaseException:
            await self._end()
            raise
        await self.serve(send, receive)

    async def serve(self, send: Send, receive: Receive) -> None:
        """Carry the accepted socket until it ends: frames down, moves up; then free it."""
        self.send = send
        try:
            OPEN_SOCKETS.inc()
            self.counted = True
            self.binding = self.gw.credentials.bind(self.credential, self._credential_ended)
            writer = asyncio.create_task(self._write())
            reader = asyncio.create_task(self._read(receive))
            cut = asyncio.create_task(self.channel.waker.cut.wait())
            tasks = {writer, reader, cut}
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            if cut in done and writer not in done:
                await self._end()  # its places and its subscribers free before the close
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._close("too_slow"), CUT_WAIT_S)
            elif writer in done and not isinstance(writer.exception(), OSError | None):
                log.error("account socket writer failed", error=repr(writer.exception()))
        except OSError:
            pass  # the client went away
        finally:
            await self._end()

    async def _end(self) -> None:
        """Free what the socket holds: its channel, its places, its binding (once)."""
        if self._done:
            return
        self._done = True
        if self.counted:
            OPEN_SOCKETS.dec()
        if self.binding is not None:
            self.gw.credentials.unbind(self.binding)
        self.channel.close()
        await self.close()

    def _credential_ended(self, reason: str) -> None:
        """The credential ended: nothing more is sent but the closing frame, then the close
        with the reason's code."""
        self.ended = reason
        self.channel.waker.poke()

    async def _text(self, data: bytes) -> None:
        assert self.send is not None  # set by serve before any frame is written
        await self.send({"type": "websocket.send", "text": data.decode()})

    async def _close(self, reason: str) -> None:
        assert self.send is not None
        code = CLOSE_CODES.get(reason, CLOSE_CODES["resume"])
        await self.send(
            {"type": "websocket.close", "code": code, "reason": CLOSE_REASONS.get(reason, "")}
        )

    # -- down ------------------------------------------------------------------------------

    async def _write(self) -> None:
        """The channel's frames as they come, one text frame each; then the close that says
        why they ended."""
        channel, keepalive = self.channel, self.gw.config.keepalive_s
        reason = "resume"
        while self._ending() is None:
            try:
                frames = await channel.frames(keepalive)
            except Ended as e:
                reason = e.reason
                break
            for _, _, data in frames:
                if self._ending() is not None:
                    break  # nothing more after a credential's end but its closing frame
                await self._text(data)
        ended = self._ending()
        if ended is not None:
            await self._text(closed_line(ended, False).rstrip(b"\n"))
            reason = ended
        await self._close(reason)

    def _ending(self) -> str | None:
        """The credential's end, once told (it is told while the writer waits)."""
        return self.ended

    # -- up --------------------------------------------------------------------------------

    async def _read(self, receive: Receive) -> None:
        """Frames from the client, one at a time, until it goes away."""
        await read_frames(
            receive, self.gw.config.max_body_bytes, self._frame, self._answer, self._failed
        )

    async def _failed(self, e: Exception) -> None:
        """A frame whose handling failed, as a request's 500: said in the log, answered."""
        log.error("account socket frame failed", error=repr(e)[:300])
        await self._send(ChannelError(error="internal", message="the gateway failed"))

    async def _frame(self, data: bytes) -> None:
        """Act on one frame: play a move for a seat the account holds, or say why not."""
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
        match_id, seat = up.match_id, up.seat
        if not isinstance(match_id, str) or len(match_id) > 64 or type(seat) is not int:
            # a seat is a whole number: false, 0.0 or "0" is no seat 0
            message = "a move frame names its match_id (a string) and seat (a whole number)"
            await self._answer(key, "invalid_frame", message)
            return
        if not up.move:
            await self._answer(key, "invalid_frame", "a move frame has a move: {...}")
            return
        if seat not in await self._held(match_id):
            message = f"your account does not hold seat {seat} of match {match_id!r}"
            await self._answer(key, "not_your_seat", message)
            return
        await self._play(key, match_id, seat, bytes(up.move))

    async def _held(self, match_id: str) -> list[int]:
        """The seats of ``match_id`` the account holds (they never change once taken)."""
        seats = self.held.get(match_id)
        if seats is None:
            seats = await self.gw.seats_of(self.account, match_id)
            if len(self.held) >= HELD_KEPT:
                self.held.clear()
            if seats:  # a match not found now may be one being created: not remembered
                self.held[match_id] = seats
        return seats

    async def _play(self, key: str | None, match_id: str, seat: int, raw: bytes) -> None:
        gw = self.gw
        charge = gw.move_charge(match_id, seat)
        m, s = match_id, seat
        try:
            self._still_limited(charge.subject)
            try:
                checked = move_key(key)
            except ApiError:
                await charge.hit(gw.redis)
                raise
            outcome = await gw.play_move(match_id, seat, checked, raw, charge)
        except ApiError as e:
            await self._send(
                ChannelError(error=e.code, message=str(e), key=key, match_id=m, seat=s)
            )
            return
        except LimitExceeded as e:
            await self._limited(charge.subject, key, e, m, s)
            return
        except RedisError:
            await self._send(
                ChannelError(
                    error="unavailable",
                    message="the store is unavailable; retry",
                    key=key,
                    match_id=m,
                    seat=s,
                )
            )
            return
        r = outcome.rejection
        if r is not None:
            await self._send(
                MoveRejected(
                    match_id=m, seat=s, key=checked, reason=r.reason, rule=r.rule, message=r.message
                )
            )
        elif outcome.version is None:
            await self._send(MoveTimedOut(match_id=m, seat=s, key=checked, message=TIMED_OUT))
        else:
            await self._send(
                MoveAccepted(
                    match_id=m,
                    seat=s,
                    key=checked,
                    version=outcome.version,
                    replayed=outcome.replayed,
                )
            )

    async def _answer(self, key: str | None, error: str, message: str) -> None:
        """An error frame for a frame that plays nothing, counted against the account's moves
        (a flood of them is answered ``limited``)."""
        charge = Charge(self.gw.moves, f"account:{self.account.id}")
        try:
            self._still_limited(charge.subject)
            await charge.hit(self.gw.redis)
        except LimitExceeded as e:
            await self._limited(charge.subject, key, e, None, None)
            return
        except RedisError:
            error, message = "unavailable", "the store is unavailable; retry"
        await self._send(ChannelError(error=error, message=message, key=key))

    def _still_limited(self, subject: str) -> None:
        """Raise the last limit ``subject`` went over while its wait lasts: frames that come
        meanwhile are answered without asking Redis."""
        held = self.limits.get(subject)
        if held is not None:
            if asyncio.get_running_loop().time() < held[0]:
                raise held[1]
            del self.limits[subject]

    async def _limited(
        self,
        subject: str,
        key: str | None,
        e: LimitExceeded,
        match_id: str | None,
        seat: int | None,
    ) -> None:
        now = asyncio.get_running_loop().time()
        held = self.limits.get(subject)
        if held is None or held[1] is not e:
            if len(self.limits) >= HELD_KEPT:
                self.limits.clear()
            held = self.limits[subject] = (now + e.retry_after, e)
        left = max(0.001, round(held[0] - now, 3))
        await self._send(
            ChannelLimited(
                limit=e.limit,
                retry_after=left,
                message=str(e),
                key=key,
                match_id=match_id,
                seat=seat,
            )
        )

    async def _send(self, frame: Any) -> None:
        await self._text(_ENCODER.encode(frame))
