"""What a newcomer met writing a bot from docs/protocol.md alone, each fixed and kept fixed:
the documented curl session runs as written on any deal; a stream opened on the seat's turn
says so with a turn line; deadlines come as milliseconds left too; racing copies of one move
get one "replayed": false and never a rejection of a move that was applied; every answer
matches its schema in the OpenAPI document; errors cite the rule they mean."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from domino_sdk.protocol import decode_line
from jsonschema import Draft202012Validator

from engine.game import decide, evolve, legal_moves
from engine.verify import verify
from events.envelope import Envelope
from events.model import (
    AnyEvent,
    MatchCreated,
    MatchEnded,
    Move,
    Rejection,
    RoundEnded,
    TileDrawn,
    TilePlayed,
    TurnPassed,
    TurnTimedOut,
)
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, join, wait_for_version
from tests.service.conftest import fold
from tests.support.tools import missing

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "docs" / "protocol.md"
API = "/api/v1"


# -- helpers -----------------------------------------------------------------------------------


def body_of(move: Move) -> dict[str, Any]:
    """A move as a client posts it."""
    out: dict[str, Any] = {"type": move.__struct_config__.tag}
    tile = getattr(move, "tile", None)
    if tile is not None:
        out["tile"] = list(tile)
        out["end"] = getattr(move, "end", None)
    return out


@pytest.fixture(scope="module")
def racing(gateways: Gateways) -> Iterator[Gateways]:
    """The stack with a gateway of its own whose budget of rejected moves is unlimited: the
    races below are refused by the rules (C4) on purpose, many times over."""
    with gateways.spawned(
        "gateway-races",
        free_port(),
        {**PLAY_LIMITS, "DOMINO_GATEWAY_REJECTED_MOVE_BURST": "100000"},
    ) as url:
        yield Gateways(gateways.stack, gateways.settings, gateways.redis_url, url, url)


class Table:
    """A two-seat match, both seats held by the test: the log moves only when we move."""

    def __init__(self, g: Gateways, **create_args: Any) -> None:
        self.g = g
        rules = {"players": 2, **create_args.pop("rules", {})}
        self.match_id = create(g.url, [None, None], rules=rules, **create_args)
        self.tokens = dict(join(g.url, self.match_id) for _ in range(2))
        wait_for_version(g, self.match_id, 2)  # created and dealt: the first seat's turn

    def auth(self, seat: int) -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[seat]}"}

    def path(self, seat: int, what: str) -> str:
        return f"{API}/matches/{self.match_id}/seats/{seat}/{what}"

    async def log(self) -> list[Any]:
        return await asyncio.to_thread(self.g.log, self.match_id)


async def read_lines(
    http: httpx.AsyncClient, url: str, n: int, timeout: float = 5.0, **kw: Any
) -> list[dict[str, Any]]:
    """The first ``n`` lines of a stream (keep-alives skipped); fewer if it stalls, and if it
    ends, ``{"end": "ended"}`` after its last line."""
    got: list[dict[str, Any]] = []

    async def read() -> None:
        async with http.stream("GET", url, **kw) as r:
            assert r.status_code == 200, await r.aread()
            async for raw in r.aiter_lines():
                if raw:
                    got.append(json.loads(raw))
                if len(got) >= n:
                    return
            got.append({"end": "ended"})

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), timeout)
    return got


# -- 1. the documented session runs as written, whatever the deal ------------------------------


def documented_session() -> str:
    """The commands of docs/protocol.md's example session: its shell blocks after the one
    that starts the service, in order."""
    text = PROTOCOL.read_text()
    section = text[text.index("## An example session") : text.index("## Endpoints")]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert blocks[0].strip().startswith("domino up"), blocks[0]
    return "\n".join(blocks[1:])


def test_the_documented_curl_session_runs_as_written_on_any_deal(gateways: Gateways) -> None:
    """Pasted as it stands (only the gateway's address differs), on deal after deal until
    both cases were met — we lead the first round, or the house bot does (E2) — each step
    answers as the doc says, and the match ends cleanly."""
    if shutil.which("jq") is None or shutil.which("curl") is None:
        missing("needs curl and jq: apt-get install curl jq")
    g = gateways
    script = documented_session().replace("http://127.0.0.1:8080", g.url)
    script += '\necho "MATCH=$MATCH"\n'
    env = g.stack.env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    leaders: set[str] = set()
    runs = 0
    while leaders != {"we", "the bot"} and runs < 16:
        runs += 1
        run = subprocess.run(
            ["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        out = run.stdout
        assert run.returncode == 0, (out, run.stderr)
        match_id = re.findall(r"^MATCH=(m-\w+)$", out, flags=re.M)[-1]
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        turns = [x for x in lines if x.get("type") == "turn"]
        if len(turns) < 2 and _moves_of(g.log(match_id), "curl-bot") == len(turns):
            continue  # the match ended before the session's second turn (step 5): a first
            # tile that blocked both hands, say, and a count past the target; deal again
        assert len(turns) == 2 and all(t["view"]["legal"] for t in turns), out  # steps 3, 5
        leaders.add("we" if turns[0]["id"] == 2 else "the bot")
        answers = [x for x in lines if "accepted" in x or "error" in x]
        assert answers[0] == {"accepted": True, "version": turns[0]["id"] + 1, "replayed": False}
        assert answers[1] == {**answers[0], "replayed": True}
        assert (answers[2]["reason"], answers[2]["rule"]) == ("draw_in_express", "E1")
        assert answers[3]["error"] == "wrong_seat"
        assert "match over" in out
        assert "event: event" in out  # the spectator's replay, as server-sent events
        log = g.log(match_id)
        assert verify([e.event for e in log]) is None
        assert fold(log).phase == "over"
    assert leaders == {"we", "the bot"}, f"{runs} deals and always {leaders}"


def _moves_of(log: list[Envelope], player: str) -> int:
    """How many moves the seat of ``player`` made in a match that is over (-1 if not over)."""
    if fold(log).phase != "over":
        return -1
    created = log[0].event
    assert isinstance(created, MatchCreated)
    seat = created.players.index(player)
    moves = (TilePlayed, TileDrawn, TurnPassed, TurnTimedOut)
    return sum(1 for e in log if isinstance(e.event, moves) and e.event.seat == seat)


def test_until_turn_ends_a_seat_stream_after_its_turn_line_fresh_or_resumed(
    gateways: Gateways,
) -> None:
    """``?until=turn``: a stream a shell script can read to the end. Fresh on the seat's
    turn: the snapshot and the turn line. Resumed: the events since, then the turn line."""
    g = gateways
    t = Table(g)
    state = fold(g.log(t.match_id))
    seat = state.turn
    assert seat is not None

    async def whole(**params: str) -> list[dict[str, Any]]:
        """Every line of the stream, which must end by itself within 5 s."""
        async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
            got = await read_lines(
                http, t.path(seat, "stream"), 99, params=params, headers=t.auth(seat)
            )
            assert got and got[-1].get("end") == "ended", f"the stream went on: {got}"
            return got[:-1]

    fresh = asyncio.run(whole(until="turn"))
    assert [x["type"] for x in fresh] == ["snapshot", "turn"]
    assert fresh[1]["view"]["legal"]
    resumed = asyncio.run(whole(until="turn", after="0"))
    assert [x["type"] for x in resumed] == ["event", "event", "turn"]
    bad = httpx.get(
        f"{g.url}{t.path(seat, 'stream')}", params={"until": "end"}, headers=t.auth(seat)
    )
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_query"


# -- 2. a fresh stream on the seat's turn sends a turn line ------------------------------------


def test_a_stream_opened_on_the_seats_turn_sends_the_snapshot_and_then_a_turn_line(
    gateways: Gateways,
) -> None:
    """A client that acts on turn lines alone never waits for a turn it was already given
    in the snapshot; the other seat gets the snapshot alone."""
    g = gateways
    t = Table(g)
    state = fold(g.log(t.match_id))
    seat = state.turn
    assert seat is not None

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
            mine = await read_lines(http, t.path(seat, "stream"), 2, headers=t.auth(seat))
            theirs = await read_lines(
                http, t.path(1 - seat, "stream"), 2, timeout=1.5, headers=t.auth(1 - seat)
            )
            return mine, theirs

    mine, theirs = asyncio.run(scenario())
    assert [x["type"] for x in mine] == ["snapshot", "turn"]
    snapshot, turn = mine
    assert turn["id"] == snapshot["id"] == state.version
    assert turn["view"] == snapshot["view"]
    assert turn["view"]["legal"]
    assert [x["type"] for x in theirs] == ["snapshot"]  # not its turn: nothing more yet


# -- 4. deadlines as milliseconds left ---------------------------------------------------------


def test_turn_and_snapshot_lines_carry_the_milliseconds_left_and_the_sdk_reads_them(
    gateways: Gateways,
) -> None:
    """``remaining_ms`` is the deadline as time left when the line was sent; ``deadline``
    the same moment as seconds since the epoch. Both null when it is not the seat's turn."""
    g = gateways
    t = Table(g, deadline_ms=60_000)
    state = fold(g.log(t.match_id))
    seat = state.turn
    assert seat is not None

    async def scenario() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
            return await read_lines(http, t.path(seat, "stream"), 2, headers=t.auth(seat))

    sent = time.time()
    lines = asyncio.run(scenario())
    assert [x["type"] for x in lines] == ["snapshot", "turn"]
    for line in lines:
        assert 0 < line["remaining_ms"] <= 60_000
        assert abs(line["deadline"] - (sent + line["remaining_ms"] / 1000)) < 5
        decoded = decode_line(json.dumps(line).encode())
        assert decoded is not None
        assert decoded.remaining_ms == line["remaining_ms"]  # type: ignore[union-attr]

    waiting = asyncio.run(_first_line(g, t, 1 - seat))  # not its turn: no deadline
    assert (waiting["type"], waiting["deadline"], waiting["remaining_ms"]) == (
        "snapshot",
        None,
        None,
    )


async def _first_line(g: Gateways, t: Table, seat: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
        return (await read_lines(http, t.path(seat, "stream"), 1, headers=t.auth(seat)))[0]


# -- 6, 7. racing copies of one move -----------------------------------------------------------


def race(t: Table, one: str, other: str, label: str) -> None:
    """Twelve moves, each posted twice at once under one key (through ``one`` and ``other``):
    both copies are accepted at the same version; one applied it, the other is its replay."""

    async def scenario() -> list[tuple[int, Any, Any]]:
        trials: list[tuple[int, Any, Any]] = []
        async with (
            httpx.AsyncClient(base_url=one, timeout=10) as first,
            httpx.AsyncClient(base_url=other, timeout=10) as second,
        ):
            for trial in range(12):
                state = fold(await t.log())
                seat = state.turn
                assert seat is not None and state.phase == "playing"
                move = body_of(legal_moves(state)[0])
                headers = {**t.auth(seat), "idempotency-key": f"{label}-{trial}"}
                a, b = await asyncio.gather(
                    first.post(t.path(seat, "moves"), json=move, headers=headers),
                    second.post(t.path(seat, "moves"), json=move, headers=headers),
                )
                trials.append((state.version + 1, a, b))
        return trials

    for version, a, b in asyncio.run(scenario()):
        assert a.status_code == b.status_code == 200, (a.text, b.text)
        answers = sorted([a.json(), b.json()], key=lambda x: x["replayed"])
        assert answers == [
            {"accepted": True, "version": version, "replayed": False},
            {"accepted": True, "version": version, "replayed": True},
        ]


def test_two_posts_racing_with_one_idempotency_key_get_exactly_one_replayed_false(
    racing: Gateways,
) -> None:
    """Both are accepted at the same version; one applied it, the other is its replay."""
    g = racing
    t = Table(g, rules={"target": 1000})
    race(t, g.url, g.url, "race")
    versions: dict[str, list[int]] = {}
    for e in g.log(t.match_id):
        versions.setdefault(e.command_id, []).append(e.version)
    moves = {k: v for k, v in versions.items() if k.startswith("gw:")}
    assert len(moves) == 12
    assert all(v == list(range(v[0], v[0] + len(v))) for v in moves.values())  # applied once


def test_two_posts_of_one_key_racing_through_two_gateways_get_exactly_one_replayed_false(
    racing: Gateways, gateways: Gateways
) -> None:
    """The first copy to reach Redis marks its id in flight; the other, from another gateway,
    is not sent again and waits for that one's outcome, as its replay."""
    race(Table(racing, rules={"target": 1000}), racing.url, gateways.url, "across")


def test_a_retry_racing_its_original_is_never_told_rejected_when_the_move_was_applied(
    racing: Gateways,
) -> None:
    """The seat posts its move a moment before its turn (refused: not_your_turn, C4) and
    again, with the same key, as the other seat's move lands. Whatever the order, a move
    found in the log under that key was never refused to the retry, and of two acceptances
    one is the original and one its replay."""
    g = racing
    t = Table(g, rules={"target": 1000})
    wrong: list[str] = []

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=g.url, timeout=10) as http:
            for trial in range(24):
                state = fold(await t.log())
                mover = state.turn
                assert mover is not None and state.phase == "playing"
                first = legal_moves(state)[0]
                after = _after(state, first)
                if after is None or after.turn == mover:  # no next seat to race
                    await http.post(
                        t.path(mover, "moves"),
                        json=body_of(first),
                        headers={**t.auth(mover), "idempotency-key": f"end-{trial}"},
                    )
                    await asyncio.sleep(0.1)
                    continue
                nxt = after.turn
                reply = body_of(legal_moves(after)[0])
                gap = 0.001 * (trial % 6)
                retry_key = {**t.auth(nxt), "idempotency-key": f"retry-{trial}"}
                o, m, r = await asyncio.gather(
                    post_later(http, 0, t.path(nxt, "moves"), reply, retry_key),
                    post_later(
                        http,
                        gap,
                        t.path(mover, "moves"),
                        body_of(first),
                        {**t.auth(mover), "idempotency-key": f"first-{trial}"},
                    ),
                    post_later(http, 2 * gap + 0.002, t.path(nxt, "moves"), reply, retry_key),
                )
                assert m.status_code == 200, m.text
                log = await t.log()
                applied = any(e.command_id == f"gw:{nxt}:retry-{trial}" for e in log)
                if applied and r.status_code != 200:
                    wrong.append(f"{trial}: the retry was refused: {r.text}")
                if applied and o.status_code != 200 and r.json().get("replayed"):
                    wrong.append(f"{trial}: refused, then replayed: {o.text} {r.text}")
                both = o.status_code == r.status_code == 200
                if both and [o.json()["replayed"], r.json()["replayed"]].count(False) != 1:
                    wrong.append(f"{trial}: not one original: {o.text} {r.text}")
                if not applied:  # the seat still has its move to make: make it
                    await http.post(
                        t.path(nxt, "moves"),
                        json=reply,
                        headers={**t.auth(nxt), "idempotency-key": f"again-{trial}"},
                    )
                await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert not wrong, wrong


async def post_later(
    http: httpx.AsyncClient, delay: float, path: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    """POST after ``delay`` seconds."""
    await asyncio.sleep(delay)
    return await http.post(path, json=body, headers=headers)


def _after(state: Any, move: Move) -> Any:
    """The state after ``move`` if the same round goes on, else None."""
    result = decide(state, move)
    assert not isinstance(result, Rejection)
    after = state.copy()
    events: list[AnyEvent] = list(result)
    for event in events:
        after = evolve(after, event)
    return after if after.phase == "playing" and after.round == state.round else None


# -- 8. rule citations -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "seats", "rule"),
    [
        ({"players": 1}, 1, "C3"),  # 2, 3 or 4 players
        ({"players": 5}, 5, "C3"),
        ({"players": 3, "partners": True}, 3, "C3"),  # partners need four
        ({"top": 7}, 2, "C1"),  # double-6, -9 or -12
        ({"family": "chess"}, 2, "-"),  # no rule names the families' list
        ({"target": 1_000_000}, 2, "E6"),  # over the service's cap: the target option's rule
        ({"family": "straight", "target": 1_000_000}, 2, "S7"),
    ],
)
def test_a_match_the_rules_forbid_cites_the_rule_it_breaks(
    gateways: Gateways, rules: dict[str, Any], seats: int, rule: str
) -> None:
    """RULES.md C3 is the player count (and partners), C1 the set, E6 and S7 the target."""
    r = httpx.post(f"{gateways.url}{API}/matches", json={"seats": [None] * seats, "rules": rules})
    assert r.status_code == 422, r.text
    body = r.json()
    assert (body["error"], body["reason"], body["rule"]) == ("rejected", "bad_rules", rule)


# -- 5. every answer has its schema in the OpenAPI document ------------------------------------


class Spec:
    """The gateway's OpenAPI document, and checks of real answers against it."""

    def __init__(self, url: str) -> None:
        self.doc: dict[str, Any] = httpx.get(f"{url}{API}/openapi.json").json()
        self.checked: set[tuple[str, str, str]] = set()

    def schema(self, schema: dict[str, Any]) -> Draft202012Validator:
        """A validator for ``schema``, its references resolved in the document."""
        return Draft202012Validator({**schema, "components": self.doc["components"]})

    def check(self, path: str, method: str, r: httpx.Response) -> None:
        """The answer's status is documented for the path, its headers and body match."""
        status = str(r.status_code)
        responses = self.doc["paths"][path][method]["responses"]
        assert status in responses, f"{method} {path} answered {status}: {r.text}"
        spec = responses[status]
        for name, ref in spec.get("headers", {}).items():
            header = self.doc["components"]["headers"][ref["$ref"].rsplit("/", 1)[1]]
            if header["required"]:
                assert name.lower() in r.headers, f"{method} {path} {status} lacks {name}"
                self.schema(header["schema"]).validate(int(r.headers[name.lower()]))
        content = spec["content"]
        if "application/json" in content:
            self.schema(content["application/json"]["schema"]).validate(r.json())
        else:
            lines = [json.loads(x) for x in r.text.splitlines() if x]
            assert lines
            for line in lines:
                self.schema(content["application/x-ndjson"]["schema"]).validate(line)
        self.checked.add((method, path, status))

    def limited(self, path: str, method: str, r: httpx.Response) -> None:
        """A 429 as documented: its headers declared, and its example naming its limit."""
        self.check(path, method, r)
        spec = self.doc["paths"][path][method]["responses"]["429"]
        assert set(spec["headers"]) == {
            "Domino-Protocol",
            "Retry-After",
            "RateLimit-Limit",
            "RateLimit-Remaining",
            "RateLimit-Reset",
        }
        assert spec["content"]["application/json"]["example"]["limit"] == r.json()["limit"]

    def lines(self, lines: list[dict[str, Any]], component: str) -> None:
        """Stream lines, each against a component schema (Line, MinimalLine)."""
        validator = self.schema({"$ref": f"#/components/schemas/{component}"})
        for line in lines:
            validator.validate(line)


def test_every_answer_of_the_gateway_matches_its_schema_in_the_openapi_document(
    gateways: Gateways,
) -> None:
    """Lobby, seat, streams (all and minimal), moves, and the errors of each, with the
    headers the document promises (RateLimit-* on moves, Retry-After on 429s)."""
    g = gateways
    spec = Spec(g.url)
    m = f"{API}/matches/{{match_id}}"
    seat_path, moves_path = f"{m}/seats/{{seat}}/stream", f"{m}/seats/{{seat}}/moves"
    api = f"{g.url}{API}"
    with httpx.Client(timeout=10) as http:
        # the lobby
        created = http.post(f"{api}/matches", json={"seats": ["random", None, None]})
        spec.check(f"{API}/matches", "post", created)
        match_id = created.json()["match"]["match_id"]
        spec.check(f"{API}/matches", "post", http.post(f"{api}/matches", content=b"{"))
        spec.check(f"{API}/matches", "post", http.post(f"{api}/matches", json={"seats": 2}))
        spec.check(f"{API}/matches", "post", http.post(f"{api}/matches", json={"seats": [None]}))
        form = {"content-type": "text/plain"}
        spec.check(
            f"{API}/matches", "post", http.post(f"{api}/matches", content=b"{}", headers=form)
        )
        for status in ("open", "live", "finished", "maybe"):
            spec.check(
                f"{API}/matches", "get", http.get(f"{api}/matches", params={"status": status})
            )
        spec.check(m, "get", http.get(f"{api}/matches/{match_id}"))
        spec.check(m, "get", http.get(f"{api}/matches/m-0000000000"))
        joined = http.post(f"{api}/matches/{match_id}/join", json={"name": "schema"})
        spec.check(f"{m}/join", "post", joined)
        for body in ({"seat": 0}, {"seat": 1}, {"seat": 9}, {"name": ""}):
            r = http.post(f"{api}/matches/{match_id}/join", json=body)
            spec.check(f"{m}/join", "post", r)
        spec.check(f"{m}/join", "post", http.post(f"{api}/matches/m-0000000000/join", json={}))
        token = joined.json()["token"]
        auth = {"authorization": f"Bearer {token}"}
        spec.check(f"{API}/seat", "get", http.get(f"{api}/seat", headers=auth))
        spec.check(f"{API}/seat", "get", http.get(f"{api}/seat"))
        spec.check("/healthz", "get", http.get(f"{g.url}/healthz"))
        spec.check(f"{API}/openapi.json", "get", http.get(f"{api}/openapi.json"))
        # a match under way, both seats ours: moves and streams
        t = Table(g)
        state = fold(g.log(t.match_id))
        mover = state.turn
        assert mover is not None
        base = f"{api}/matches/{t.match_id}/seats"
        moves = f"{base}/{mover}/moves"
        key = {**t.auth(mover), "idempotency-key": "schema-1"}
        spec.check(moves_path, "post", http.post(moves, json={"type": "draw_tile"}, headers=key))
        move = body_of(legal_moves(state)[0])
        spec.check(moves_path, "post", http.post(moves, json=move, headers=key))
        spec.check(moves_path, "post", http.post(moves, json=move, headers=key))  # replayed
        spec.check(moves_path, "post", http.post(moves, json={"type": "pass_turn"}, headers=key))
        spec.check(moves_path, "post", http.post(moves, json=move, headers=t.auth(mover)))
        spec.check(moves_path, "post", http.post(moves, content=b"{", headers=key))
        spec.check(moves_path, "post", http.post(moves, json={"type": "castle"}, headers=key))
        spec.check(moves_path, "post", http.post(moves, json=move))
        other = {**t.auth(1 - mover), "idempotency-key": "schema-2"}
        spec.check(moves_path, "post", http.post(moves, json=move, headers=other))
        huge = b'{"type": "pass_turn", "pad": "' + b"x" * 10_000 + b'"}'
        spec.check(moves_path, "post", http.post(moves, content=huge, headers=key))
        plain = {**key, "content-type": "text/plain"}
        spec.check(moves_path, "post", http.post(moves, content=b"{}", headers=plain))
        stream = f"{base}/{mover}/stream"
        # ``until=turn`` ends at the seat's turn: read it from the seat to move now, not from
        # one that would wait for the other's turn to time out
        now = fold(g.log(t.match_id)).turn
        assert now is not None
        for params in ({"after": "0", "until": "turn"}, {"events": "minimal", "until": "turn"}):
            r = http.get(f"{base}/{now}/stream", params=params, headers=t.auth(now))
            spec.check(seat_path, "get", r)
            if "events" in params:
                spec.lines([json.loads(x) for x in r.text.splitlines() if x], "MinimalLine")
        for params in ({"after": "999"}, {"events": "some"}):
            spec.check(seat_path, "get", http.get(stream, params=params, headers=t.auth(mover)))
        spec.check(seat_path, "get", http.get(stream))
        spec.check(seat_path, "get", http.get(stream, headers=t.auth(1 - mover)))
        spectate = f"{api}/matches/{t.match_id}/stream"
        spec.check(f"{m}/stream", "get", http.get(spectate, params={"after": "999"}))
        spec.check(f"{m}/stream", "get", http.get(f"{api}/matches/m-0000000000/stream"))

    async def streams() -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            public = await read_lines(client, spectate, 3, params={"after": "0"})
            spec.lines(public, "Line")
            mine = await read_lines(client, stream, 3, headers=t.auth(mover))
            spec.lines(mine, "Line")

    asyncio.run(streams())
    assert len(spec.checked) >= 30, sorted(spec.checked)  # distinct (method, path, status)


def test_the_limits_429_answers_match_the_openapi_document_headers_and_all(
    gateways: Gateways,
) -> None:
    """Too many moves, too many streams for one token: a LimitError body naming the limit,
    Retry-After, and RateLimit-*."""
    g = gateways
    spec = Spec(g.strict_url)
    m = f"{API}/matches/{{match_id}}"
    match_id = create(g.strict_url, [None, None], rules={"players": 2})
    seat, token = join(g.strict_url, match_id)
    auth = {"authorization": f"Bearer {token}"}
    base = f"{g.strict_url}{API}/matches/{match_id}/seats/{seat}"
    with httpx.Client(timeout=10) as http:
        answers = [
            http.post(f"{base}/moves", content=b"{", headers={**auth, "idempotency-key": f"k{i}"})
            for i in range(12)
        ]
    limited = [r for r in answers if r.status_code == 429]
    assert limited
    spec.limited(f"{m}/seats/{{seat}}/moves", "post", limited[0])
    assert limited[0].json()["limit"] == "moves_per_second"

    async def streams() -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as client:
            url = f"{base}/stream"
            async with (
                client.stream("GET", url, headers=auth),
                client.stream("GET", url, headers=auth),
            ):
                return await client.get(url, headers=auth)

    third = asyncio.run(streams())
    spec.limited(f"{m}/seats/{{seat}}/stream", "get", third)
    assert third.json()["limit"] == "streams_per_token"


# -- 3. what the docs say about the start, the statuses and sides ------------------------------


def doc_section(title: str) -> str:
    """The paragraph or bullet of docs/protocol.md that starts with ``**title**``."""
    text = PROTOCOL.read_text()
    start = text.index(f"**{title}**")
    ends = [text.find(mark, start + 1) for mark in ("\n- **", "\n\n**", "\n## ")]
    return text[start : min(e for e in ends if e > 0)]


def test_the_docs_match_the_gateway_on_early_streams_match_statuses_and_seats_and_sides(
    gateways: Gateways,
) -> None:
    """The doc shows the snapshot of a stream opened before the match starts as it is sent;
    its table of match statuses is the document's and the gateway's; and it says which
    fields of round_ended and match_ended are seats and which are sides, as they are."""
    g = gateways
    # a stream opened while the match waits for players: the snapshot the doc shows
    early = doc_section("Before the match starts.")
    quoted = re.search(r"`(\{.*?\})`", early, re.S)
    assert quoted is not None, early
    shown = json.loads(re.sub(r"\s+", " ", quoted[1]).replace("...", "null"))
    match_id = create(g.url, [None, None], rules={"players": 2})
    seat, token = join(g.url, match_id)
    auth = {"authorization": f"Bearer {token}"}
    url = f"{g.url}{API}/matches/{match_id}/seats/{seat}/stream"

    async def first() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10) as http:
            return (await read_lines(http, url, 1, headers=auth))[0]

    sent = asyncio.run(first())
    assert sent == {**shown, "match_id": match_id, "seat": seat}
    # the statuses: the doc's table, the OpenAPI document's and what the gateway answers
    table = doc_section("Match status.")
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    doc = httpx.get(f"{g.url}{API}/openapi.json").json()
    assert documented == set(
        doc["components"]["schemas"]["MatchInfo"]["properties"]["status"]["enum"]
    )
    seen = {httpx.get(f"{g.url}{API}/matches/{match_id}").json()["status"]}
    join(g.url, match_id)
    seen.add(httpx.get(f"{g.url}{API}/matches/{match_id}").json()["status"])
    assert seen == {"open", "started"} and seen <= documented
    # seats and sides, in a partners match played to its end by house bots
    sides = doc_section("Seats and sides.")
    assert "`winner` is the winning *side*" in sides and "`winner` is a\n  *seat*" in sides
    partners = create(g.url, ["random"] * 4, rules={"players": 4, "partners": True, "target": 20})
    deadline = time.monotonic() + 30
    while not any(isinstance(e.event, MatchEnded) for e in g.log(partners)):
        assert time.monotonic() < deadline, "the house bots did not finish"
        time.sleep(0.1)
    log = [e.event for e in g.log(partners)]
    ended = log[-1]
    assert isinstance(ended, MatchEnded) and ended.winner in (0, 1) and len(ended.scores) == 2
    rounds = [e for e in log if isinstance(e, RoundEnded) and e.side is not None]
    assert rounds
    for r in rounds:
        assert len(r.scores) == 2 and len(r.counts) == len(r.hands) == 4
        assert r.winner is not None and r.winner % 2 == r.side  # a seat, of the side that scored
