"""The OpenAPI document holds the gateway to its word on the routes for bots as players.

Every route the gateway serves is in the document, and nothing else; and the real answers of
accounts, the account and play streams, challenges, seeks, arenas, cancelling and resigning —
errors included — match their schemas: the body, the headers, the ``error`` codes each status
lists and the limits each 429 names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from starlette.routing import Route

from services.config import Settings
from services.gateway.app import create_app
from services.gateway.openapi import openapi
from tests.gateway.conftest import OPERATOR, Gateways, wait_for_version

pytestmark = [pytest.mark.service, pytest.mark.anyio]

DOCS = Path(__file__).resolve().parents[2] / "docs"

API = "/api/v1"
ACCOUNTS = f"{API}/accounts"
NAMED = f"{API}/accounts/{{name}}"
ME = f"{API}/account"
TOKEN = f"{API}/account/token"
FEED = f"{API}/account/stream"
PLAY = f"{API}/account/play"
CHALLENGES = f"{API}/challenges"
CHALLENGE = f"{API}/challenges/{{challenge_id}}"
SEEKS = f"{API}/seeks"
SEEK = f"{API}/seeks/{{seek_id}}"
ARENAS = f"{API}/arenas"
ARENA = f"{API}/arenas/{{arena_id}}"
MATCHES = f"{API}/matches"
MATCH = f"{API}/matches/{{match_id}}"
MOVES = f"{MATCH}/seats/{{seat}}/moves"
TEXT = {"content-type": "text/plain"}


def unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:8]}"


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def register(http: httpx.Client, name: str) -> str:
    """A new account's token."""
    r = http.post(ACCOUNTS, json={"name": name})
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    return token


class Spec:
    """The gateway's OpenAPI document, and checks of real answers against it."""

    def __init__(self, url: str) -> None:
        self.doc: dict[str, Any] = httpx.get(f"{url}{API}/openapi.json").json()
        self.checked: set[tuple[str, str, int]] = set()

    def schema(self, schema: dict[str, Any]) -> Draft202012Validator:
        """A validator for ``schema``, its references resolved in the document."""
        return Draft202012Validator({**schema, "components": self.doc["components"]})

    def answer(self, path: str, method: str, status: int) -> dict[str, Any]:
        """The documented answer of ``method path`` with ``status``."""
        responses = self.doc["paths"][path][method]["responses"]
        assert str(status) in responses, f"{method} {path} may not answer {status}"
        answer: dict[str, Any] = responses[str(status)]
        return answer

    def check(
        self, path: str, method: str, r: httpx.Response, status: int, error: str | None = None
    ) -> Any:
        """The answer has the ``status`` (and ``error`` code) meant, that status is documented
        for the path, and its headers and body match; return the body."""
        assert r.status_code == status, f"{method} {path}: {r.status_code} {r.text}"
        spec = self.answer(path, method, status)
        for name, ref in spec.get("headers", {}).items():
            header = self.doc["components"]["headers"][ref["$ref"].rsplit("/", 1)[1]]
            if header["required"]:
                assert name.lower() in r.headers, f"{method} {path} {status} lacks {name}"
                self.schema(header["schema"]).validate(int(r.headers[name.lower()]))
        self.checked.add((method, path, status))
        if "content" not in spec:
            assert r.content == b"", r.content
            return None
        body = r.json()
        self.schema(spec["content"]["application/json"]["schema"]).validate(body)
        if error is not None:
            assert body["error"] == error, body
        return body

    def lines(self, path: str, lines: list[dict[str, Any]]) -> None:
        """Lines of the stream at ``path``, each against its documented line schema."""
        content = self.answer(path, "get", 200)["content"]
        validator = self.schema(content["application/x-ndjson"]["schema"])
        assert lines
        for line in lines:
            validator.validate(line)
        self.checked.add(("get", path, 200))


async def read(
    http: httpx.AsyncClient,
    path: str,
    token: str | None,
    until: Callable[[dict[str, Any]], bool],
    timeout: float = 20.0,
    **params: Any,
) -> list[dict[str, Any]]:
    """A stream's lines (keep-alives skipped) up to the first that ``until`` holds for, or to
    the stream's end."""
    got: list[dict[str, Any]] = []

    async def run() -> None:
        headers = auth(token) if token else {}
        async with http.stream("GET", path, headers=headers, params=params) as r:
            assert r.status_code == 200, await r.aread()
            async for raw in r.aiter_lines():
                if raw.strip():
                    got.append(json.loads(raw))
                    if until(got[-1]):
                        return

    await asyncio.wait_for(run(), timeout)
    return got


