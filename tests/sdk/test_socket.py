"""The SDK plays over the gateway's sockets by default, against real gateway processes: a seat
bot over its seat's socket and an account bot over the account's, whole matches; cut again and
again by a proxy, each resumes where it was, every event seen once and every turn answered
once; and through a proxy that answers the upgrade 404 (as one that does not pass it on), each
plays over HTTP instead, or, asked for the socket alone, says why it cannot; and against a
stand-in that sends what the SDK cannot read, or ends its token, it raises why."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from domino_sdk import (
    Bot,
    MatchEnded,
    PlayTile,
    SeatClient,
    SeenEvent,
    StreamClosed,
    View,
    register,
)
from domino_sdk.account import AccountClient
from domino_sdk.model import Move
from domino_sdk.socket import SocketUnavailable
from websockets.asyncio.server import serve

from engine.verify import verify
from services.gateway.protocol import API
from tests.gateway.conftest import Gateways, create, join
from tests.gateway.test_socket_node import CuttingProxy

pytestmark = [pytest.mark.service, pytest.mark.anyio]

SHORT = {"family": "express", "players": 2, "target": 30}


class Recorder(Bot):
    """Plays its heaviest tile; notes every event it sees and every turn it is asked, by
    match (a bot per match, sharing the notes)."""

    def __init__(
        self,
        events: dict[str, list[int]] | None = None,
        turns: dict[str, list[int]] | None = None,
        match_id: str = "",
    ) -> None:
        self.events: dict[str, list[int]] = {} if events is None else events
        self.turns: dict[str, list[int]] = {} if turns is None else turns
        self.match_id = match_id

    def for_match(self, match_id: str, seat: int) -> Bot:
        return Recorder(self.events, self.turns, match_id)

    def on_event(self, event: SeenEvent, version: int) -> None:
        self.events.setdefault(self.match_id, []).append(version)

    def choose(self, view: View) -> Move:
        self.turns.setdefault(self.match_id, []).append(view.version)
        plays = [m for m in view.legal if isinstance(m, PlayTile)]
        return max(plays, key=lambda m: sum(m.tile)) if plays else view.legal[0]


class Requests:
    """An httpx client noting each request it sends (method and path), for a bot to use."""

    def __init__(self) -> None:
        self.seen: list[str] = []

        async def note(request: httpx.Request) -> None:
            self.seen.append(f"{request.method} {request.url.path}")

        self.client = httpx.AsyncClient(event_hooks={"request": [note]}, timeout=30.0)

    def to(self, what: str) -> list[str]:
        return [r for r in self.seen if r.endswith(what)]


class NoUpgrade:
    """A TCP proxy before a gateway that answers every WebSocket upgrade 404, as a proxy that
    does not pass upgrades on does, and passes every other connection through whole."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.refused = 0

    async def serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            head = await client_r.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            client_w.close()
            return
        if b"upgrade: websocket" in head.lower():
            self.refused += 1
            body = b'{"error":"not_found","message":"no such route"}'
            client_w.write(
                b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
            await client_w.drain()
            client_w.close()
            return
        gateway_r, gateway_w = await asyncio.open_connection(self.host, self.port)
        gateway_w.write(head)

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()

        tasks = {
            asyncio.create_task(pipe(client_r, gateway_w)),
            asyncio.create_task(pipe(gateway_r, client_w)),
        }
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in (client_w, gateway_w):
                writer.close()


@contextlib.asynccontextmanager
async def proxied(url: str, make: Callable[[str, int], Any]) -> AsyncIterator[tuple[str, Any]]:
    """A proxy made by ``make`` before the gateway at ``url``: its URL, and it."""
    gateway = urlsplit(url)
    assert gateway.hostname is not None and gateway.port is not None
    proxy = make(gateway.hostname, gateway.port)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", proxy


def whole(g: Gateways, match_id: str, seen: list[int], first: int) -> int:
    """Check that ``seen`` is every event of the finished match after ``first``, once, in
    order, and the log a legal match; its length."""
    log = g.log(match_id)
    assert verify([e.event for e in log]) is None
    assert seen == list(range(first + 1, len(log) + 1)), seen
    return len(log)


# -- a seat --------------------------------------------------------------------------------------


async def test_a_seat_bot_plays_a_whole_match_over_its_socket_by_default(
    gateways: Gateways,
) -> None:
    """No stream is read and no move posted over HTTP: the seat's socket carries both; every
    event comes once, every turn is asked once, and the bot returns the match's end."""
    g = gateways
    match_id = create(g.url, [None, "greedy"], rules=SHORT)
    _, token = await asyncio.to_thread(join, g.url, match_id)
    bot, requests = Recorder(), Requests()
    try:
        ended = await asyncio.wait_for(bot.play(g.url, token, client=requests.client), 90)
    finally:
        await requests.client.aclose()
    assert isinstance(ended, MatchEnded)
    assert requests.seen == [f"GET {API}/seat"], requests.seen
    events, turns = bot.events[""], bot.turns[""]
    n = await asyncio.to_thread(whole, g, match_id, events, events[0] - 1)
    assert turns and len(turns) == len(set(turns)) and max(turns) < n


async def test_a_seat_bot_cut_off_again_and_again_resumes_its_socket_missing_and_repeating_none(
    gateways: Gateways,
) -> None:
    """Through a proxy that cuts the socket every few frames, mid-frame: each time the bot
    opens it again after the last id it read, and sees the whole match once, from its first
    event; each turn is asked once, and each move it sent is in the log once."""
    g = gateways
    match_id = create(g.url, [None, "greedy"], rules=SHORT)
    seat, token = await asyncio.to_thread(join, g.url, match_id)
    bot = Recorder()
    async with proxied(g.url, CuttingProxy) as (url, proxy):
        ended = await asyncio.wait_for(bot.play(url, token, transport="socket"), 120)
        assert isinstance(ended, MatchEnded)
        assert proxy.cuts >= 2, proxy.cuts
    events, turns = bot.events[""], bot.turns[""]
    await asyncio.to_thread(whole, g, match_id, events, events[0] - 1)
    assert len(turns) == len(set(turns)), turns
    log = await asyncio.to_thread(g.log, match_id)
    ours = [e.version for e in log if getattr(e.event, "seat", None) == seat]
    # one move a turn asked (a turn that timed out has the referee's move instead)
    assert len(ours) >= len(turns) - 1


async def test_a_seat_bot_plays_over_http_when_the_upgrade_is_answered_404(
    gateways: Gateways,
) -> None:
    """The handshake answered 404 (a proxy that does not pass the upgrade on): the bot reads
    the seat's stream and posts its moves instead, and plays the match out; asked for the
    socket alone, it raises SocketUnavailable with the status."""
    g = gateways
    match_id = create(g.url, [None, "greedy"], rules=SHORT)
    seat, token = await asyncio.to_thread(join, g.url, match_id)
    bot, requests = Recorder(), Requests()
    async with proxied(g.url, NoUpgrade) as (url, proxy):
        with pytest.raises(SocketUnavailable) as refused:
            await asyncio.wait_for(Recorder().play(url, token, transport="socket"), 30)
        assert refused.value.status == 404
        try:
            ended = await asyncio.wait_for(bot.play(url, token, client=requests.client), 90)
        finally:
            await requests.client.aclose()
        assert isinstance(ended, MatchEnded)
        assert proxy.refused == 2
    stream = f"/matches/{match_id}/seats/{seat}/stream"
    assert requests.to(stream) and requests.to("/moves"), requests.seen
    assert len(requests.to("/moves")) == len(bot.turns[""])
    events = bot.events[""]
    await asyncio.to_thread(whole, g, match_id, events, events[0] - 1)


# -- an account ------------------------------------------------------------------------------------


def unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:8]}"


