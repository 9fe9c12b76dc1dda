"""A raw client of the account channel (docs/protocol.md, "The account channel") for the
tests: over the account socket (websockets) or the account stream with ``play=1`` (httpx,
NDJSON or SSE), it reads frames, answers each turn with the seat's first legal move, and can
cut its connection after any frame and resume with the last cursor it read. What it read is
then checked against the truth: the account's feed and each match's log as its seat sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from engine.views import redact
from services.gateway.protocol import API
from tests.gateway.conftest import Gateways
from tests.gateway.test_accounts import auth

Frame = dict[str, Any]
_ENCODE = msgspec.json.Encoder().encode


def socket_url(url: str, cursor: str | None = None, **query: str) -> str:
    """The account socket's address on the gateway at ``url``."""
    params = dict(query)
    if cursor is not None:
        params["cursor"] = cursor
    q = str(httpx.QueryParams(params))
    return f"ws{url.removeprefix('http')}{API}/account/socket" + (f"?{q}" if q else "")


def opening(url: str, token: str | None, **headers: str) -> Any:
    """A connection to the account socket at ``url`` (an async context manager)."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return connect(url, additional_headers=headers, proxy=None, open_timeout=10)


async def recv(sock: ClientConnection, timeout: float = 10.0) -> Frame:
    """The socket's next frame."""
    got: Frame = json.loads(await asyncio.wait_for(sock.recv(), timeout))
    return got


def move_up(frame: Frame) -> dict[str, Any] | None:
    """The move frame answering a turn line with its first legal move; None for any other."""
    line = frame.get("line", {})
    if frame.get("type") != "line" or line.get("type") != "turn":
        return None
    return {
        "type": "move",
        "key": f"v{line['id']}",
        "match_id": frame["match_id"],
        "seat": frame["seat"],
        "move": line["view"]["legal"][0],
    }


@dataclass
class Reader:
    """What a client read across its connections, and where it is."""

    cursor: str | None = None
    frames: list[Frame] = field(default_factory=list)  # every frame with a cursor, in order
    answers: list[Frame] = field(default_factory=list)  # the answers to its moves
    connections: int = 0
    codes: list[int | None] = field(default_factory=list)  # each connection's close code
    stalls: list[str] = field(default_factory=list)  # where a connection waited in vain

    def stalled(self, stage: str, n: int) -> None:
        """Record a connection that waited in vain: where, and the last frames it read."""
        last = [
            (f["type"], f.get("match_id"), f.get("line", {}).get("type"), f.get("cursor"))
            for f in self.frames[-4:]
        ]
        self.stalls.append(
            f"connection {self.connections} at {time.strftime('%H:%M:%S')}: {stage} "
            f"after {n} frames, from cursor {self.cursor}; last frames {last}"
        )

    def take(self, frame: Frame) -> None:
        """Record a frame; a frame with a cursor moves the client's cursor."""
        if "cursor" in frame:
            self.frames.append(frame)
            self.cursor = frame["cursor"]
        else:
            self.answers.append(frame)

    def account_lines(self) -> list[Frame]:
        """The account feed's lines read (not the state or gap frames, which have no id)."""
        kept = [f["line"] for f in self.frames if f["type"] == "account"]
        return [line for line in kept if line["type"] not in ("state", "gap")]

    def seat_lines(self) -> dict[tuple[str, int], list[Frame]]:
        """Each seat's lines read, in order."""
        out: dict[tuple[str, int], list[Frame]] = {}
        for f in self.frames:
            if f["type"] == "line":
                out.setdefault((f["match_id"], f["seat"]), []).append(f["line"])
        return out

    def ended(self) -> set[str]:
        """The matches whose match_ended line was read."""
        return {
            f["match_id"]
            for f in self.frames
            if f["type"] == "line" and f["line"].get("event", {}).get("type") == "match_ended"
        }


Cut = Callable[[Reader, Frame, int], bool]
"""Whether to cut the connection after a frame: given the reader, the frame, and how many
frames with a cursor this connection read."""


async def socket_session(
    url: str, token: str, reader: Reader, cut: Cut, done: Callable[[Reader], bool]
) -> None:
    """One connection to the account socket from the reader's cursor: frames read, turns
    answered, until ``cut`` says to cut it, ``done`` says the client has what it waits for,
    or the gateway closes it."""
    reader.connections += 1
    for _ in range(50):  # a place just given back may still be held a moment
        try:
            sock_cm = opening(socket_url(url, reader.cursor), token)
            sock = await sock_cm.__aenter__()
            break
        except InvalidStatus as e:
            if e.response.status_code != 429:
                raise
            await asyncio.sleep(0.1)
        except TimeoutError:
            reader.stalled("no handshake in 10 s", 0)
            raise
    else:
        raise AssertionError("the account's stream places stayed taken")
    n = 0
    try:
        while not done(reader):
            try:
                got = await recv(sock, 30)
            except TimeoutError:
                reader.stalled("no frame in 30 s", n)
                raise
            reader.take(got)
            if "cursor" not in got:
                continue
            n += 1
            up = move_up(got)
            if up is not None:
                await sock.send(json.dumps(up))
            if cut(reader, got, n):
                return
    except ConnectionClosed as e:
        reader.codes.append(None if e.rcvd is None else e.rcvd.code)
    finally:
        with contextlib.suppress(Exception):
            await sock_cm.__aexit__(None, None, None)


