"""What the browser pages read from the gateway: the pages themselves, streams with views,
replays, ratings, players, and the filters of the match lists.

The pages and their files come with a strict Content-Security-Policy, an ETag and 304s, and no
path leaves web/static. ``views=1`` adds a snapshot after each batch of events and at the end.
A replay's view at version v is what ``domino replay --at v --json`` prints, and a public one
never shows a hand of a live round (C8). Ratings and players are one fold of the finished
matches' results. Every answer, errors included, matches the OpenAPI document, and no query
value makes the gateway fail (500).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import msgspec
import pytest
from jsonschema import Draft202012Validator

from engine.views import redact, view_for
from events.codec import JSON
from events.model import MatchEnded
from services.gateway.pages import CSP, WEB
from tests.gateway.conftest import Gateways, create, join, states_by_version
from tests.support.cli import run_domino

pytestmark = pytest.mark.service

API = "/api/v1"
MATCH = f"{API}/matches/{{match_id}}"
PAGES = ["/", "/watch/m-0123456789", "/replay/m-0123456789", "/play/m-0123456789"]
PAGES += ["/players", "/players/house:greedy", "/players/guest%3Aa%2Fb"]


def builtins(value: Any) -> Any:
    """What a struct looks like once it has gone through JSON."""
    return json.loads(msgspec.json.encode(value))


class Spec:
    """The gateway's OpenAPI document, and checks of real answers against it."""

    def __init__(self, url: str) -> None:
        self.doc: dict[str, Any] = httpx.get(f"{url}{API}/openapi.json").json()

    def check(self, path: str, r: httpx.Response, status: int, error: str | None = None) -> Any:
        """The answer has ``status`` (and ``error``), documented for GET ``path``, and its body
        matches the schema; return the body."""
        assert r.status_code == status, f"GET {path}: {r.status_code} {r.text}"
        responses = self.doc["paths"][path]["get"]["responses"]
        assert str(status) in responses, f"GET {path} may not answer {status}"
        schema = responses[str(status)]["content"]["application/json"]["schema"]
        body = r.json()
        Draft202012Validator({**schema, "components": self.doc["components"]}).validate(body)
        if error is not None:
            assert body["error"] == error, body
        return body