def of_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """A line of type ``kind`` with these ``fields``."""
    return lambda line: line["type"] == kind and all(line.get(k) == v for k, v in fields.items())


# -- the routes --------------------------------------------------------------------------------


def test_every_route_the_gateway_serves_is_in_the_document_and_nothing_else() -> None:
    """Paths and methods as create_app registers them, and every path parameter declared."""
    app = create_app(Settings(redis_url="redis://127.0.0.1:1"))  # never started: no Redis
    served = set()
    for route in app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)  # {seat:int} is {seat}
        served |= {(path, m.lower()) for m in route.methods or () if m != "HEAD"}
    doc = openapi()
    documented = {(p, m) for p, methods in doc["paths"].items() for m in methods}
    assert served == documented
    for path, method in documented:
        declared = {
            p["name"] for p in doc["paths"][path][method].get("parameters", []) if p["in"] == "path"
        }
        assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)
        answers = doc["paths"][path][method]["responses"]
        assert any(s.startswith("2") or s == "101" for s in answers), (method, path)


def test_the_security_schemes_name_every_token_a_route_takes() -> None:
    """Seat, account, owner and operator tokens are bearer schemes, and each route's security
    names only those."""
    doc = openapi()
    schemes = doc["components"]["securitySchemes"]
    assert set(schemes) == {"seatToken", "accountToken", "ownerToken", "operatorToken"}
    assert all(s == {**s, "type": "http", "scheme": "bearer"} for s in schemes.values())
    assert schemes["accountToken"]["bearerFormat"].startswith("dab_")
    for methods in doc["paths"].values():
        for operation in methods.values():
            for requirement in operation.get("security", []):
                assert set(requirement) <= set(schemes)
    assert doc["paths"][ME]["get"]["security"] == [{"accountToken": []}]
    assert {"operatorToken": []} in doc["paths"][MATCH]["delete"]["security"]
    assert {"accountToken": []} in doc["paths"][MOVES]["post"]["security"]


def endpoints(doc: Path) -> dict[tuple[str, str], str]:
    """A doc's table of endpoints: (path as the document has it, method) -> the answer cell."""
    rows = re.findall(
        r"^\| (GET|POST|DELETE) \| `([^`?]+)[^`]*`[^|]*\|.*\|([^|]*)\|$", doc.read_text(), re.M
    )
    unprefixed = ("/healthz", "/readyz", "/metrics")
    return {(p if p in unprefixed else API + p, m.lower()): cell for m, p, cell in rows}


def test_the_docs_list_every_route_with_its_answers_schema_and_name_only_real_schemas() -> None:
    """docs/protocol.md and docs/accounts.md between them list every route of the document;
    each row of accounts.md names the schema of its route's answer; and every schema name
    accounts.md gives is in the document."""
    doc = openapi()
    listed = endpoints(DOCS / "accounts.md")
    documented = {(p, m) for p, methods in doc["paths"].items() for m in methods}
    assert {**endpoints(DOCS / "protocol.md"), **listed}.keys() == documented
    for (path, method), cell in listed.items():
        for status, answer in doc["paths"][path][method]["responses"].items():
            if status.startswith("2") and "content" in answer:
                content = answer["content"]
                body = content.get("application/json") or content["application/x-ndjson"]
                name = body["schema"]["$ref"].rsplit("/", 1)[1]
                assert f"`{name}`" in cell, (method, path, cell)
    text = (DOCS / "accounts.md").read_text()
    examples = set(re.findall(r'"name": "(\w+)"', text))  # the account names of the examples
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    named = set(re.findall(r"`([A-Z][a-z]+(?:[A-Z][a-z]*)+)`", prose)) - examples
    assert named - set(doc["components"]["schemas"]) == set()
    assert {"AccountLine", "PlayLine", "ArenaLine", "ChallengeInfo", "StandingRow"} <= named


# -- accounts ----------------------------------------------------------------------------------