async def two_accounts(url: str) -> tuple[tuple[str, str], tuple[str, str]]:
    a, b = await asyncio.gather(register(url, unique("sock")), register(url, unique("ket")))
    return (a.account.name, a.token), (b.account.name, b.token)


async def challenged_match(
    url: str,
    a: tuple[str, str],
    b: tuple[str, str],
    a_bot: Bot,
    b_bot: Bot,
    transport: Any,
    b_url: str | None = None,
    a_client: httpx.AsyncClient | None = None,
    rules: dict[str, Any] = SHORT,
) -> tuple[list[Any], list[Any]]:
    """``a`` challenges ``b`` to one match (a short one unless ``rules`` say), both bots
    playing it as their accounts (b through ``b_url`` when given); what each run returned."""
    b_run = asyncio.create_task(
        b_bot.play_account(b_url or url, b[1], games=1, accept_from=[a[0]], transport=transport)
    )
    a_run = asyncio.create_task(
        a_bot.play_account(url, a[1], games=1, transport=transport, client=a_client)
    )
    client = AccountClient(url, a[1], transport="http")
    try:
        await client.challenge([b[0]], rules=rules)
    finally:
        await client.aclose()
    a_done, b_done = await asyncio.wait_for(asyncio.gather(a_run, b_run), 120)
    return a_done, b_done


async def test_two_account_bots_play_a_whole_match_over_the_account_socket(
    gateways: Gateways,
) -> None:
    """Each account's seats, events and moves over its one socket (by default: no stream is
    read and no move posted over HTTP): each bot sees every event of the match once and is
    asked each turn once."""
    url = gateways.url
    a, b = await two_accounts(url)
    a_bot, b_bot, requests = Recorder(), Recorder(), Requests()
    try:
        a_done, b_done = await challenged_match(
            url, a, b, a_bot, b_bot, "auto", a_client=requests.client
        )
    finally:
        await requests.client.aclose()
    assert len(a_done) == len(b_done) == 1 and a_done[0].match_id == b_done[0].match_id
    # no stream read and no move posted over HTTP: the account itself, and its seeks left
    assert not [r for r in requests.seen if "stream" in r or "play" in r or "moves" in r]
    match_id = a_done[0].match_id
    for bot in (a_bot, b_bot):
        events = bot.events[match_id]
        await asyncio.to_thread(whole, gateways, match_id, events, events[0] - 1)
        turns = bot.turns[match_id]
        assert turns and len(turns) == len(set(turns))


