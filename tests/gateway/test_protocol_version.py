"""The protocol's version, on real gateway processes: every answer states it in the
``Domino-Protocol`` header (errors, pages, streams and the connection layer's own refusals
too); a request without the header is served as version 1; one naming a version the gateway
does not speak, or no version at all, is refused 400 ``unsupported_protocol`` on every kind of
route — a plain read, a move, seat, spectator and account streams as NDJSON and as SSE —
before anything is done or a line is sent; the OpenAPI document says all of it."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from services.gateway.openapi import openapi
from tests.gateway.conftest import Gateways, create, join

pytestmark = pytest.mark.service

API = "/api/v1"
HEADER = "domino-protocol"
UNSPOKEN = ["2", "0", "abc", "1.0", "01", ""]
"""Newer, older, no number, a point, a leading zero, empty: none is a version spoken."""


def stated(r: httpx.Response) -> None:
    """The answer says it is in version 1 of the protocol."""
    assert r.headers.get(HEADER) == "1", (r.status_code, dict(r.headers))


def refused(r: httpx.Response) -> dict[str, Any]:
    """The typed refusal of a version not spoken: 400, JSON, the versions spoken, what to do,
    and the answer itself in version 1."""
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json", r.headers
    stated(r)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "message", "supported"}, body
    assert body["error"] == "unsupported_protocol"
    assert body["supported"] == [1]
    assert "version 1" in body["message"]
    return body


def seated(g: Gateways) -> tuple[str, int, str]:
    """A live two-player match against a house bot, a minute a turn: its id, the open seat
    taken and that seat's token."""
    match_id = create(g.url, ["random", None], deadline_ms=60_000)
    seat, token = join(g.url, match_id, name="versioned")
    return match_id, seat, token


@pytest.fixture(scope="module")
def table(gateways: Gateways) -> tuple[str, int, str]:
    """One seated match for the tests that only read."""
    return seated(gateways)


