"""deploy/nginx/ in front of a real gateway: a real nginx, its shipped config rendered on free
ports. Streams come through it line by line and to their end; its per-address limits bite
(connections, lobby writes, body size) before the gateway is asked.

Skipped only when there is no ``nginx`` binary (CI installs it: .ci/run).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, join
from tests.gateway.test_connections import closed_within, sockets, spectate_request
from tests.support.tools import missing

pytestmark = [pytest.mark.service]

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "gateway.conf.template"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
)
PER_ADDRESS = 4


def render(template: Path, values: dict[str, str]) -> str:
    """The template with its ``${NAME}`` placeholders filled in, as envsubst does with the
    names it is given (nginx's own ``$variables`` stay)."""
    text = template.read_text()
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    assert "${DOMINO_" not in text, "a placeholder is left unfilled"
    return text


def main_config(root: Path, include: Path) -> str:
    """An nginx.conf that runs in ``root`` and includes the rendered http-context file."""
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {root}/{kind};" for kind in ("client_body", "proxy", "fastcgi")
    )
    return f"""{user}worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
{temp}
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include {include};
}}
"""


def configured(root: Path, port: int, upstream: str) -> Path:
    """Write the shipped config, rendered, and a main config around it; return the latter."""
    conf = root / "gateway.conf"
    conf.write_text(
        render(
            TEMPLATE,
            {
                "DOMINO_NGINX_PORT": f"127.0.0.1:{port}",
                "DOMINO_GATEWAY_UPSTREAM": upstream,
                "DOMINO_NGINX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
            },
        )
    )
    main = root / "nginx.conf"
    main.write_text(main_config(root, conf))
    return main


@pytest.fixture(scope="module")
def proxied(gateways: Gateways, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nginx on a free port in front of a gateway that trusts it; its URL."""
    if NGINX is None:
        missing("no nginx binary: install nginx (apt-get install nginx) to run these")
    env = {
        **PLAY_LIMITS,
        "DOMINO_GATEWAY_TRUSTED_PROXIES": "127.0.0.1",
        "DOMINO_GATEWAY_KEEPALIVE_S": "1",
    }
    with (
        gateways.spawned("gateway-nginx", free_port(), env) as upstream,
        _nginx(upstream.removeprefix("http://"), tmp_path_factory.mktemp("nginx")) as url,
    ):
        yield url


@contextlib.contextmanager
def _nginx(upstream: str, root: Path) -> Iterator[str]:
    """nginx on a free port, configured under ``root``, in front of ``upstream``; its URL."""
    port = free_port()
    main = configured(root, port, upstream)
    process = subprocess.Popen(
        [
            NGINX,
            "-p",
            str(root),
            "-c",
            str(main),
            "-e",
            str(root / "error.log"),
            "-g",
            "daemon off;",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                out = process.stdout.read() if process.stdout else b""
                pytest.fail(f"nginx exited: {out.decode(errors='replace')}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "nginx did not answer"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_match_streams_through_nginx_to_its_end(proxied: str) -> None:
    match_id = create(proxied, ["random", "random"], rules={"players": 2})
    lines = []
    with httpx.stream(
        "GET", f"{proxied}/api/v1/matches/{match_id}/stream", params={"after": 0}, timeout=30
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [line for line in r.iter_lines() if line.strip()]
    assert '"match_created"' in lines[0]
    assert '"match_ended"' in lines[-1]


def test_a_seats_socket_is_opened_and_plays_through_nginx(proxied: str) -> None:
    """The WebSocket upgrade passes through: the socket's snapshot comes down, a move goes
    up and is answered under its key, and a handshake with an unknown token is refused by the
    gateway through nginx as it would be without it."""
    match_id = create(proxied, [None, None], rules={"players": 2})
    tokens = dict(join(proxied, match_id) for _ in range(2))
    url = f"ws{proxied.removeprefix('http')}/api/v1/matches/{match_id}/seats/0/socket"

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        headers = {"Authorization": f"Bearer {tokens[0]}"}
        async with connect(url, additional_headers=headers, proxy=None) as sock:
            snapshot = json.loads(await asyncio.wait_for(sock.recv(), 10))
            up = {"type": "move", "key": "n1", "move": {"type": "draw_tile"}}
            await sock.send(json.dumps(up))
            while True:
                answer = json.loads(await asyncio.wait_for(sock.recv(), 10))
                if answer["type"] != "line":
                    return snapshot, answer

    snapshot, answer = asyncio.run(run())
    assert snapshot["type"] == "line" and snapshot["line"]["type"] == "snapshot"
    assert (answer["type"], answer["key"], answer["rule"]) == ("rejected", "n1", "E1")

    async def refused() -> int:
        try:
            async with connect(url, additional_headers={"Authorization": "Bearer no"}, proxy=None):
                return 101
        except InvalidStatus as e:
            return e.response.status_code

    assert asyncio.run(refused()) == 401


def test_stream_lines_come_through_nginx_as_they_are_written(proxied: str) -> None:
    """Keep-alives a second apart arrive a second apart: nginx buffers nothing of a stream."""
    match_id = create(proxied, [None, None], rules={"players": 2})
    arrivals = []
    with httpx.stream("GET", f"{proxied}/api/v1/matches/{match_id}/stream", timeout=10) as r:
        assert r.status_code == 200
        started = time.monotonic()
        for _ in r.iter_raw():
            arrivals.append(time.monotonic() - started)
            if len(arrivals) >= 3 or time.monotonic() - started > 6:
                break
    assert len(arrivals) >= 3, arrivals
    assert arrivals[-1] - arrivals[0] >= 1.0, arrivals  # not all at once


def test_past_its_connections_per_address_nginx_answers_429_while_streams_go_on(
    proxied: str,
) -> None:
    match_id = create(proxied, [None, None], rules={"players": 2})
    with sockets(proxied, PER_ADDRESS) as streams:
        for s in streams:
            s.sendall(spectate_request(match_id))
        for s in streams:
            closed, got = closed_within(s, 1.0)
            assert not closed and got.startswith(b"HTTP/1.1 200"), got[:200]
        assert httpx.get(f"{proxied}/healthz").status_code == 429
        for s in streams:
            closed, got = closed_within(s, 1.5)
            assert not closed and got, "a stream stopped when the limit was reached"
    deadline = time.monotonic() + 5
    while httpx.get(f"{proxied}/healthz").status_code != 200:
        assert time.monotonic() < deadline, "closed streams did not free their places"
        time.sleep(0.1)


def test_nginx_limits_lobby_writes_per_address_and_caps_bodies(proxied: str) -> None:
    body = {"seats": [None, None], "rules": {"players": 2}}
    with httpx.Client() as http:
        codes = [http.post(f"{proxied}/api/v1/matches", json=body).status_code for _ in range(40)]
        assert 429 in codes and codes[0] == 201, codes
        huge = b"{" + b" " * 20_000 + b"}"
        r = http.post(
            f"{proxied}/api/v1/matches",
            content=huge,
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 413
    # reads are not counted as writes
    assert httpx.get(f"{proxied}/api/v1/matches").status_code == 200


def test_a_client_cannot_name_its_own_address_through_nginx(proxied: str) -> None:
    """nginx overwrites X-Forwarded-For with the peer's address, so a forged one changes
    nothing: the request is served as any other."""
    r = httpx.get(f"{proxied}/readyz", headers={"x-forwarded-for": "203.0.113.9"})
    assert r.status_code == 200
    with socket.create_connection(("127.0.0.1", int(proxied.rpartition(":")[2]))) as s:
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 200")
