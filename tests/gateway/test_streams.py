"""Seat and spectator streams: a snapshot, then every event once, in order, across dropped
connections; deadlines and timeouts; the minimal stream; the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import msgspec
import pytest

from engine.views import public_view, redact, view_for
from tests.gateway.conftest import Gateways, create, join, states_by_version

pytestmark = pytest.mark.service


def builtins(value: Any) -> Any:
    """What a struct looks like once it has gone through JSON."""
    return json.loads(msgspec.json.encode(value))


def sse_frames(text: str) -> list[dict[str, Any]]:
    """The complete events of a server-sent event stream (comments are keep-alives)."""
    frames = []
    for block in text.split("\n\n")[:-1]:
        fields = dict(
            line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":")
        )
        if fields:
            frames.append(fields)
    return frames


async def play_with_drops(g: Gateways, match_id: str, seat: int, token: str) -> dict[str, Any]:
    """Play a seat (first legal move) and drop the stream right after each few moves; resume
    alternately with Last-Event-ID and ``?after=``. Return every line and how many connections."""
    auth = {"authorization": f"Bearer {token}"}
    path = f"/api/v1/matches/{match_id}/seats/{seat}"
    lines: list[dict[str, Any]] = []
    last: int | None = None
    connections = 0
    async with httpx.AsyncClient(base_url=g.url, headers=auth, timeout=10) as http:
        while True:
            headers, params = {}, {}
            if last is not None and connections % 2:
                headers["last-event-id"] = str(last)
            elif last is not None:
                params["after"] = str(last)
            connections += 1
            moved = 0
            ended = False
            async with http.stream("GET", f"{path}/stream", headers=headers, params=params) as r:
                assert r.status_code == 200, await r.aread()
                async for raw in r.aiter_lines():
                    if not raw:
                        continue
                    line = json.loads(raw)
                    lines.append(line)
                    last = line["id"]
                    view = line.get("view")
                    if line["type"] == "event" and line["event"]["type"] == "match_ended":
                        ended = True
                        break
                    if view and view["turn"] == seat and view["legal"]:
                        move = view["legal"][0]
                        answer = await http.post(
                            f"{path}/moves",
                            json=move,
                            headers={"idempotency-key": f"v{view['version']}"},
                        )
                        assert answer.status_code == 200, answer.text
                        moved += 1
                        if moved == 1 + connections % 3:
                            break  # drop the connection: events happen while we are away
            if ended:
                return {"lines": lines, "connections": connections}
            await asyncio.sleep(0.15)


async def spectate_with_drops(g: Gateways, match_id: str) -> dict[str, Any]:
    """Follow the public stream as server-sent events, dropping it every few events and
    resuming with Last-Event-ID."""
    frames: list[dict[str, Any]] = []
    last: str | None = None
    connections = 0
    async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
        while True:
            headers = {"accept": "text/event-stream"}
            if last is not None:
                headers["last-event-id"] = last
            connections += 1
            ended = False
            text = ""
            async with http.stream(
                "GET", f"/api/v1/matches/{match_id}/stream", headers=headers
            ) as r:
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                got = 0
                async for chunk in r.aiter_text():
                    text += chunk
                    complete = sse_frames(text)
                    text = text[text.rfind("\n\n") + 2 :] if "\n\n" in text else text
                    for frame in complete:
                        frames.append(frame)
                        last = frame["id"]
                        got += 1
                        data = json.loads(frame["data"])
                        if data["type"] == "event" and data["event"]["type"] == "match_ended":
                            ended = True
                    if ended or got >= 9:
                        break
            if ended:
                return {"frames": frames, "connections": connections}
            await asyncio.sleep(0.1)


def test_dropped_seat_and_spectator_streams_resume_with_nothing_lost_or_repeated(
    gateways: Gateways,
) -> None:
    """Every event id exactly once across many connections, each event redacted for its
    receiver (C8), every view what view_for / public_view says at that version."""
    g = gateways
    # a target that takes several rounds, so the streams are dropped many times
    match_id = create(g.url, ["random", None], rules={"players": 2, "target": 150})
    seat, token = join(g.url, match_id)

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        spectator = asyncio.create_task(spectate_with_drops(g, match_id))
        played = await play_with_drops(g, match_id, seat, token)
        return played, await asyncio.wait_for(spectator, 30)

    played, watched = asyncio.run(both())
    log = g.log(match_id)
    states = states_by_version(log)
    n = len(log)

    lines = played["lines"]
    assert played["connections"] >= 4
    assert lines[0]["type"] == "snapshot"
    assert [x["type"] for x in lines].count("snapshot") == 1
    v0 = lines[0]["id"]
    assert lines[0]["view"] == builtins(view_for(states[v0], seat))
    events = [x for x in lines if x["type"] == "event"]
    assert [e["id"] for e in events] == list(range(v0 + 1, n + 1))
    for e in events:
        assert e["event"] == builtins(redact(log[e["id"] - 1].event, seat))
    turns = [x for x in lines if x["type"] == "turn"]
    assert turns
    assert len({t["id"] for t in turns}) == len(turns)  # each turn once (we drop after moving)
    for t in turns:
        assert states[t["id"]].turn == seat
        assert t["view"] == builtins(view_for(states[t["id"]], seat))

    frames = watched["frames"]
    assert watched["connections"] >= 3
    data = [json.loads(f["data"]) for f in frames]
    assert [f["event"] for f in frames] == [d["type"] for d in data]
    assert [int(f["id"]) for f in frames] == [d["id"] for d in data]
    assert data[0]["type"] == "snapshot"
    w0 = data[0]["id"]
    assert data[0]["view"] == builtins(public_view(states[w0])) if w0 else data[0]["view"] is None
    seen = [d for d in data if d["type"] == "event"]
    assert [d["id"] for d in seen] == list(range(w0 + 1, n + 1))
    for d in seen:
        assert d["event"] == builtins(redact(log[d["id"] - 1].event, None))
    assert all(d["type"] != "turn" for d in data)


def test_a_seat_that_misses_its_deadline_sees_the_timeout_and_a_minimal_stream_says_no_more(
    gateways: Gateways,
) -> None:
    """Turns carry their deadline; the referee's timeout reaches the seat's stream. With
    events=minimal a seat gets its snapshot, its turns and its own timeouts, nothing else."""
    g = gateways
    match_id = create(g.url, [None, None], rules={"players": 2}, deadline_ms=300)
    seats = dict(join(g.url, match_id) for _ in range(2))

    async def watch(seat: int, events: str, until: int) -> list[dict[str, Any]]:
        path = f"/api/v1/matches/{match_id}/seats/{seat}/stream"
        got: list[dict[str, Any]] = []
        auth = {"authorization": f"Bearer {seats[seat]}"}
        async with (
            httpx.AsyncClient(base_url=g.url, headers=auth, timeout=10) as http,
            # from the start: a stream that connects late still sees the first timeouts
            http.stream("GET", path, params={"events": events, "after": "0"}) as r,
        ):
            async for raw in r.aiter_lines():
                if raw:
                    got.append(json.loads(raw))
                timeouts = [
                    x
                    for x in got
                    if x["type"] == "event" and x["event"]["type"] == "turn_timed_out"
                ]
                if len(timeouts) >= until:
                    return got
        return got

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        full = asyncio.create_task(watch(0, "all", 2))
        minimal = asyncio.create_task(watch(1, "minimal", 1))
        return await asyncio.wait_for(asyncio.gather(full, minimal), 20)

    full, minimal = asyncio.run(both())
    timeouts = [
        x["event"]["seat"]
        for x in full
        if x["type"] == "event" and x["event"]["type"] == "turn_timed_out"
    ]
    assert set(timeouts) == {0, 1}  # seat 0 sees both seats' timeouts
    for line in full + minimal:
        view = line.get("view")
        if view and view["turn"] == view["seat"] and view["phase"] == "playing":
            assert line["deadline"] is not None
            assert 0 < line["deadline"] - time.time() < 60 or line["deadline"] < time.time()
    kinds = {(x["type"], x.get("event", {}).get("type")) for x in minimal}
    assert ("event", "turn_timed_out") in kinds
    assert kinds <= {
        ("snapshot", None),
        ("turn", None),
        ("event", "turn_timed_out"),
        ("event", "round_ended"),
    }
    assert all(x["event"]["seat"] == 1 for x in minimal if x["type"] == "event")


def test_the_gateway_serves_an_openapi_document_naming_every_endpoint(gateways: Gateways) -> None:
    """OpenAPI 3.1 with the lobby, stream and move endpoints and their schemas."""
    r = httpx.get(f"{gateways.url}/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    m = "/api/v1/matches/{match_id}"
    assert set(doc["paths"]) >= {
        "/api/v1/matches",
        m,
        f"{m}/join",
        f"{m}/stream",
        f"{m}/seats/{{seat}}/stream",
        f"{m}/seats/{{seat}}/moves",
        "/api/v1/seat",
    }
    schemas = doc["components"]["schemas"]
    assert {"Line", "Move", "View", "Error", "Snapshot", "TurnLine", "EventLine"} <= set(schemas)
    moves = doc["paths"][f"{m}/seats/{{seat}}/moves"]["post"]["responses"]
    assert {"200", "400", "401", "403", "409", "413", "422", "429"} <= set(moves)


def test_a_seat_stream_opened_before_the_match_starts_waits_for_it_and_sees_it_begin(
    gateways: Gateways,
) -> None:
    """A lobby match starts when its last open seat is taken; an early stream says so."""
    g = gateways
    match_id = create(g.url, [None, None], rules={"players": 2})
    seat, token = join(g.url, match_id)
    auth = {"authorization": f"Bearer {token}"}
    url = f"{g.url}/api/v1/matches/{match_id}/seats/{seat}/stream"

    async def scenario() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        async with (
            httpx.AsyncClient(headers=auth, timeout=10) as http,
            http.stream("GET", url) as r,
        ):
            lines = r.aiter_lines()
            first = json.loads(await anext(lines))
            assert first == {
                "type": "snapshot",
                "id": 0,
                "match_id": match_id,
                "seat": seat,
                "view": None,
                "deadline": None,
                "remaining_ms": None,
            }
            await asyncio.to_thread(join, g.url, match_id)  # the last seat: the match starts
            async for raw in lines:
                if raw:
                    got.append(json.loads(raw))
                if len([x for x in got if x["type"] == "event"]) >= 2:
                    return got
        return got

    got = asyncio.run(asyncio.wait_for(scenario(), 10))
    events = [x for x in got if x["type"] == "event"]
    assert [e["event"]["type"] for e in events[:2]] == ["match_created", "round_started"]
    assert [e["id"] for e in events[:2]] == [1, 2]
    assert events[1]["event"]["hands"][1 - seat] is None
