"""``domino demo``, as a newcomer runs it (README): the embedded Redis, the whole stack and a
gateway serving the pages while the matches play, then the results and where to see them again."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.service


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_serves_its_matches_while_they_play_and_says_how_to_see_them_again(
    tmp_path: Path,
) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {"DOMINO_DATA_DIR": str(tmp_path / "redis"), "DOMINO_GATEWAY_PORT": str(port)}
    demo = subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", "demo", "--matches", "2", "--pace-ms", "40"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert demo.stdout is not None
        seen = ""
        while "Watch the matches" not in seen:
            line = demo.stdout.readline()
            assert line, f"the demo ended before naming its pages:\n{seen}"
            seen += line
        assert f"http://127.0.0.1:{port}/" in seen
        deadline = time.monotonic() + 30
        while True:  # the lobby page and the live list answer while the matches play
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                live = httpx.get(f"http://127.0.0.1:{port}/api/v1/matches?status=live", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the demo's gateway never answered"
                time.sleep(0.2)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert live.status_code == 200
        out, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, seen + out
    example = re.search(r"domino replay (m-[0-9a-f]+)\n", out)
    assert example is not None, out
    assert "domino up" in out and f"/replay/{example.group(1)}" in out
    for log in (tmp_path / "logs").glob("*.log"):  # each process signed in as its own role
        assert "NOPERM" not in log.read_text(errors="replace"), log.name