def auth(token: str, **headers: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", **headers}


def turn_of(g: Gateways, match_id: str, seat: int, token: str) -> dict[str, Any]:
    """The seat's next turn line, read with the version named."""
    r = httpx.get(
        f"{g.url}{API}/matches/{match_id}/seats/{seat}/stream",
        params={"until": "turn"},
        headers=auth(token, **{HEADER: "1"}),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    stated(r)
    line: dict[str, Any] = json.loads(r.text.strip().splitlines()[-1])
    assert line["type"] == "turn", line
    return line


def register(g: Gateways) -> str:
    """A new account's token."""
    r = httpx.post(f"{g.url}{API}/accounts", json={"name": f"pv{uuid.uuid4().hex[:10]}"})
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


# -- every answer states its version ------------------------------------------------------------


def test_every_answer_states_version_1_whatever_route_or_status_made_it(
    gateways: Gateways, table: tuple[str, int, str]
) -> None:
    """Reads, writes, errors of the handlers, of the router (404, 405) and of the guards (a
    foreign Origin), the pages and their files, the probes, and the start of a stream."""
    g = gateways
    match_id, seat, token = table
    api = f"{g.url}{API}"
    with httpx.Client(timeout=10) as http:
        answers = [
            http.get(f"{g.url}/healthz"),
            http.get(f"{g.url}/readyz"),
            http.get(f"{api}/openapi.json"),
            http.get(f"{api}/matches", params={"status": "live"}),
            http.get(f"{api}/matches/{match_id}"),
            http.get(f"{api}/matches/{match_id}/replay"),
            http.get(f"{api}/seat", headers=auth(token)),
            http.get(f"{api}/seat"),  # 401
            http.post(f"{api}/matches", json={"seats": ["nobody-serves-this"]}),  # 409/422
            http.post(f"{api}/matches", content=b"{", headers={"content-type": "text/plain"}),
            http.post(f"{api}/matches", json={}, headers={"origin": "https://evil.example"}),
            http.get(f"{api}/no/such/endpoint"),  # 404 from the router
            http.request("PATCH", f"{api}/matches"),  # 405
            http.get(f"{g.url}/"),  # the lobby page
            http.get(f"{g.url}/watch/{match_id}"),
            http.get(f"{g.url}/static/no-such-file.js"),
            http.get(f"{g.url}/metrics"),  # 401 without the operator's token
        ]
        statuses = {r.status_code for r in answers}
        assert {200, 401, 403, 404, 405, 415} <= statuses, statuses
        for r in answers:
            stated(r)
        # a stream states it before its first line
        stream = f"{api}/matches/{match_id}/seats/{seat}/stream"
        with http.stream("GET", stream, headers=auth(token)) as r:
            assert r.status_code == 200
            stated(r)
        with http.stream("GET", f"{api}/matches/{match_id}/stream?format=sse") as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            stated(r)


def test_a_move_and_its_rate_limit_state_the_version_too(gateways: Gateways) -> None:
    """The hot path (a move, taken before the router), and its 429 on the strict gateway."""
    g = gateways
    match_id, seat, token = seated(g)
    turn = turn_of(g, match_id, seat, token)
    path = f"{API}/matches/{match_id}/seats/{seat}/moves"
    r = httpx.post(
        f"{g.url}{path}",
        json=turn["view"]["legal"][0],
        headers=auth(token, **{"idempotency-key": f"v{turn['id']}"}),
    )
    assert r.status_code == 200, r.text
    stated(r)
    with httpx.Client(timeout=10) as http:  # 4 moves a second there, bursts of 6
        answers = [
            http.post(
                f"{g.strict_url}{path}",
                content=b"{",
                headers=auth(token, **{"idempotency-key": f"k{i}"}),
            )
            for i in range(20)
        ]
    assert 429 in {r.status_code for r in answers}
    for r in answers:
        stated(r)


def test_the_connection_layers_own_refusal_states_the_version(gateways: Gateways) -> None:
    """A head over 32 KiB is refused (431) before any request is read, by the connection's
    protocol rather than the app: that answer states the gateway's version as well."""
    host, port = gateways.url.removeprefix("http://").split(":")
    got = b""
    for _ in range(5):  # the answer may be lost to a reset while we were still writing
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                s.sendall(b"".join(b"X-Padding: " + b"x" * 1000 + b"\r\n" for _ in range(34)))
            with contextlib.suppress(ConnectionResetError, TimeoutError):
                while chunk := s.recv(65536):
                    got += chunk
        if got:
            break
    assert got.startswith(b"HTTP/1.1 431"), got[:200]
    head = got.split(b"\r\n\r\n", 1)[0].lower()
    assert b"\r\ndomino-protocol: 1\r\n" in head + b"\r\n", head


# -- no header: version 1 ----------------------------------------------------------------------


def test_a_request_without_the_header_is_served_as_version_1(
    gateways: Gateways, table: tuple[str, int, str]
) -> None:
    """curl, browsers and the pages send none: they are answered, in version 1, as a client
    that names it is; the health answer names the version and every one spoken."""
    g = gateways
    health = httpx.get(f"{g.url}/healthz")
    stated(health)
    assert health.json() == {**health.json(), "ok": True, "protocol": 1, "supported": [1]}
    match_id, seat, token = table
    bare = httpx.get(f"{g.url}{API}/matches/{match_id}")
    named = httpx.get(f"{g.url}{API}/matches/{match_id}", headers={HEADER: "1"})
    for r in (bare, named):
        assert r.status_code == 200, r.text
        stated(r)
    assert bare.json()["match_id"] == named.json()["match_id"] == match_id
    r = httpx.get(
        f"{g.url}{API}/matches/{match_id}/seats/{seat}/stream",
        params={"until": "turn"},
        headers=auth(token),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    stated(r)
    assert json.loads(r.text.splitlines()[0])["type"] == "snapshot"


# -- a version not spoken: refused, on every kind of route ---------------------------------------


@pytest.mark.parametrize("asked", UNSPOKEN, ids=repr)
def test_a_version_not_spoken_is_refused_on_a_plain_read(gateways: Gateways, asked: str) -> None:
    g = gateways
    for path in (f"{API}/matches", f"{API}/openapi.json", "/healthz", "/"):
        body = refused(httpx.get(f"{g.url}{path}", headers={HEADER: asked}))
    if asked == "0":
        assert "upgrade your client" in body["message"]
    if asked == "2":
        assert "older than the 2 your client speaks" in body["message"]
    if asked in ("abc", "1.0", "01", ""):
        assert "is no version of the protocol" in body["message"]


def test_the_docs_show_the_refusal_as_the_gateway_sends_it(gateways: Gateways) -> None:
    """docs/protocol.md's Versions section quotes the refusal of a client of version 0."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    section = text[text.index("## Versions") : text.index("## Settings")]
    quoted = re.search(r"```json\n(.*?)\n\s*```", section, re.S)
    assert quoted is not None, section
    r = httpx.get(f"{gateways.url}{API}/matches", headers={HEADER: "0"})
    assert refused(r) == json.loads(quoted[1])


def test_a_header_sent_twice_is_no_version_even_naming_1_twice(gateways: Gateways) -> None:
    """Two fields of one name are one list (RFC 9110): ``1, 1`` names no one version."""
    r = httpx.get(f"{gateways.url}{API}/matches", headers=[(HEADER, "1"), (HEADER, "1")])
    assert "'1, 1'" in refused(r)["message"]


@pytest.mark.parametrize("asked", ["2", "0", "abc", "1.0"])
def test_a_move_in_a_version_not_spoken_is_refused_and_not_applied(
    gateways: Gateways, asked: str
) -> None:
    """A legal move on the seat's turn, refused for its version: the log does not move, and
    the same move and key in version 1 is then applied for the first time (not replayed)."""
    g = gateways
    match_id, seat, token = seated(g)
    turn = turn_of(g, match_id, seat, token)
    moves = f"{g.url}{API}/matches/{match_id}/seats/{seat}/moves"
    move, key = turn["view"]["legal"][0], {"idempotency-key": f"v{turn['id']}"}
    before = len(g.log(match_id))
    refused(httpx.post(moves, json=move, headers=auth(token, **key, **{HEADER: asked})))
    assert len(g.log(match_id)) == before
    r = httpx.post(moves, json=move, headers=auth(token, **key, **{HEADER: "1"}))
    assert r.status_code == 200, r.text
    assert r.json()["replayed"] is False
    stated(r)


@pytest.mark.parametrize("asked", ["2", "0", "abc", "1.0"])
@pytest.mark.parametrize("framing", ["ndjson", "sse", "sse-by-accept"])
def test_a_stream_in_a_version_not_spoken_is_refused_before_it_starts(
    gateways: Gateways, table: tuple[str, int, str], asked: str, framing: str
) -> None:
    """The seat's stream, the spectators' and an account's play and event streams: each
    answers the JSON refusal, not a 200 with lines — nothing of the stream is ever sent."""
    g = gateways
    match_id, seat, token = table
    account = register(g)
    params = {"format": "sse"} if framing == "sse" else {}
    accept = {"accept": "text/event-stream"} if framing == "sse-by-accept" else {}
    streams = [
        (f"{API}/matches/{match_id}/seats/{seat}/stream", auth(token)),
        (f"{API}/matches/{match_id}/stream", {}),
        (f"{API}/account/play", auth(account)),
        (f"{API}/account/stream", auth(account)),
    ]
    with httpx.Client(base_url=g.url, timeout=10) as http:
        for path, headers in streams:
            with http.stream(
                "GET", path, params=params, headers={**headers, **accept, HEADER: asked}
            ) as r:
                r.read()
            refused(r)
            assert b"snapshot" not in r.content and b"data:" not in r.content
        # and in version 1 each of them starts as usual
        for path, headers in streams:
            with http.stream(
                "GET", path, params=params, headers={**headers, **accept, HEADER: "1"}
            ) as r:
                assert r.status_code == 200, (path, r.read())
                stated(r)


# -- the document --------------------------------------------------------------------------------


def test_the_openapi_document_declares_the_header_on_every_operation_and_answer(
    gateways: Gateways, table: tuple[str, int, str]
) -> None:
    """Every operation takes the header, every answer states it (required, version 1), and
    every operation's 400 admits the ProtocolError that real refusals match."""
    doc = openapi()
    assert doc["info"]["version"] == "1"
    header = doc["components"]["headers"]["Domino-Protocol"]
    assert header["required"] is True
    assert header["schema"] == {"type": "integer", "enum": [1]}
    validators: dict[str, Draft202012Validator] = {}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            asked = [p for p in operation["parameters"] if p["name"] == "Domino-Protocol"]
            assert [p["in"] for p in asked] == ["header"], (method, path)
            for status, answer in operation["responses"].items():
                assert "Domino-Protocol" in answer.get("headers", {}), (method, path, status)
            schema = operation["responses"]["400"]["content"]["application/json"]["schema"]
            validators[f"{method} {path}"] = Draft202012Validator(
                {**schema, "components": doc["components"]}
            )
    g = gateways
    match_id, seat, token = table
    for (method, path), url in {
        ("get", f"{API}/matches"): f"{API}/matches",
        ("post", f"{API}/matches/{{match_id}}/join"): f"{API}/matches/{match_id}/join",
        ("get", f"{API}/matches/{{match_id}}/seats/{{seat}}/stream"): (
            f"{API}/matches/{match_id}/seats/{seat}/stream"
        ),
        ("get", "/healthz"): "/healthz",
    }.items():
        r = httpx.request(method, f"{g.url}{url}", headers=auth(token, **{HEADER: "9"}))
        validators[f"{method} {path}"].validate(refused(r))
    served = httpx.get(f"{g.url}{API}/openapi.json").json()
    assert served["paths"] == json.loads(json.dumps(doc["paths"]))