def test_registering_reading_rotating_and_the_operators_calls_answer_as_documented(
    gateways: Gateways,
) -> None:
    spec = Spec(gateways.url)
    name, nobody = unique("Doc"), unique("nobody")
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        r = http.post(ACCOUNTS, json={"name": name})
        token = spec.check(ACCOUNTS, "post", r, 201)["token"]
        for body, status, error in (
            ({"name": name.upper()}, 409, "name_taken"),
            ({"name": "Gr33dy"}, 422, "reserved_name"),
            ({"name": "x"}, 422, "bad_name"),
            ({"nom": name}, 422, "invalid_account"),
        ):
            spec.check(ACCOUNTS, "post", http.post(ACCOUNTS, json=body), status, error)
        spec.check(ACCOUNTS, "post", http.post(ACCOUNTS, content=b"{"), 400, "bad_json")
        r = http.post(ACCOUNTS, content=b"{}", headers=TEXT)
        spec.check(ACCOUNTS, "post", r, 415, "unsupported_media_type")
        spec.check(NAMED, "get", http.get(f"{ACCOUNTS}/{name}"), 200)
        spec.check(NAMED, "get", http.get(f"{ACCOUNTS}/{nobody}"), 404, "no_account")
        me = spec.check(ME, "get", http.get(ME, headers=auth(token)), 200)
        assert me["account"]["name"] == name and me["live"] == [] and me["seeks"] == []
        for bad in ({}, auth("dab_" + "x" * 43), auth("a-seat-token")):
            spec.check(ME, "get", http.get(ME, headers=bad), 401, "unauthorized")
        new = spec.check(TOKEN, "post", http.post(TOKEN, headers=auth(token)), 200)["token"]
        spec.check(TOKEN, "delete", http.delete(TOKEN, headers=auth(new)), 204)
        for action in ("ban", "unban", "token"):
            path, url = f"{NAMED}/{action}", f"{ACCOUNTS}/{name}/{action}"
            spec.check(path, "post", http.post(url, headers=auth(OPERATOR)), 200)
            spec.check(path, "post", http.post(url), 401, "unauthorized")
            spec.check(path, "post", http.post(url, headers=auth(new)), 403, "not_operator")
            r = http.post(f"{ACCOUNTS}/{nobody}/{action}", headers=auth(OPERATOR))
            spec.check(path, "post", r, 404, "no_account")
        # a token this gateway has not seen yet is looked up at once: the ban shows
        http.post(f"{ACCOUNTS}/{name}/ban", headers=auth(OPERATOR))
        issued = http.post(f"{ACCOUNTS}/{name}/token", headers=auth(OPERATOR)).json()["token"]
        spec.check(ME, "get", http.get(ME, headers=auth(issued)), 403, "account_banned")
        spec.check(SEEKS, "get", http.get(SEEKS, headers=auth(issued)), 403, "account_banned")
    assert {path for _, path, _ in spec.checked} == {
        ACCOUNTS,
        NAMED,
        ME,
        TOKEN,
        SEEKS,
        *(f"{NAMED}/{action}" for action in ("ban", "unban", "token")),
    }


def test_too_many_account_streams_answer_429_as_documented(gateways: Gateways) -> None:
    """The fifth stream of an account at once: a LimitError naming streams_per_account, with
    Retry-After and RateLimit-*."""
    spec = Spec(gateways.url)
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        token = register(http, unique("many"))

    async def fifth() -> httpx.Response:
        async with (
            httpx.AsyncClient(base_url=gateways.url, timeout=10) as http,
            contextlib.AsyncExitStack() as open_streams,
        ):
            for path in (FEED, PLAY, FEED, PLAY):
                r = await open_streams.enter_async_context(
                    http.stream("GET", path, headers=auth(token))
                )
                assert r.status_code == 200
            return await http.get(FEED, headers=auth(token))

    r = asyncio.run(fifth())
    body = spec.check(FEED, "get", r, 429, "rate_limited")
    assert body["limit"] == "streams_per_account"


# -- challenges, the account and play streams, resigning ---------------------------------------


