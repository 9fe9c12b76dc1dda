"""A bot in another language plays an account's matches over the account socket: the Node bot
tests/gateway/node/account_bot.mjs (Node's built-in WebSocket, written from docs/protocol.md
alone) against a real gateway, through the proxy that cuts its connection again and again
(tests/gateway/test_socket_node.py), so that it must resume with the cursor of the last frame
it read to see each line once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.gateway.account_channel import feed_lines, seen_by
from tests.gateway.conftest import Gateways
from tests.gateway.test_account_socket import challenge_house
from tests.gateway.test_accounts import register, unique
from tests.gateway.test_socket_node import CuttingProxy
from tests.gateway.test_socket_node import node as node_fixture

pytestmark = pytest.mark.service

node = node_fixture  # how to run Node with its WebSocket client (test_socket_node.py)

BOT = Path(__file__).parent / "node" / "account_bot.mjs"


async def run_bot(
    command: list[str], url: str, token: str, matches: int
) -> tuple[int, list[dict[str, Any]], str]:
    """Run the Node bot for the account at the gateway at ``url``, from cursor 0: its exit
    status, the JSON lines it printed and what it said on stderr."""
    bot = await asyncio.create_subprocess_exec(
        *command,
        str(BOT),
        "--url",
        url,
        "--matches",
        str(matches),
        "--cursor",
        "0",
        env={**os.environ, "DOMINO_TOKEN": token},  # not on its command line, for ps to show
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(bot.communicate(), 90)
    finally:
        if bot.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                bot.kill()
            await bot.wait()
    assert bot.returncode is not None
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return bot.returncode, lines, err.decode()


def test_a_node_bot_cut_off_again_and_again_plays_its_accounts_matches_reading_each_line_once(
    node: list[str], gateways: Gateways
) -> None:
    """Two matches of the account against a house bot, played by the Node bot over the
    account socket through a proxy that cuts it every few frames: it exits 0 once both
    finished; the account lines it read are the feed's, each once, in order; each seat's
    events are its match's log as the seat sees it, 1..n once each; it opened the socket again
    after each cut; and every move whose outcome reached it was accepted or a replay."""
    g = gateways
    _, token = register(g.url, unique("node"))
    matches = {challenge_house(g.url, token, ["random"]) for _ in range(2)}
    gateway = urlsplit(g.url)
    assert gateway.hostname is not None and gateway.port is not None
    proxy = CuttingProxy(gateway.hostname, gateway.port)

    async def run() -> tuple[int, list[dict[str, Any]], str]:
        server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await run_bot(node, f"http://127.0.0.1:{port}", token, len(matches))

    code, printed, err = asyncio.run(run())
    assert code == 0, err
    *read, last = printed
    summary = last["summary"]
    account = [line for line in read if "account" in line and line["account"] is not None]
    feed = feed_lines(g.url, token)
    assert [(a["account"], a["type"]) for a in account] == [
        (line["id"], line["type"]) for line in feed
    ][: len(account)]
    assert set(summary["finished"]) == matches
    for match_id in matches:
        events = [line for line in read if line.get("match") == match_id]
        truth = seen_by(g, match_id, 0)
        assert [(e["id"], e["type"]) for e in events] == [
            (t["id"], t["event"]["type"]) for t in truth
        ], err
        assert events[-1]["type"] == "match_ended"
    # every cut but the last is followed by a reconnect: the last may come as the bot, its
    # matches told whole, is already on its way out
    assert proxy.cuts >= 2 and summary["reconnects"] >= proxy.cuts - 1, (proxy.cuts, summary)
    assert set(summary["outcomes"]) <= {"accepted", "replayed"}, (summary, err)
