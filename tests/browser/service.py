"""The running stack as the page tests use it: its HTTP API, the ``domino`` command on its Redis,
and a steady outside player that makes a match between bots last long enough to watch."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from domino_sdk import Bot
from domino_sdk.model import Move
from domino_sdk.protocol import MoveBody, ResignBody
from domino_sdk.views import View

from tests.gateway.conftest import Gateways
from tests.support.cli import run_domino

API = "/api/v1"


class Steady(Bot):
    """An outside player that takes ``pace`` seconds over each move (its first legal one), and
    resigns at its next turn once stopped: a match against a house bot then lasts as long as a
    test needs to watch it. Cleared, ``going`` holds it before its next move (for less than the
    match's deadline), so that a test can look at a live match that cannot end meanwhile."""

    name = "steady"

    def __init__(self, match_id: str, pace: float) -> None:
        self.match_id = match_id
        self.pace = pace
        self.stopped = threading.Event()
        self.going = threading.Event()
        self.going.set()

    def choose(self, view: View) -> Move | MoveBody:
        """Wait, then play the first legal move (or resign, once stopped)."""
        self.going.wait(10.0)
        if self.stopped.wait(self.pace):
            return ResignBody()
        return view.legal[0]


@dataclass
class Service:
    """The stack's gateway and Redis, reached as a page and an operator would reach them."""

    gateways: Gateways
    players: list[tuple[Steady, threading.Thread]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.gateways.url

    def get(self, path: str, **params: Any) -> Any:
        """GET an API path (``/matches/...``); its JSON, which must come with a 200."""
        r = httpx.get(f"{self.url}{API}{path}", params=params, timeout=10.0)
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text}"
        return r.json()

    def create(
        self,
        seats: list[str | None],
        *,
        family: str = "express",
        target: int = 20,
        deadline_ms: int | None = None,
    ) -> str:
        """Open a match through the lobby; its id."""
        body: dict[str, Any] = {
            "seats": seats,
            "rules": {"family": family, "players": len(seats), "target": target},
        }
        if deadline_ms is not None:
            body["deadline_ms"] = deadline_ms
        r = httpx.post(f"{self.url}{API}/matches", json=body, timeout=10.0)
        assert r.status_code == 201, r.text
        match_id: str = r.json()["match"]["match_id"]
        return match_id

    def join(self, match_id: str, name: str, seat: int = 0) -> str:
        """Take a seat; its token."""
        r = httpx.post(
            f"{self.url}{API}/matches/{match_id}/join",
            json={"name": name, "seat": seat},
            timeout=10.0,
        )
        assert r.status_code == 201, r.text
        token: str = r.json()["token"]
        return token

    def resign(self, match_id: str, seat: int, token: str) -> None:
        """Concede a match for a seat (so that a test leaves no match waiting on it)."""
        r = httpx.post(
            f"{self.url}{API}/matches/{match_id}/seats/{seat}/moves",
            json={"type": "resign"},
            headers={"authorization": f"Bearer {token}", "idempotency-key": "resign"},
            timeout=10.0,
        )
        assert r.status_code in (200, 201, 202), r.text

    def steady_match(
        self, pace: float, *, family: str = "express", target: int = 20, start: bool = True
    ) -> Steady:
        """A match of a steady player (seat 0) against the greedy house bot; its player, whose
        ``match_id`` names it. Unless ``start``, the seat waits until :meth:`play` is called."""
        match_id = self.create([None, "greedy"], family=family, target=target, deadline_ms=20_000)
        player = Steady(match_id, pace)
        if start:
            self.play(player)
        return player

    def play(self, player: Steady) -> None:
        """Seat the steady player in its match and let it play there, in a thread of its own."""
        token = self.join(player.match_id, "steady")
        thread = threading.Thread(target=player.run, args=(self.url, token), daemon=True)
        thread.start()
        self.players.append((player, thread))

    def stop_players(self) -> None:
        """Stop every steady player: each resigns at its next turn."""
        for player, thread in self.players:
            player.stopped.set()
            thread.join(timeout=10.0)
        self.players.clear()

    def finished_match(self, seats: list[str], *, family: str = "express", target: int = 20) -> str:
        """A whole match between house bots, waited for until it is over; its id."""
        match_id = self.create(list(seats), family=family, target=target)
        self.wait_over(match_id)
        return match_id

    def wait_over(self, match_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the lobby lists the match as finished; its summary."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.get("/matches", status="finished")["matches"]
            for row in rows:
                if row["match_id"] == match_id:
                    summary: dict[str, Any] = row
                    return summary
            time.sleep(0.1)
        pytest.fail(f"match {match_id} was not finished after {timeout} s")

    def version(self, match_id: str) -> int:
        """How many events the match has."""
        version: int = self.get(f"/matches/{match_id}")["version"]
        return version

    def events(self, match_id: str) -> list[dict[str, Any]]:
        """The match's log, every event whole (as stored, hands and all), oldest first."""
        with ThreadPoolExecutor(1) as aside:  # Playwright's loop runs in this thread
            log = aside.submit(self.gateways.log, match_id).result()
        return [msgspec.to_builtins(e.event) for e in log]

    def domino(self, *args: str) -> str:
        """``domino ARGS`` on the stack's Redis; its output, once it has exited 0."""
        done = run_domino(*args, env=self.gateways.stack.env())
        assert done.returncode == 0, f"domino {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def replay_view(self, match_id: str, at: int, seat: int | None = None) -> dict[str, Any]:
        """What ``domino replay ID --at N [--seat K] --json`` shows: the View at event N."""
        args = ["replay", match_id, "--at", str(at), "--json"]
        if seat is not None:
            args += ["--seat", str(seat)]
        view: dict[str, Any] = json.loads(self.domino(*args).strip().splitlines()[-1])
        return view

    def replay_views(
        self, match_id: str, wanted: list[tuple[int, int | None]]
    ) -> dict[tuple[int, int | None], dict[str, Any]]:
        """:meth:`replay_view` at each (event, seat) wanted, the commands run side by side."""
        with ThreadPoolExecutor(len(wanted)) as pool:
            views = pool.map(lambda w: self.replay_view(match_id, *w), wanted)
            return dict(zip(wanted, views, strict=True))

    def last_view(self, match_id: str) -> dict[str, Any]:
        """The public View after the match's last event, as the gateway's replay gives it."""
        view: dict[str, Any] = self.get(f"/matches/{match_id}/replay")["frames"][-1]["view"]
        return view


class Relay:
    """A TCP relay in front of the gateway whose open connections a test can cut, as a network
    that drops does: the browser's streams end mid-way (Chromium's offline mode alone leaves a
    stream already open flowing)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target)
            except OSError:
                return  # closed
            with self.lock:
                self.open |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        self._drop(source, sink)

    def _drop(self, *sockets: socket.socket) -> None:
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
            with self.lock:
                self.open.discard(s)

    def cut(self) -> None:
        """End every connection open now (new ones are relayed as before)."""
        with self.lock:
            sockets = list(self.open)
        self._drop(*sockets)

    def close(self) -> None:
        """Stop relaying."""
        self.listener.close()
        self.cut()


@contextlib.contextmanager
def relaying(url: str) -> Iterator[Relay]:
    """A :class:`Relay` to ``url`` for the length of the block."""
    relay = Relay(url)
    try:
        yield relay
    finally:
        relay.close()


@contextlib.contextmanager
def serving(gateways: Gateways) -> Iterator[Service]:
    """The service for the session; its steady players are stopped at the end."""
    service = Service(gateways)
    try:
        yield service
    finally:
        service.stop_players()
