"""C8 at the gateway: every byte sent to each seat and each spectator, over many matches, names
no tile its receiver was not entitled to see at that moment.

Every seat is an SDK bot whose HTTP client records every response body it receives (its
stream, its moves' answers, whoami); every match has a spectator recording its public stream.
Each line is then checked against the match log at the line's version: the tiles it shows
must be on the table, in the receiver's own hand, or revealed by a round's end.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import msgspec
import pytest
from domino_sdk import SeenEvent

from engine.state import MatchState
from engine.strategy import GreedyStrategy, RandomStrategy
from engine.tiles import Tile
from services.cli.bot_commands import StrategyBot
from tests.gateway.conftest import Gateways, create, join, states_by_version
from tests.service.conftest import fold

pytestmark = pytest.mark.service

MATCHES: list[dict[str, Any]] = [
    {"family": "express", "players": 4, "target": 40},
    {"family": "express", "players": 2, "target": 40},
    {"family": "express", "players": 3, "target": 30, "next_leader": "rotate"},
    {"family": "express", "players": 2, "top": 9, "target": 40},
    {"family": "straight", "players": 2, "target": 60},
    {"family": "straight", "players": 3, "top": 9, "target": 60},
    {"family": "straight", "players": 4, "partners": True, "target": 60},
    {"family": "straight", "players": 2, "target": 60, "reveal_stock": True},
]
NOT_TILES = {"scores", "hand_sizes", "voids", "counts", "legal_points", "rules", "players"}


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, sink: list[bytes]) -> None:
        self.inner = inner
        self.sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder(httpx.AsyncBaseTransport):
    """An HTTP transport that keeps a copy of every response body, byte for byte."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[tuple[str, list[bytes]]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        sink: list[bytes] = []
        self.bodies.append((f"{request.url.path}?{request.url.query.decode()}", sink))
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, sink),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class Follower(StrategyBot):
    """A bot that follows every event (so it asks for the full stream)."""

    def on_event(self, event: SeenEvent, version: int) -> None:
        self.seen = version


def lines_of(path: str, body: bytes) -> Iterator[dict[str, Any]]:
    """The JSON lines of a recorded stream body, NDJSON or server-sent events."""
    text = body.decode()
    if "format=sse" in path:
        for block in text.split("\n\n"):
            for line in block.split("\n"):
                if line.startswith("data: "):
                    yield json.loads(line[6:])
        return
    for line in text.split("\n"):
        if line:
            yield json.loads(line)


def shown_tiles(node: Any) -> Iterator[Tile]:
    """Every tile a JSON value shows: any pair of small ints, wherever it is, except in the
    fields that hold counts and scores."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key not in NOT_TILES:
                yield from shown_tiles(value)
    elif isinstance(node, list):
        if len(node) == 2 and all(type(x) is int for x in node):
            a, b = node
            yield (min(a, b), max(a, b))
        else:
            for item in node:
                yield from shown_tiles(item)


def hidden_from(state: MatchState, seat: int | None) -> set[Tile]:
    """The tiles ``seat`` (None: a spectator) may not see at this state (C8)."""
    if state.phase != "playing":  # the round has ended: hands are shown, the stock maybe
        return set() if state.rules.reveal_stock else set(state.stock)
    hidden = set(state.stock)
    for s, hand in enumerate(state.hands):
        if s != seat:
            hidden |= hand
    return hidden


def public(value: Any) -> Any:
    return json.loads(msgspec.json.encode(value))


def check(
    receiver: str,
    seat: int | None,
    path: str,
    body: bytes,
    states: dict[int, MatchState],
    log: list[Any],
) -> int:
    """Check one recorded body; return how many tiles it showed."""
    if "/stream" not in path:  # whoami and the answers to moves show no tile at all
        assert b"[" not in body, (receiver, path, body[:300])
        return 0
    shown = 0
    for line in lines_of(path, body):
        version = line["id"]
        if version == 0:
            assert line["view"] is None
            continue
        state = states[version]
        if line["type"] == "event" and line["event"]["type"] == "round_ended":
            assert line["event"] == public(log[version - 1].event)  # public at round end
            continue
        view = line.get("view")
        if view is not None:
            assert view["seat"] == seat
            assert view["last_round"] == public(state.last_round)
            view = {k: v for k, v in view.items() if k != "last_round"}
            line = {**line, "view": view}
        tiles = set(shown_tiles(line))
        leaked = tiles & hidden_from(state, seat)
        assert not leaked, f"{receiver} saw {sorted(leaked)} at version {version}: {line}"
        shown += len(tiles)
    return shown


def test_no_byte_sent_to_a_seat_or_a_spectator_shows_a_tile_it_may_not_see(
    gateways: Gateways,
) -> None:
    """Eight matches of every family, all seats external: follower and minimal streams,
    NDJSON and SSE spectators."""
    g = gateways
    seated: list[tuple[str, int, str]] = []
    for rules in MATCHES:
        match_id = create(g.url, [None] * rules["players"], rules=rules)
        seated += [(match_id, *join(g.url, match_id)) for _ in range(rules["players"])]
    match_ids = list(dict.fromkeys(m for m, _, _ in seated))

    async def watch(match_id: str, sse: bool, recorder: Recorder) -> None:
        params = {"format": "sse"} if sse else {}
        url = f"{g.url}/api/v1/matches/{match_id}/stream"
        async with (
            httpx.AsyncClient(transport=recorder, timeout=30) as http,
            http.stream("GET", url, params=params) as r,
        ):
            async for chunk in r.aiter_text():
                if '"match_ended"' in chunk or '"phase":"over"' in chunk:
                    return

    async def play(k: int, token: str, recorder: Recorder) -> None:
        strategy = GreedyStrategy(k) if k % 3 else RandomStrategy(k)
        bot = Follower(strategy) if k % 2 else StrategyBot(strategy)
        async with httpx.AsyncClient(transport=recorder, timeout=30) as http:
            # over HTTP, through the recorder (the socket's frames: tests/gateway/test_socket.py)
            assert await bot.play(g.url, token, client=http, transport="http") is not None

    recorders: dict[tuple[str, int | None], Recorder] = {}

    async def everything() -> None:
        tasks = []
        for i, match_id in enumerate(match_ids):
            recorders[(match_id, None)] = Recorder()
            tasks.append(watch(match_id, bool(i % 2), recorders[(match_id, None)]))
        for k, (match_id, seat, token) in enumerate(seated):
            recorders[(match_id, seat)] = Recorder()
            tasks.append(play(k, token, recorders[(match_id, seat)]))
        await asyncio.wait_for(asyncio.gather(*tasks), 45)

    asyncio.run(everything())

    shown = lines = 0
    for match_id in match_ids:
        log = g.log(match_id)
        states = states_by_version(log)
        assert fold(log).result is not None
        for (m, seat), recorder in recorders.items():
            if m != match_id:
                continue
            receiver = f"{match_id} seat {seat}"
            assert recorder.bodies
            for path, chunks in recorder.bodies:
                body = b"".join(chunks)
                shown += check(receiver, seat, path, body, states, log)
                lines += body.count(b"\n")
    assert lines > 1000 and shown > 1000  # the check looked at something
