"""The client of an account: register, rotate, challenge, seek, follow and play.

An account token (``dab_...``) speaks for the account and opens every seat it holds. Like the
seat client, this one survives the network: the account stream resumes after the last event
id it saw, the play stream reconnects (each connection starts every live match afresh, with a
snapshot and the turn), the account's socket (:meth:`AccountClient.socket`) resumes after the
last cursor it read, a 429 waits as long as the gateway says, and a move is sent with an
Idempotency-Key so one sent twice is applied once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import httpx
import msgspec

from domino_sdk.client import API, GatewayError, MoveResult, _body, _Http
from domino_sdk.lobby import (
    Account,
    AccountGap,
    AccountState,
    Challenge,
    Me,
    PlayLine,
    Registered,
    Seek,
    SeenAccountEvent,
    decode_account_event,
    decode_play_line,
)
from domino_sdk.model import Move
from domino_sdk.protocol import AbortBody, MoveBody, ResignBody, RulesBody
from domino_sdk.socket import AccountSocket, check_transport

log = logging.getLogger(__name__)
_ENCODER = msgspec.json.Encoder()
_JSON = {"content-type": "application/json"}
_ME = msgspec.json.Decoder(Me)
_REGISTERED = msgspec.json.Decoder(Registered)


class _Challenged(msgspec.Struct, frozen=True):
    challenge: Challenge


class _Sought(msgspec.Struct, frozen=True):
    seek: Seek


class _Challenges(msgspec.Struct, frozen=True):
    challenges: tuple[Challenge, ...]


class _Seeks(msgspec.Struct, frozen=True):
    seeks: tuple[Seek, ...]


class _Token(msgspec.Struct, frozen=True):
    token: str


class _Joined(msgspec.Struct, frozen=True):
    match_id: str
    seat: int


def is_account_token(token: str) -> bool:
    """Whether ``token`` has the shape of an account token (``dab_...``), not a seat token."""
    return token.startswith("dab_")


async def register(
    url: str, name: str, *, client: httpx.AsyncClient | None = None, retries: int = 8
) -> Registered:
    """Make an account named ``name``; return it with its token (shown this once).

    Raises GatewayError: 409 ``name_taken`` (or a name too like one taken), 422 ``bad_name``
    or ``reserved_name``.
    """
    http = _Http(url, client, retries, 5.0)
    try:
        response = await http.request(
            "POST", f"{API}/accounts", headers=_JSON, content=_ENCODER.encode({"name": name})
        )
        if response.status_code != 201:
            raise GatewayError(response.status_code, _body(response))
        return _REGISTERED.decode(response.content)
    finally:
        await http.aclose()


class AccountClient:
    """One account: what it is, its challenges and seeks, its two streams and its moves."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        client: httpx.AsyncClient | None = None,
        retries: int = 8,
        read_timeout: float = 35.0,
        reconnects: int = 120,
        transport: str = "auto",
    ) -> None:
        if not is_account_token(token):
            raise ValueError("an account token starts with 'dab_'; this looks like a seat token")
        self._http = _Http(url, client, retries, 5.0)
        self._auth = {"authorization": f"Bearer {token}"}
        self.read_timeout = read_timeout
        self.reconnects = reconnects  # failed connections in a row before a stream gives up
        self.transport = check_transport(transport)
        self.dropped = 0  # how often the streams have reconnected
        self._socket: AccountSocket | None = None

    async def _call(
        self, method: str, path: str, body: Any = None, ok: int = 200
    ) -> httpx.Response:
        content = None if body is None else _ENCODER.encode(body)
        headers = self._auth if body is None else {**self._auth, **_JSON}
        response = await self._http.request(method, API + path, headers=headers, content=content)
        if response.status_code not in (ok, 200):
            raise GatewayError(response.status_code, _body(response))
        return response

    # -- the account ---------------------------------------------------------------------------

    async def me(self) -> Me:
        """The account, its live matches, its waiting seeks and its stream's latest event id."""
        return _ME.decode((await self._call("GET", "/account")).content)

    async def rotate(self) -> str:
        """A new token for the account (this client uses it from now on); the old one stops
        working."""
        token = msgspec.json.decode(
            (await self._call("POST", "/account/token")).content, type=_Token
        )
        self._auth["authorization"] = f"Bearer {token.token}"
        return token.token

    async def revoke(self) -> None:
        """Revoke the token: nothing works with it any more (the operator may issue another)."""
        await self._call("DELETE", "/account/token", ok=204)

    async def account(self, name: str) -> Account:
        """What anyone may know of the account called ``name``; GatewayError 404 if none."""
        response = await self._call("GET", f"/accounts/{name}")
        return msgspec.convert(response.json()["account"], Account)

    # -- matches, challenges and seeks -----------------------------------------------------------

    async def join(self, match_id: str, *, seat: int | None = None) -> int:
        """Take a seat of an open match as this account (the first open one unless ``seat``);
        return the seat. The account token then plays it."""
        body = {} if seat is None else {"seat": seat}
        response = await self._call("POST", f"/matches/{match_id}/join", body, ok=201)
        return msgspec.json.decode(response.content, type=_Joined).seat

    async def challenge(
        self,
        opponents: Sequence[str],
        *,
        rules: RulesBody | Mapping[str, Any] | None = None,
        deadline_ms: int | None = None,
    ) -> Challenge:
        """Challenge the accounts named (in seat order after this one's seat 0) to a match by
        ``rules`` (the options of :class:`RulesBody`); it starts when they all accept."""
        if rules is None:
            rules = RulesBody()
        elif not isinstance(rules, RulesBody):
            rules = msgspec.convert(rules, RulesBody)
        body = {"opponents": list(opponents), "rules": rules, "deadline_ms": deadline_ms}
        response = await self._call("POST", "/challenges", body, ok=201)
        return msgspec.json.decode(response.content, type=_Challenged).challenge

    async def challenges(self) -> list[Challenge]:
        """The account's challenges, made and received (open ones, and closed within the hour),
        newest first."""
        response = await self._call("GET", "/challenges")
        return list(msgspec.json.decode(response.content, type=_Challenges).challenges)

    async def accept(self, challenge_id: str) -> Challenge:
        """Accept a challenge made to this account; when it is the last to, the match starts
        and the challenge comes back ``started`` with its ``match_id``."""
        return await self._answer(challenge_id, "accept")

    async def decline(self, challenge_id: str) -> Challenge:
        """Decline a challenge made to this account: it closes."""
        return await self._answer(challenge_id, "decline")

    async def cancel(self, challenge_id: str) -> Challenge:
        """Withdraw a challenge this account made."""
        return await self._answer(challenge_id, "cancel")

    async def _answer(self, challenge_id: str, what: str) -> Challenge:
        response = await self._call("POST", f"/challenges/{challenge_id}/{what}")
        return msgspec.json.decode(response.content, type=_Challenged).challenge

    async def seek(self, kind: str) -> Seek:
        """Wait in the queue for a game of ``kind`` (``express-4p``, ``straight-2p``, …); the
        match comes on the account stream. An account waiting already for that kind gets its
        seek back."""
        response = await self._call("POST", "/seeks", {"kind": kind}, ok=201)
        return msgspec.json.decode(response.content, type=_Sought).seek

    async def seeks(self) -> list[Seek]:
        """The account's seeks still waiting."""
        response = await self._call("GET", "/seeks")
        return list(msgspec.json.decode(response.content, type=_Seeks).seeks)

    async def withdraw(self, seek_id: str) -> Seek:
        """Leave the queue; GatewayError 404 ``no_seek`` if the seek was matched or expired."""
        response = await self._call("DELETE", f"/seeks/{seek_id}")
        return msgspec.json.decode(response.content, type=_Sought).seek

    # -- the streams -----------------------------------------------------------------------------

    async def events(self, after: int | None = None) -> AsyncGenerator[SeenAccountEvent, None]:
        """The account's events, for ever: after id ``after``, or (None) an AccountState —
        where things stand now — and what happens from then on. A dropped connection resumes
        after the last id seen, so none is lost or repeated; one resumed from before what the
        account's feed still keeps gets an AccountGap saying what was lost, then an
        AccountState to start again from."""
        resume = after

        def params() -> dict[str, str]:
            return {} if resume is None else {"after": str(resume)}

        raw_lines = self._http.lines(
            f"{API}/account/stream",
            self._auth,
            params,
            read_timeout=self.read_timeout,
            attempts=self.reconnects,
            on_reconnect=self._reconnected,
        )
        async with contextlib.aclosing(raw_lines):
            async for raw in raw_lines:
                event = decode_account_event(raw)
                resyncs = isinstance(event, AccountGap | AccountState)
                if resume is not None and event.id <= resume and not resyncs:
                    continue  # sent again by a server that resumed too early
                resume = event.id
                yield event

    async def play(self, events: str = "all") -> AsyncGenerator[PlayLine, None]:
        """Every line of every seat the account holds, for ever, matches joining as they
        start. After a dropped connection each live match starts again with a snapshot (and
        the turn when it is the seat's move): a line may come twice, none is lost.

        ``events="minimal"`` leaves out every event but each seat's own timeouts and the ends
        of rounds and of matches: enough for a bot that only answers its turns."""
        query = {} if events == "all" else {"events": events}
        raw_lines = self._http.lines(
            f"{API}/account/play",
            self._auth,
            lambda: dict(query),
            read_timeout=self.read_timeout,
            attempts=self.reconnects,
            on_reconnect=self._reconnected,
        )
        async with contextlib.aclosing(raw_lines):
            async for raw in raw_lines:
                line = decode_play_line(raw)
                if line is not None:  # None: a kind of line newer than this SDK
                    yield line

    def _reconnected(self) -> None:
        self.dropped += 1
        log.info("account stream dropped; reconnecting")

    def socket(self, events: str = "all") -> AccountSocket:
        """The account's socket, to :meth:`~domino_sdk.socket.AccountSocket.open`: the events
        of the account stream and the lines of every seat it holds, on one connection under
        one cursor (a cut resumes exactly where it was), and the moves of all its seats up
        (:meth:`move` sends them there while it is open). ``events="minimal"`` as for
        :meth:`play`."""
        self._socket = AccountSocket(
            self._http.base,
            self._auth,
            everything=events != "minimal",
            attempts=self.reconnects,
            retries=self._http.retries,
        )
        return self._socket

    # -- moves ---------------------------------------------------------------------------------

    async def move(self, match_id: str, seat: int, move: Move | MoveBody, key: str) -> MoveResult:
        """Post a move for a seat this account holds; raise MoveRejected when the referee
        refuses it, GatewayError for anything else that is not an acceptance. Sent up the
        account's socket while it is open, else posted."""
        socket = self._socket
        if socket is not None and not socket.over:
            return await socket.move(match_id, seat, move, key)
        path = f"{API}/matches/{match_id}/seats/{seat}/moves"
        return await self._http.move(path, self._auth, move, key)

    async def resign(self, match_id: str, seat: int) -> MoveResult:
        """Concede the match for the seat's side (at any time, on any turn)."""
        return await self.move(match_id, seat, ResignBody(), key=f"resign-{seat}")

    async def abort(self, match_id: str, seat: int) -> MoveResult:
        """Call the match off, unrated; only while the seat's side has made no move of its own
        (MoveRejected ``too_late_to_abort`` after)."""
        return await self.move(match_id, seat, AbortBody(), key=f"abort-{seat}")

    async def aclose(self) -> None:
        """Close the socket and the connection pool (if the client created it)."""
        if self._socket is not None:
            await self._socket.aclose()
        await self._http.aclose()