def raw_get(url: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` exactly as written: no client tidies its dots or its escapes."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def finished(
    g: Gateways, seats: list[str | None], family: str = "express", target: int = 10
) -> str:
    """A match of house bots, played to its end; its id."""
    rules = {"family": family, "players": len(seats), "target": target}
    match_id = create(g.url, seats, rules=rules)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        log = g.log(match_id)
        if log and isinstance(log[-1].event, MatchEnded):
            return match_id
        time.sleep(0.1)
    pytest.fail(f"match {match_id} did not end in 60 s")


@pytest.fixture(scope="module")
def played(gateways: Gateways) -> dict[str, list[str]]:
    """Finished matches of the house pools against each other, by family."""
    return {
        "express": [finished(gateways, ["greedy", "random"]) for _ in range(2)],
        "straight": [finished(gateways, ["random", "greedy"], "straight", 30)],
    }


# -- the pages ---------------------------------------------------------------------------------


def test_every_page_path_answers_the_html_shell_with_its_security_headers_and_304s(
    gateways: Gateways,
) -> None:
    """One HTML shell for every page; CSP allows only the gateway's own scripts, styles and
    connections; a client holding the current ETag gets 304 and no body."""
    shell = (WEB / "index.html").read_bytes()
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        etags = set()
        for path in PAGES:
            r = http.get(path)
            assert r.status_code == 200, (path, r.text)
            assert r.content == shell
            assert r.headers["content-type"] == "text/html; charset=utf-8"
            assert r.headers["content-security-policy"] == CSP
            assert "script-src 'self';" in CSP and "'unsafe-inline'" not in CSP
            assert r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["referrer-policy"] == "no-referrer"
            assert r.headers["cache-control"] == "no-cache"
            etags.add(r.headers["etag"])
        assert len(etags) == 1
        (etag,) = etags
        for asked in (etag, f'W/{etag}, "other"', "*"):
            again = http.get("/watch/m-0123456789", headers={"if-none-match": asked})
            assert again.status_code == 304 and again.content == b""
            assert again.headers["etag"] == etag
            assert again.headers["content-security-policy"] == CSP
        assert http.get("/", headers={"if-none-match": '"stale"'}).status_code == 200
        for path in ("/watch", "/watch/a/b", "/replay/", "/nowhere", f"{API}/nowhere"):
            r = http.get(path)
            assert r.status_code == 404 and r.json()["error"] == "not_found", path


def test_static_files_come_with_their_types_and_nothing_outside_web_static_is_served(
    gateways: Gateways,
) -> None:
    """Every file of web/static as it is, typed; a path that climbs out, a hidden file, a file
    of an unknown kind or none at all: a 404 JSON error like any other."""
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    files = [p for p in (WEB / "static").iterdir() if p.suffix in types and p.is_file()]
    assert files, "the pages ship scripts and styles"
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        for path in files:
            r = http.get(f"/static/{path.name}")
            assert r.status_code == 200, path
            assert r.content == path.read_bytes()
            assert r.headers["content-type"].split(";")[0] == types[path.suffix]
            assert r.headers["content-security-policy"] == CSP
            assert r.headers["x-content-type-options"] == "nosniff"
            tag = r.headers["etag"]
            assert (
                http.get(f"/static/{path.name}", headers={"if-none-match": tag}).status_code == 304
            )
    for path in (
        "/static/../app.py",
        "/static/../../gateway/pages.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2f%2e%2e%2fconfig.py",
        "/static/../index.html",
        "/static//etc/passwd",
        "/static/.hidden.js",
        "/static/nothing-here.js",
        "/static/pages.py",
        "/static/",
        "/static/%00.js",
    ):
        status, headers, body = raw_get(gateways.url, path)
        assert status == 404, (path, body)
        assert headers["content-type"] == "application/json", path
        assert json.loads(body)["error"] == "not_found", path


# -- streams with views ------------------------------------------------------------------------


async def play_and_watch(g: Gateways) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """A match against the random pool: seat 0 played here from its views=1 stream, a
    spectator following it with views=1. Both streams' lines."""
    match_id = create(g.url, [None, "random"], rules={"players": 2, "target": 10})
    seat, token = join(g.url, match_id, seat=0)
    auth = {"authorization": f"Bearer {token}"}
    base = f"{API}/matches/{match_id}"

    async def spectate(http: httpx.AsyncClient) -> list[dict[str, Any]]:
        lines = []
        async with http.stream("GET", f"{base}/stream", params={"views": "1"}) as r:
            assert r.status_code == 200, await r.aread()
            async for raw in r.aiter_lines():
                if raw.strip():
                    lines.append(json.loads(raw))
        return lines

    async def play(http: httpx.AsyncClient) -> list[dict[str, Any]]:
        lines = []
        path = f"{base}/seats/{seat}"
        async with http.stream("GET", f"{path}/stream", params={"views": "1"}, headers=auth) as r:
            assert r.status_code == 200, await r.aread()
            async for raw in r.aiter_lines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                lines.append(line)
                if line["type"] == "turn":
                    key = {"idempotency-key": f"v{line['id']}", **auth}
                    move = line["view"]["legal"][0]
                    answer = await http.post(f"{path}/moves", json=move, headers=key)
                    assert answer.status_code == 200, answer.text
        return lines

    async with httpx.AsyncClient(base_url=g.url, timeout=30) as http:
        watching = asyncio.create_task(spectate(http))
        await asyncio.sleep(0.2)
        mine = await asyncio.wait_for(play(http), 120)
        public = await asyncio.wait_for(watching, 30)
    return match_id, mine, public


def runs_end_in_snapshots(lines: list[dict[str, Any]]) -> None:
    """Each run of event lines is followed at once by a snapshot at the run's last id; the
    last line is a snapshot of the match over, with its result."""
    for i, line in enumerate(lines):
        if line["type"] == "event" and lines[i + 1]["type"] != "event":
            after = lines[i + 1]
            assert (after["type"], after["id"]) == ("snapshot", line["id"]), lines[i - 1 : i + 2]
    last = lines[-1]
    assert last["type"] == "snapshot" and last["view"]["phase"] == "over"
    assert last["view"]["result"]["type"] == "match_ended"
    assert last["id"] == max(x["id"] for x in lines)


def test_streams_with_views_carry_a_snapshot_after_each_batch_and_end_with_the_result(
    gateways: Gateways,
) -> None:
    """views=1 on a seat's and on the public stream: each snapshot is the receiver's view at
    its version (C8: the spectator's never holds a hand or a legal move), with the deadline of
    the seat to move for every receiver; the match's last line is the snapshot of its end."""
    g = gateways
    match_id, mine, public = asyncio.run(play_and_watch(g))
    states = states_by_version(g.log(match_id))
    for lines, seat in ((mine, 0), (public, None)):
        runs_end_in_snapshots(lines)
        snapshots = [x for x in lines if x["type"] == "snapshot"]
        assert len(snapshots) > 3
        for snap in snapshots:
            assert snap["view"] == builtins(view_for(states[snap["id"]], seat)), snap["id"]
            assert snap["seat"] == seat and snap["match_id"] == match_id
            playing = snap["view"]["phase"] == "playing"
            assert (snap["deadline"] is not None) == playing, snap
            assert (snap["remaining_ms"] is not None) == playing, snap
        if seat is None:
            assert all(s["view"]["hand"] is None and s["view"]["legal"] == [] for s in snapshots)
        else:
            assert all(s["view"]["hand"] is not None for s in snapshots)
            assert [x["type"] for x in lines].count("turn") > 0
    with httpx.Client(base_url=g.url, timeout=10) as http:
        # resumed: the backlog, then a snapshot; the default stream has no snapshot but its first
        for params, first in (({"views": "1", "after": "3"}, 4), ({"after": "0"}, 1)):
            lines = [
                json.loads(x)
                for x in http.get(
                    f"{API}/matches/{match_id}/stream", params=params
                ).text.splitlines()
                if x
            ]
            assert lines[0] == {**lines[0], "type": "event", "id": first}
            kinds = [x["type"] for x in lines]
            if "views" in params:
                assert kinds == ["event"] * (len(lines) - 1) + ["snapshot"]
                runs_end_in_snapshots(lines)
            else:
                assert set(kinds) == {"event"}
        for bad in ("2", "yes", "", "1 "):  # an empty value is a value, as the document says
            r = http.get(f"{API}/matches/{match_id}/stream", params={"views": bad})
            assert r.status_code == 422 and r.json()["error"] == "invalid_query", bad


# -- replays -----------------------------------------------------------------------------------


def cli_replay(g: Gateways, match_id: str, at: int, seat: int | None) -> list[bytes]:
    """``domino replay ID --at AT [--seat K] --json``: its lines."""
    args = ["replay", match_id, "--at", str(at), "--json"]
    if seat is not None:
        args += ["--seat", str(seat)]
    done = run_domino(*args, env=g.stack.env())
    assert done.returncode == 0, done.stderr
    return [line.encode() for line in done.stdout.splitlines()]


def test_a_replay_is_what_domino_replay_prints_at_every_version_public_and_by_seat(
    gateways: Gateways, played: dict[str, list[str]]
) -> None:
    """Each frame's view is the last line of ``domino replay --at v --json`` (with --seat K
    for a seat's replay), its event the command's line v, redacted for a spectator (C8). The
    command is run at a few versions (each run is a process); every frame is checked against
    the same fold of the log in this process."""
    g = gateways
    spec = Spec(g.url)
    match_id = played["express"][0]
    log = g.log(match_id)
    n = len(log)
    states = states_by_version(log)
    with httpx.Client(base_url=g.url, timeout=30) as http:
        for seat in (None, 0, 1):
            params = {} if seat is None else {"seat": str(seat)}
            r = http.get(f"{API}/matches/{match_id}/replay", params=params)
            body = spec.check(f"{MATCH}/replay", r, 200)
            assert (body["match_id"], body["seat"], body["status"]) == (match_id, seat, "finished")
            frames = body["frames"]
            assert [f["id"] for f in frames] == list(range(1, n + 1))
            for v, frame in enumerate(frames, 1):
                assert frame["view"] == builtins(view_for(states[v], seat)), (seat, v)
            for at in sorted({n // 2, n}):
                *events, last = cli_replay(g, match_id, at, seat)
                assert frames[at - 1]["view"] == json.loads(last), (seat, at)
                for v, line in enumerate(events, 1):
                    event = JSON.decode_envelope(line).event
                    assert frames[v - 1]["event"] == builtins(redact(event, seat)), (seat, v)
            if seat is None:
                assert all(f["view"]["hand"] is None for f in frames)
                dealt = [f["event"] for f in frames if f["event"]["type"] == "round_started"]
                assert dealt and all(set(d["hands"]) == {None} for d in dealt)
                assert all(d["stock"] is None for d in dealt)


def test_a_live_match_replays_publicly_only_and_bad_seats_and_matches_are_refused(
    gateways: Gateways,
) -> None:
    """A live match: its public replay, no hand of its live round in any frame (C8); a seat's
    replay of it 403 match_not_over; a seat that is none (C3) 404, one that is no number 422."""
    g = gateways
    spec = Spec(g.url)
    match_id = create(g.url, [None, "random"], rules={"players": 2, "target": 50})
    join(g.url, match_id, seat=0)
    path = f"{API}/matches/{match_id}/replay"
    with httpx.Client(base_url=g.url, timeout=10) as http:
        body = spec.check(f"{MATCH}/replay", http.get(path), 200)
        assert body["status"] == "live" and body["seat"] is None and body["frames"]
        for frame in body["frames"]:
            assert frame["view"]["hand"] is None and frame["view"]["legal"] == []
            if frame["event"]["type"] == "round_started":
                assert set(frame["event"]["hands"]) == {None} and frame["event"]["stock"] is None
            if frame["event"]["type"] == "tile_drawn":
                assert frame["event"]["tile"] is None
        r = http.get(path, params={"seat": "0"})
        spec.check(f"{MATCH}/replay", r, 403, "match_not_over")
        spec.check(f"{MATCH}/replay", http.get(path, params={"seat": "2"}), 404, "no_such_seat")
        for bad in ("-1", "x", "1.0", "²", "99999999999999999999"):
            r = http.get(path, params={"seat": bad})
            spec.check(f"{MATCH}/replay", r, 422, "invalid_query")
        for nobody in ("m-0000000000", "not-an-id"):
            r = http.get(f"{API}/matches/{nobody}/replay")
            spec.check(f"{MATCH}/replay", r, 404, "no_match")


# -- ratings and players -----------------------------------------------------------------------


def fresh(http: httpx.Client, path: str, until: Any, timeout: float = 45.0) -> Any:
    """GET ``path`` until it answers 200 and ``until(body)`` holds (the projector and the
    gateway's few seconds of cache catch up); its body."""
    deadline = time.monotonic() + timeout
    while True:
        r = http.get(path)
        body = r.json()
        if r.status_code == 200 and until(body):
            return body
        assert r.status_code in (200, 404), r.text  # 404: no record of the player yet
        if time.monotonic() > deadline:
            pytest.fail(f"GET {path} never held: {r.status_code} {body}")
        time.sleep(0.5)


def test_ratings_and_players_are_one_fold_of_the_finished_matches(
    gateways: Gateways, played: dict[str, list[str]]
) -> None:
    """The ratings table per family, best first; a house pool's page: its results, its
    ratings (one per family), their history (the last point is its rating now) and its
    latest matches, newest first."""
    g = gateways
    spec = Spec(g.url)
    ours = set(played["express"] + played["straight"])
    with httpx.Client(base_url=g.url, timeout=10) as http:
        page = fresh(
            http,
            f"{API}/players/house:greedy",
            lambda b: ours <= {m["match_id"] for m in b["recent"]} or len(b["recent"]) == 20,
        )
        tables = {}
        for family, params in (("express", {}), ("straight", {"family": "straight"})):
            # the latest matches come straight from the results; the ratings from a fold the
            # gateway keeps a few seconds, which may be from before these matches ended
            query = "" if family == "express" else f"?family={family}"
            fresh(
                http,
                f"{API}/ratings{query}",
                lambda b: {"house:greedy", "house:random"} <= {row["key"] for row in b["ratings"]},
            )
            r = http.get(f"{API}/ratings", params=params)
            body = spec.check(f"{API}/ratings", r, 200)
            assert body["family"] == family
            rows = body["ratings"]
            assert {"house:greedy", "house:random"} <= {row["key"] for row in rows}
            assert all(row["family"] == family for row in rows)
            ordinals = [row["ordinal"] for row in rows]
            assert ordinals == sorted(ordinals, reverse=True)
            tables[family] = {row["key"]: row for row in rows}
        r = http.get(f"{API}/players/{quote('house:greedy')}")
        page = spec.check(f"{API}/players/{{key}}", r, 200)
        assert (page["key"], page["name"], page["kind"]) == ("house:greedy", "greedy", "house")
        assert page["results"]["played"] >= 3
        assert {r["family"] for r in page["ratings"]} == {"express", "straight"}
        for rating in page["ratings"]:
            assert rating == tables[rating["family"]]["house:greedy"]
            points = [p for p in page["history"] if p["family"] == rating["family"]]
            assert len(points) == rating["rated"]
            last = points[-1]
            assert (last["mu"], last["sigma"], last["ordinal"]) == (
                rating["mu"],
                rating["sigma"],
                rating["ordinal"],
            )
        ended = [p["ended"] for p in page["history"]]
        assert ended == sorted(ended)
        recent = page["recent"]
        assert 0 < len(recent) <= 20
        assert [m["ended"] for m in recent] == sorted((m["ended"] for m in recent), reverse=True)
        for m in recent:
            assert m["seats"] and all(m["players"][s] == "greedy" for s in m["seats"])
            assert len(m["sides"]) == len(m["players"])
            assert len(m["scores"]) == max(m["sides"]) + 1  # by side: other tests' 3-seat games
        mine = {m["match_id"]: m for m in recent}
        for match_id in ours & mine.keys():
            end = g.log(match_id)[-1].event
            assert isinstance(end, MatchEnded)
            m = mine[match_id]
            assert (m["winner"], m["reason"], m["scores"]) == (
                end.winner,
                end.reason,
                list(end.scores),
            )
        for params in ({"family": "chess"}, {"family": "EXPRESS"}, {"family": "straight "}):
            r = http.get(f"{API}/ratings", params=params)
            spec.check(f"{API}/ratings", r, 422, "invalid_query")
        for nobody in ("guest:nobody-" + uuid.uuid4().hex[:6], "house:nobody", "a-b-c", "x" * 300):
            r = http.get(f"{API}/players/{quote(nobody, safe='')}")
            spec.check(f"{API}/players/{{key}}", r, 404, "no_player")


def test_a_guest_has_a_page_of_results_but_no_ratings_under_its_url_encoded_key(
    gateways: Gateways,
) -> None:
    """A guest who resigned at once: played and lost one, unrated (guests never are); its
    key, guest:<name>, URL-encoded."""
    g = gateways
    spec = Spec(g.url)
    name = f"Ana-{uuid.uuid4().hex[:6]}"
    match_id = create(g.url, [None, "random"], rules={"players": 2, "target": 50})
    seat, token = join(g.url, match_id, seat=0, name=name)
    auth = {"authorization": f"Bearer {token}", "idempotency-key": "resign"}
    with httpx.Client(base_url=g.url, timeout=10) as http:
        r = http.post(
            f"{API}/matches/{match_id}/seats/{seat}/moves", json={"type": "resign"}, headers=auth
        )
        assert r.status_code == 200, r.text
        key = quote(f"guest:{name}", safe="")
        fresh(http, f"{API}/players/{key}", lambda b: bool(b["recent"]))
        page = spec.check(f"{API}/players/{{key}}", http.get(f"{API}/players/{key}"), 200)
        assert (page["kind"], page["name"], page["ratings"], page["history"]) == (
            "guest",
            name,
            [],
            [],
        )
        assert page["results"]["played"] == 1 and page["results"]["won"] == 0
        (m,) = page["recent"]
        assert (m["match_id"], m["seats"], m["reason"]) == (match_id, [0], "resigned")
        assert m["winner"] == 1 and m["players"] == [name, "random"]
        # a match list filtered by the guest's name finds it
        r = http.get(f"{API}/matches", params={"status": "finished", "player": name})
        body = spec.check(f"{API}/matches", r, 200)
        assert [row["match_id"] for row in body["matches"]] == [match_id]


# -- the match lists' filters, and no 500 ------------------------------------------------------


def test_match_lists_filter_by_family_player_and_limit_and_refuse_bad_values_with_422(
    gateways: Gateways, played: dict[str, list[str]]
) -> None:
    """family, player (a name, exactly) and limit (1 to 100) on every status; a bad value of
    any is 422 invalid_query."""
    g = gateways
    spec = Spec(g.url)
    path = f"{API}/matches"
    with httpx.Client(base_url=g.url, timeout=10) as http:
        fresh(
            http,
            f"{path}?status=finished&family=straight&player=greedy",
            lambda b: played["straight"][0] in {m["match_id"] for m in b["matches"]},
        )
        for family in ("express", "straight"):
            r = http.get(path, params={"status": "finished", "family": family})
            rows = spec.check(path, r, 200)["matches"]
            assert rows and all(row["family"] == family for row in rows)
        r = http.get(path, params={"status": "finished", "player": "greedy", "limit": "3"})
        rows = spec.check(path, r, 200)["matches"]
        assert 0 < len(rows) <= 3 and all("greedy" in row["players"] for row in rows)
        updated = [row["updated"] for row in rows]
        assert updated == sorted(updated)
        everything = http.get(path, params={"status": "finished"}).json()["matches"]
        assert rows == [row for row in everything if "greedy" in row["players"]][-3:]
        r = http.get(path, params={"status": "finished", "limit": "1"})
        assert spec.check(path, r, 200)["matches"] == everything[-1:]
        waiting = create(g.url, [None, "random"], rules={"family": "straight", "players": 2})
        for params, found in (
            ({"family": "straight"}, True),
            ({"family": "express"}, False),
            ({"player": "random"}, True),
            ({"player": "Random"}, False),
        ):
            r = http.get(path, params={"status": "open", **params})
            rows = spec.check(path, r, 200)["matches"]
            assert (waiting in {row["match_id"] for row in rows}) == found, params
        for status in ("open", "live", "finished"):
            for params in (
                {"limit": "0"},
                {"limit": "101"},
                {"limit": "-1"},
                {"limit": "ten"},
                {"limit": "1e2"},
                {"limit": "²"},
                {"limit": "9" * 40},
                {"family": "chess"},
                {"player": "x" * 65},
            ):
                r = http.get(path, params={"status": status, **params})
                spec.check(path, r, 422, "invalid_query")


ODD = ["", " ", "0", "-0", "1", "-1", "9" * 30, "x", "%", "%00", "\u202e", "<img>", "[/]", "a/b"]


def urls(match_id: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Every new GET, with every odd value for each of its query parameters."""
    for value in ODD:
        yield f"{API}/matches/{match_id}/replay", {"seat": value}
        yield f"{API}/matches/{quote(value, safe='')}/replay", {}
        yield f"{API}/ratings", {"family": value}
        yield f"{API}/players/{quote(value, safe='')}", {}
        for name in ("limit", "family", "player", "status"):
            yield f"{API}/matches", {"status": "finished", name: value}
        yield f"{API}/matches/{match_id}/stream", {"views": value, "after": "999999"}


def test_no_query_value_makes_the_new_reads_fail(
    gateways: Gateways, played: dict[str, list[str]]
) -> None:
    """Odd values in every parameter and path segment: typed answers, never a 500."""
    with httpx.Client(base_url=gateways.url, timeout=10) as http:
        for path, params in urls(played["express"][0]):
            r = http.get(path, params=params)
            assert r.status_code < 500, (path, params, r.text)
            assert "error" in r.json() or r.status_code == 200, (path, params)