async def test_an_account_bot_cut_off_again_and_again_resumes_its_socket_by_its_cursor(
    gateways: Gateways,
) -> None:
    """Through a proxy that cuts the account's socket every few frames, the bot opens it again
    with the last cursor it read: it sees every event of its match once, from the first, and
    is asked each turn once."""
    url = gateways.url
    a, b = await two_accounts(url)
    a_bot, b_bot = Recorder(), Recorder()
    async with proxied(url, CuttingProxy) as (proxy_url, proxy):
        # long enough to be cut several times, however the deals fall (a match to 30 can be
        # over in a round, within the first two connections)
        a_done, _ = await challenged_match(
            url, a, b, a_bot, b_bot, "socket", b_url=proxy_url, rules={**SHORT, "target": 100}
        )
        assert proxy.cuts >= 2, proxy.cuts
    match_id = a_done[0].match_id
    events = b_bot.events[match_id]
    await asyncio.to_thread(whole, gateways, match_id, events, events[0] - 1)
    turns = b_bot.turns[match_id]
    assert turns and len(turns) == len(set(turns))


async def test_an_account_bot_plays_over_http_when_the_upgrade_is_answered_404(
    gateways: Gateways,
) -> None:
    """The account's handshake answered 404: the bot follows the account stream and the play
    stream and posts its moves, and plays its match out; asked for the socket alone, it raises
    SocketUnavailable."""
    url = gateways.url
    a, b = await two_accounts(url)
    a_bot, b_bot = Recorder(), Recorder()
    requests = Requests()
    async with proxied(url, NoUpgrade) as (proxy_url, proxy):
        with pytest.raises(SocketUnavailable):
            await asyncio.wait_for(Recorder().play_account(proxy_url, b[1], transport="socket"), 30)
        try:
            b_run = asyncio.create_task(
                b_bot.play_account(
                    proxy_url, b[1], games=1, accept_from=[a[0]], client=requests.client
                )
            )
            a_run = asyncio.create_task(a_bot.play_account(url, a[1], games=1))
            client = AccountClient(url, a[1], transport="http")
            try:
                await client.challenge([b[0]], rules=SHORT)
            finally:
                await client.aclose()
            a_done, b_done = await asyncio.wait_for(asyncio.gather(a_run, b_run), 120)
        finally:
            await requests.client.aclose()
        assert proxy.refused == 2
    assert a_done[0].match_id == b_done[0].match_id
    match_id = b_done[0].match_id
    assert requests.to("/account/stream") and requests.to("/account/play"), requests.seen
    assert Counter(r.split()[0] for r in requests.to("/moves")) == {
        "POST": len(b_bot.turns[match_id])
    }
    events = b_bot.events[match_id]
    await asyncio.to_thread(whole, gateways, match_id, events, events[0] - 1)


# -- a gateway that sends what the SDK cannot read -------------------------------------------------


@contextlib.asynccontextmanager
async def stand_in(frames: list[bytes], close: int) -> AsyncIterator[str]:
    """A WebSocket server standing in for a gateway of version 1: every socket opened gets
    ``frames``, then the close code ``close``; its URL."""

    def stated(connection: Any, request: Any, response: Any) -> Any:
        response.headers["Domino-Protocol"] = "1"
        return response

    async def handler(ws: Any) -> None:
        for data in frames:
            await ws.send(data, text=True)
        await ws.close(close)

    async with serve(handler, "127.0.0.1", 0, process_response=stated) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}"


async def test_a_frame_of_a_known_type_but_the_wrong_shape_ends_the_socket_with_why() -> None:
    """A broken gateway, not a newer one (which only adds types and fields): the seat's lines
    raise msgspec.ValidationError at once, nothing is handed on, nothing is opened again."""
    bad = b'{"type":"line","match_id":"m-1","seat":0,"line":{"type":"turn","id":"seven"}}'
    newer = b'{"type":"whisper","match_id":"m-1","seat":0,"text":"skipped"}'
    async with stand_in([newer, bad], 1000) as url:
        seat = SeatClient(url, "t", retries=0, transport="socket")
        seat.match_id, seat.seat = "m-1", 0
        seen: list[Any] = []
        try:
            with pytest.raises(msgspec.ValidationError):
                async for line in seat.lines():
                    seen.append(line)
        finally:
            await seat.aclose()
    assert seen == [] and seat.reconnects == 0


async def test_a_closing_frame_and_a_credentials_close_code_raise_stream_closed() -> None:
    """The closing frame (the token rotated), then 4001: StreamClosed naming the reason, as a
    stream's closing line raises it; the socket is not opened again with that token."""
    closing = b'{"type":"closed","reason":"token_rotated","message":"rotated"}'
    async with stand_in([closing], 4001) as url:
        seat = SeatClient(url, "t", retries=0, transport="socket")
        seat.match_id, seat.seat = "m-1", 0
        try:
            with pytest.raises(StreamClosed) as closed:
                async for _ in seat.lines():
                    pytest.fail("no line was sent")
        finally:
            await seat.aclose()
    assert closed.value.code == "token_rotated" and seat.reconnects == 0