async def test_a_challenge_made_answered_played_and_resigned_answers_as_documented(
    gateways: Gateways,
) -> None:
    """Made, listed, withdrawn, declined, accepted; both accounts' streams (the fresh state line
    and every event to the match's end), the play stream, and a resignation."""
    g = gateways
    spec = Spec(gateways.url)
    a_name, b_name = unique("Cha"), unique("Chb")
    async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
        a, b, c = [
            (await http.post(ACCOUNTS, json={"name": n})).json()["token"]
            for n in (a_name, b_name, unique("Chc"))
        ]
        game = {"opponents": [b_name], "rules": {"family": "express", "players": 2}}
        for body, status, error in (
            ({"opponents": [unique("nobody")]}, 404, "no_account"),
            ({"opponents": [a_name]}, 422, "bad_players"),
            ({"opponents": [b_name], "rules": {"players": 5}}, 422, "rejected"),
            ({"opponents": b_name}, 422, "invalid_challenge"),
            ({**game, "deadline_ms": 5}, 422, "invalid_match"),
        ):
            r = await http.post(CHALLENGES, json=body, headers=auth(a))
            spec.check(CHALLENGES, "post", r, status, error)
        r = await http.post(CHALLENGES, content=b"{", headers=auth(a))
        spec.check(CHALLENGES, "post", r, 400, "bad_json")
        spec.check(CHALLENGES, "post", await http.post(CHALLENGES, json=game), 401)
        made = []
        for _ in range(3):
            r = await http.post(CHALLENGES, json=game, headers=auth(a))
            made.append(spec.check(CHALLENGES, "post", r, 201)["challenge"]["id"])
        played, withdrawn, declined = made
        state = await read(http, FEED, b, lambda line: True)  # a fresh stream: where things are
        spec.lines(FEED, state)
        assert state[0]["type"] == "state" and len(state[0]["challenges"]) == 3
        listed = spec.check(CHALLENGES, "get", await http.get(CHALLENGES, headers=auth(a)), 200)
        assert {x["id"] for x in listed["challenges"]} >= set(made)

        async def answer(
            challenge: str, verb: str, token: str, status: int, error: str | None = None
        ) -> Any:
            r = await http.post(f"{CHALLENGES}/{challenge}/{verb}", headers=auth(token))
            return spec.check(f"{CHALLENGE}/{verb}", "post", r, status, error)

        await answer(withdrawn, "cancel", b, 403, "not_yours")
        await answer(withdrawn, "cancel", a, 200)
        await answer(withdrawn, "cancel", a, 409, "challenge_closed")
        await answer(declined, "decline", a, 403, "not_yours")
        await answer(declined, "decline", c, 404, "no_challenge")
        await answer(declined, "decline", b, 200)
        await answer(declined, "decline", b, 409, "challenge_closed")
        await answer(played, "accept", a, 403, "not_challenged")
        await answer("c-000000000000", "accept", b, 404, "no_challenge")
        started = await answer(played, "accept", b, 200)
        await answer(played, "accept", b, 409, "challenge_closed")
        match_id = started["challenge"]["match_id"]
        assert started["challenge"]["status"] == "started" and match_id
        # both accounts' events to the match's start, and the play stream's first lines
        a_lines = await read(http, FEED, a, of_type("match_started"), after=0)
        b_lines = await read(http, FEED, b, of_type("match_started"), after=0)
        spec.lines(FEED, a_lines + b_lines)
        assert [x["type"] for x in a_lines] == [
            "challenge_declined",
            "challenge_accepted",
            "match_started",
        ]
        assert [x["type"] for x in b_lines] == [
            "challenge",
            "challenge",
            "challenge",
            "challenge_cancelled",
            "match_started",
        ]
        spec.lines(PLAY, await read(http, PLAY, a, lambda line: line["match_id"] == match_id))
        # a stranger may not move for seat 0; its account resigns for it
        await asyncio.to_thread(wait_for_version, g, match_id, 2)
        url = f"{MATCHES}/{match_id}/seats/0/moves"
        moves: list[tuple[str, str, int, str | None]] = [
            (c, "resign", 403, "not_your_seat"),
            (a, "resign", 200, None),
            (a, "abort", 409, "rejected"),  # the match is over
        ]
        for who, kind, status, code in moves:
            r = await http.post(
                url, json={"type": kind}, headers={**auth(who), "idempotency-key": kind}
            )
            spec.check(MOVES, "post", r, status, code)
        after = a_lines[-1]["id"]
        ended = await read(http, FEED, a, of_type("match_finished"), after=after)
        spec.lines(FEED, ended)
        assert ended[-1]["result"] == "loss" and ended[-1]["reason"] == "resigned"
        me = spec.check(ME, "get", await http.get(ME, headers=auth(a)), 200)
        assert me["last_event"] >= ended[-1]["id"]
        # over already: the operator's cancel is refused by the referee
        r = await http.delete(f"{MATCHES}/{match_id}", headers=auth(OPERATOR))
        spec.check(MATCH, "delete", r, 409, "rejected")
    assert {path for _, path, _ in spec.checked} == {
        CHALLENGES,
        *(f"{CHALLENGE}/{verb}" for verb in ("accept", "decline", "cancel")),
        FEED,
        PLAY,
        ME,
        MOVES,
        MATCH,
    }


# -- seeks, aborting ---------------------------------------------------------------------------


