"""A bot in another language plays a whole match over the seat's socket: the Node bot
tests/gateway/node/socket_bot.mjs (Node's built-in WebSocket, written from docs/protocol.md
alone) against a real gateway, through a proxy that cuts its connection again and again, so
that it must resume with ?after= the last id it read to see the whole match once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.gateway.conftest import Gateways, create, join
from tests.service.conftest import fold
from tests.support.tools import missing

pytestmark = pytest.mark.service

BOT = Path(__file__).parent / "node" / "socket_bot.mjs"
NO_NODE = "needs Node.js 20.10 or newer for its WebSocket client (Debian 12's nodejs is 18)"
BUDGETS = (4, 9, 15, 6, 12)
"""How many of the gateway's frames each connection through the proxy carries whole before it
is cut midway through the next, in turn: small enough that a match is cut many times, and
enough that each connection carries lines past the last id, so the bot always gets further."""
WEBSOCKET = "process.exit(typeof WebSocket === 'function' ? 0 : 1)"


@pytest.fixture(scope="module")
def node() -> list[str]:
    """How to run Node with its WebSocket client (a flag before Node 22); a test without one
    is skipped, or fails under CI (asked for before the stack, so a skip starts nothing)."""
    node = shutil.which("node")
    if node is None:
        missing(NO_NODE)
    for flags in ([], ["--experimental-websocket"]):
        ran = subprocess.run([node, *flags, "-e", WEBSOCKET], capture_output=True, timeout=30)
        if ran.returncode == 0:
            return [node, *flags]
    missing(f"{NO_NODE}; {node} has none")


async def whole_frame(reader: asyncio.StreamReader) -> bytes:
    """One WebSocket frame the server sent (unmasked), header and payload, as read."""
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        more = await reader.readexactly(2)
        size = int.from_bytes(more, "big")
    elif size == 127:
        more = await reader.readexactly(8)
        size = int.from_bytes(more, "big")
    else:
        more = b""
    return head + more + await reader.readexactly(size)


class CuttingProxy:
    """A TCP proxy in front of a gateway that cuts each connection upgraded to a WebSocket
    after the gateway's next budget of frames (:data:`BUDGETS`, in turn), having passed on
    half of the frame after them: the client sees its connection drop mid-frame, with no close
    frame, and the gateway its client go away. Other answers pass through untouched."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.budgets = itertools.cycle(BUDGETS)
        self.cuts = 0

    async def serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """Carry one connection of the client's to the gateway until either side ends it or
        the proxy cuts it."""
        gateway_r, gateway_w = await asyncio.open_connection(self.host, self.port)
        budget = next(self.budgets)

        async def up() -> None:
            while data := await client_r.read(65536):
                gateway_w.write(data)
                await gateway_w.drain()

        async def down() -> None:
            head = await gateway_r.readuntil(b"\r\n\r\n")
            client_w.write(head)
            if not head.startswith(b"HTTP/1.1 101"):
                while data := await gateway_r.read(65536):
                    client_w.write(data)
                    await client_w.drain()
                return
            for _ in range(budget):
                client_w.write(await whole_frame(gateway_r))
                await client_w.drain()
            frame = await whole_frame(gateway_r)
            client_w.write(frame[: len(frame) // 2])
            await client_w.drain()
            self.cuts += 1

        tasks = {asyncio.create_task(up()), asyncio.create_task(down())}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in (client_w, gateway_w):
                writer.close()


async def run_bot(
    node: list[str], url: str, match_id: str, seat: int, token: str
) -> tuple[int, list[dict[str, Any]], str]:
    """Run the Node bot on the seat of the gateway at ``url``: its exit status, the JSON lines
    it printed and what it said on stderr."""
    argv = ["--url", url, "--match", match_id, "--seat", str(seat)]
    bot = await asyncio.create_subprocess_exec(
        *node,
        str(BOT),
        *argv,
        env={**os.environ, "DOMINO_TOKEN": token},  # not on its command line, for ps to show
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(bot.communicate(), 60)
    finally:
        if bot.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                bot.kill()
            await bot.wait()
    assert bot.returncode is not None
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return bot.returncode, lines, err.decode()


async def bot_through_proxy(
    g: Gateways, node: list[str], match_id: str, seat: int, token: str
) -> tuple[int, list[dict[str, Any]], str, int]:
    """:func:`run_bot` through a :class:`CuttingProxy` to the gateway; and how often the
    proxy cut the bot's connection."""
    gateway = urlsplit(g.url)
    assert gateway.hostname is not None and gateway.port is not None
    proxy = CuttingProxy(gateway.hostname, gateway.port)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        code, lines, err = await run_bot(node, f"http://127.0.0.1:{port}", match_id, seat, token)
    return code, lines, err, proxy.cuts


def test_a_node_bot_cut_off_again_and_again_resumes_its_socket_and_sees_the_whole_match_once(
    node: list[str], gateways: Gateways
) -> None:
    """The Node bot, its token in the handshake's Authorization header, plays a whole Express
    match against a house bot through a proxy that cuts it every few frames: it exits 0 on the
    socket's close 1000 after match_ended; the event ids it read are 1..n, each once, the match
    log's versions; it opened the socket again after each cut (at least two); and each of its
    moves whose outcome reached it was accepted, or a replay of one, never rejected."""
    g = gateways
    match_id = create(g.url, ["random", None], rules={"family": "express", "target": 30})
    seat, token = join(g.url, match_id)
    started = time.monotonic()
    code, printed, err, cuts = asyncio.run(bot_through_proxy(g, node, match_id, seat, token))
    took = time.monotonic() - started
    assert code == 0, err
    *events, last = printed
    summary = last["summary"]
    ids = [e["id"] for e in events]
    log = g.log(match_id)
    assert ids == [env.version for env in log] == list(range(1, len(log) + 1)), err
    assert [e["type"] for e in events] == [env.event.__struct_config__.tag for env in log]
    assert fold(log).result is not None and events[-1]["type"] == "match_ended"
    assert summary["ended"] and summary["events"] == len(log)
    assert cuts >= 2 and summary["reconnects"] >= cuts, (cuts, summary)
    outcomes = summary["outcomes"]
    assert set(outcomes) <= {"accepted", "replayed"}, (outcomes, err)
    assert 0 < outcomes.get("accepted", 0) + outcomes.get("replayed", 0) <= summary["moves"]
    assert took < 30, took


def test_a_node_bot_whose_token_the_gateway_never_issued_stops_at_once_saying_401(
    node: list[str], gateways: Gateways
) -> None:
    """A refused handshake is only a failed connection to a WebSocket client (no status, no
    body): the bot asks the same URL without the upgrade, is told 401 unauthorized, and stops
    (exit 1) rather than retrying a socket that will never open."""
    g = gateways
    match_id = create(g.url, [None, None], rules={"family": "express"})
    seat = 1
    started = time.monotonic()
    code, printed, err = asyncio.run(run_bot(node, g.url, match_id, seat, "not-a-token"))
    assert code == 1, (printed, err)
    assert "401" in err and "unauthorized" in err, err
    summary = printed[-1]["summary"]
    assert summary["handshakes_failed"] == 1 and summary["events"] == 0, summary
    assert time.monotonic() - started < 10