async def stream_session(
    url: str, token: str, reader: Reader, cut: Cut, done: Callable[[Reader], bool], sse: bool
) -> None:
    """One connection to the account stream with ``play=1`` from the reader's cursor (as
    ``cursor=``, or for SSE as Last-Event-ID): frames read, turns answered with POST /moves,
    until ``cut`` says to cut it, ``done`` says the client has what it waits for, or it ends."""
    reader.connections += 1
    params = {"play": "1"}
    headers = auth(token)
    if sse:
        params["format"] = "sse"
        if reader.cursor is not None:
            headers["Last-Event-ID"] = reader.cursor
    elif reader.cursor is not None:
        params["cursor"] = reader.cursor
    n = 0
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(50):
            async with client.stream(
                "GET", f"{API}/account/stream", params=params, headers=headers
            ) as r:
                if r.status_code == 429:  # a place just given back may still be held a moment
                    await asyncio.sleep(0.1)
                    continue
                assert r.status_code == 200, await r.aread()
                if done(reader):  # nothing to wait for: opened and cut at once
                    return
                block: dict[str, str] = {}
                async for text in r.aiter_lines():
                    if done(reader):
                        return
                    if sse:
                        if text:
                            name, _, value = text.partition(": ")
                            block[name] = value
                            continue
                        if "data" not in block:
                            block = {}
                            continue
                        got: Frame = json.loads(block["data"])
                        if "cursor" in got:
                            assert block["id"] == got["cursor"]
                            assert block["event"] == got["type"]
                        block = {}
                    elif not text.strip():
                        continue
                    else:
                        got = json.loads(text)
                    reader.take(got)
                    n += 1
                    up = move_up(got)
                    if up is not None:
                        answer = await client.post(
                            f"{API}/matches/{up['match_id']}/seats/{up['seat']}/moves",
                            json=up["move"],
                            headers={**auth(token), "Idempotency-Key": up["key"]},
                        )
                        assert answer.status_code in (200, 409), answer.text
                    if cut(reader, got, n):
                        return
                return
        raise AssertionError("the account's stream places stayed taken")


def feed_lines(url: str, token: str) -> list[Frame]:
    """The account's feed as its stream gives it from the start, read until quiet (a place
    of a connection just cut may still be held a moment: 429 is tried again)."""
    for _ in range(50):
        out: list[Frame] = []
        with (
            httpx.Client(base_url=url, timeout=10) as client,
            client.stream(
                "GET", f"{API}/account/stream", params={"after": "0"}, headers=auth(token)
            ) as r,
        ):
            if r.status_code == 429:
                time.sleep(0.1)
                continue
            assert r.status_code == 200
            for text in r.iter_lines():
                if not text.strip():
                    break  # a keep-alive: the feed is read to its end
                out.append(json.loads(text))
        return out
    raise AssertionError("the account's stream places stayed taken")


def seen_by(g: Gateways, match_id: str, seat: int) -> list[Frame]:
    """The match's events as the seat's stream shows them: each redacted for it (C8)."""
    return [
        {"type": "event", "id": env.version, "event": json.loads(_ENCODE(redact(env.event, seat)))}
        for env in g.log(match_id)
    ]


def check_exact(g: Gateways, token: str, reader: Reader, whole: set[str]) -> None:
    """Every frame read once: the account lines are the feed's, each once, in order; each
    seat's events are its match's log as the seat sees it, once each, in order (from event 1
    for the matches in ``whole``, followed from their start). A reader that began fresh
    reads the feed after its first state frame's id (what came before is in that state)."""
    first: Frame = reader.frames[0] if reader.frames else {"type": None}
    fresh = first["type"] == "account" and first["line"]["type"] == "state"
    start = first["line"]["id"] if fresh else 0
    feed = [line for line in feed_lines(g.url, token) if line["id"] > start]
    got = reader.account_lines()
    assert [line["id"] for line in got] == [line["id"] for line in feed][: len(got)]
    assert got == feed[: len(got)]
    for (match_id, seat), lines in reader.seat_lines().items():
        events = [line for line in lines if line["type"] == "event"]
        truth = seen_by(g, match_id, seat)
        if match_id in whole:
            assert events == truth[: len(events)], _first_diff(events, truth)
        else:
            first = next(line["id"] for line in lines if line["type"] == "snapshot")
            assert events == truth[first : first + len(events)], (match_id, seat)
        ids = [e["id"] for e in events]
        assert ids == sorted(set(ids)), (match_id, seat, ids)


def _first_diff(a: list[Frame], b: list[Frame]) -> Any:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return x, y
    return len(a), len(b)