async def test_a_seek_queued_withdrawn_and_one_matched_and_aborted_answer_as_documented(
    gateways: Gateways,
) -> None:
    g = gateways
    spec = Spec(gateways.url)
    kind = {"kind": "straight-3p"}  # no other test seeks it: house bots fill its seats
    async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
        token = (await http.post(ACCOUNTS, json={"name": unique("seek")})).json()["token"]
        seek = spec.check(
            SEEKS, "post", await http.post(SEEKS, json=kind, headers=auth(token)), 201
        )
        again = spec.check(
            SEEKS, "post", await http.post(SEEKS, json=kind, headers=auth(token)), 200
        )
        assert again["seek"]["id"] == seek["seek"]["id"]
        spec.check(SEEKS, "get", await http.get(SEEKS, headers=auth(token)), 200)
        me = spec.check(ME, "get", await http.get(ME, headers=auth(token)), 200)
        assert [s["id"] for s in me["seeks"]] == [seek["seek"]["id"]]
        url = f"{SEEKS}/{seek['seek']['id']}"
        spec.check(SEEK, "delete", await http.delete(url, headers=auth(token)), 200)
        spec.check(SEEK, "delete", await http.delete(url, headers=auth(token)), 404, "no_seek")
        for body, status, error in (
            ({"kind": "express-9p"}, 422, "unknown_kind"),
            ({"kinds": "express-2p"}, 422, "invalid_seek"),
        ):
            r = await http.post(SEEKS, json=body, headers=auth(token))
            spec.check(SEEKS, "post", r, status, error)
        r = await http.post(SEEKS, content=b"{", headers=auth(token))
        spec.check(SEEKS, "post", r, 400, "bad_json")
        spec.check(SEEKS, "post", await http.post(SEEKS, json=kind), 401, "unauthorized")
        # matched with house bots after the wait; its seat aborts before its side moves
        last = me["last_event"]
        spec.check(SEEKS, "post", await http.post(SEEKS, json=kind, headers=auth(token)), 201)
        started = await read(http, FEED, token, of_type("match_started"), after=last)
        spec.lines(FEED, started)
        match_id, seat = started[-1]["match_id"], started[-1]["seats"][0]
        r = await http.post(
            f"{MATCHES}/{match_id}/seats/{seat}/moves",
            json={"type": "abort"},
            headers={**auth(token), "idempotency-key": "abort"},
        )
        spec.check(MOVES, "post", r, 200)
        ended = await read(http, FEED, token, of_type("match_finished"), after=started[-1]["id"])
        spec.lines(FEED, ended)
        assert (ended[-1]["reason"], ended[-1]["result"], ended[-1]["winner"]) == (
            "aborted",
            "none",
            None,
        )


# -- arenas ------------------------------------------------------------------------------------


async def test_an_arena_created_entered_started_and_finished_answers_as_documented(
    gateways: Gateways,
) -> None:
    """A round robin of an account and a house pool; the account resigns its one match, so
    the arena ends: its whole stream, created to finished, matches the document."""
    g = gateways
    spec = Spec(gateways.url)
    op = auth(OPERATOR)
    body = {"name": "doc arena", "rules": {"family": "express", "target": 20}}
    async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
        a, b = [
            (await http.post(ACCOUNTS, json={"name": unique(n)})).json()["token"]
            for n in ("arna", "arnb")
        ]
        spec.check(ARENAS, "post", await http.post(ARENAS, json=body), 401, "unauthorized")
        r = await http.post(ARENAS, json=body, headers=auth(a))
        spec.check(ARENAS, "post", r, 403, "not_operator")
        for wrong, status, error in (
            ({**body, "format": "knockout"}, 422, "bad_arena"),
            ({**body, "name": 3}, 422, "invalid_arena"),
            ({**body, "rules": {"players": 7}}, 422, "rejected"),
        ):
            spec.check(
                ARENAS, "post", await http.post(ARENAS, json=wrong, headers=op), status, error
            )
        arena = spec.check(ARENAS, "post", await http.post(ARENAS, json=body, headers=op), 201)
        arena_id = arena["arena"]["id"]
        path = f"{ARENAS}/{arena_id}"
        spec.check(ARENAS, "get", await http.get(ARENAS), 200)
        spec.check(ARENA, "get", await http.get(path), 200)
        spec.check(ARENA, "get", await http.get(f"{ARENAS}/a-0000"), 404, "no_arena")

        async def call(
            verb: str, headers: dict[str, str], status: int, error: str | None = None, **kw: Any
        ) -> Any:
            r = await http.post(f"{path}/{verb}", headers=headers, **kw)
            return spec.check(f"{ARENA}/{verb}", "post", r, status, error)

        await call("join", auth(a), 200)
        await call("join", auth(b), 200)
        await call("leave", auth(b), 200)
        await call("leave", auth(b), 409, "not_entered")
        await call("join", op, 200, json={"pool": "greedy"})
        await call("join", auth(a), 403, "not_operator", json={"pool": "greedy"})
        await call("join", op, 422, "unknown_pool", json={"pool": "nosuchpool"})
        await call("join", {}, 401, "unauthorized")
        await call("start", auth(a), 403, "not_operator")
        running = await call("start", op, 200)
        assert running["arena"]["status"] == "running"
        await call("start", op, 409, "not_open")
        await call("join", auth(b), 409, "arena_started")
        r = await http.post(f"{ARENAS}/a-0000/leave", headers=auth(a))
        spec.check(f"{ARENA}/leave", "post", r, 404, "no_arena")
        # the arena's one match reaches the account; it resigns, and the arena is over
        started = await read(http, FEED, a, of_type("match_started"), after=0)
        match_id, seat = started[-1]["match_id"], started[-1]["seats"][0]
        await asyncio.to_thread(wait_for_version, g, match_id, 2)
        r = await http.post(
            f"{MATCHES}/{match_id}/seats/{seat}/moves",
            json={"type": "resign"},
            headers={**auth(a), "idempotency-key": "resign"},
        )
        spec.check(MOVES, "post", r, 200)
        stream = f"{ARENA}/stream"
        lines = await read(http, f"{path}/stream", None, of_type("finished"), timeout=30)
        spec.lines(stream, lines)
        assert {x["type"] for x in lines} == {
            "created",
            "joined",
            "left",
            "started",
            "round",
            "match_started",
            "match_finished",
            "standings",
            "finished",
        }
        done = spec.check(ARENA, "get", await http.get(path), 200)
        assert done["arena"]["status"] == "finished" and len(done["arena"]["standings"]) == 2
        for params, status, error in (
            ({"after": "x"}, 400, "bad_resume"),
            ({"format": "xml"}, 422, "invalid_query"),
        ):
            r = await http.get(f"{path}/stream", params=params)
            spec.check(stream, "get", r, status, error)
        r = await http.get(f"{ARENAS}/a-0000/stream")
        spec.check(stream, "get", r, 404, "no_arena")


# -- cancelling --------------------------------------------------------------------------------


def test_cancelling_by_creator_owner_token_and_operator_answers_as_documented(
    gateways: Gateways,
) -> None:
    spec = Spec(gateways.url)
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        stranger = register(http, unique("strange"))
        creator = register(http, unique("creator"))
        created = spec.check(MATCHES, "post", http.post(MATCHES, json={"seats": [None, None]}), 201)
        match_id, owner = created["match"]["match_id"], created["owner_token"]
        url = f"{MATCHES}/{match_id}"
        spec.check(MATCH, "delete", http.delete(url), 401, "unauthorized")
        for token in (stranger, "own_not-the-owner"):
            spec.check(MATCH, "delete", http.delete(url, headers=auth(token)), 403, "not_creator")
        done = spec.check(MATCH, "delete", http.delete(url, headers=auth(owner)), 200)
        assert done == {"match_id": match_id, "status": "cancelled"}
        r = http.delete(f"{MATCHES}/m-0000000000", headers=auth(OPERATOR))
        spec.check(MATCH, "delete", r, 404, "no_match")
        # an account's match: no owner token; the account cancels it
        r = http.post(MATCHES, json={"seats": [None, "greedy"]}, headers=auth(creator))
        mine = spec.check(MATCHES, "post", r, 201)
        assert "owner_token" not in mine
        r = http.delete(f"{MATCHES}/{mine['match']['match_id']}", headers=auth(creator))
        spec.check(MATCH, "delete", r, 200)
        # a started match: only the operator ends it
        r = http.post(MATCHES, json={"seats": ["random", "greedy"], "rules": {"target": 1000}})
        live = spec.check(MATCHES, "post", r, 201)
        url = f"{MATCHES}/{live['match']['match_id']}"
        wait_for_version(gateways, live["match"]["match_id"], 2)
        r = http.delete(url, headers=auth(live["owner_token"]))
        spec.check(MATCH, "delete", r, 409, "match_started")
        for _ in range(2):  # the second is the first's replay
            spec.check(MATCH, "delete", http.delete(url, headers=auth(OPERATOR)), 200)
