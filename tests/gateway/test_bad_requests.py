"""Every bad request gets the right status and a typed JSON error, never a 500 or a hang, and
none of them changes the match log. Run against the gateway with tight limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from engine.game import legal_moves
from engine.strategy import RandomStrategy
from services.cli.bot_commands import StrategyBot
from services.gateway.config import GatewaySettings
from tests.gateway.conftest import Gateways, create, join, wait_for_version
from tests.service.conftest import fold

pytestmark = pytest.mark.service


class Table:
    """A two-seat match, both seats held by the test: the log moves only when we move."""

    def __init__(self, g: Gateways, url: str) -> None:
        self.g = g
        self.url = url
        self.match_id = create(self.url, [None, None], rules={"players": 2})
        self.tokens = dict(join(self.url, self.match_id) for _ in range(2))
        wait_for_version(g, self.match_id, 2)  # created and dealt: the first seat's turn
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def log(self) -> list[Any]:
        return self.g.log(self.match_id)

    def post(
        self,
        seat: int,
        body: Any = None,
        *,
        token: str | None = None,
        key: str | None = "k1",
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        h = {"authorization": f"Bearer {token or self.tokens[seat]}"}
        if key is not None:
            h["idempotency-key"] = key
        h.update(headers or {})
        path = f"/api/v1/matches/{self.match_id}/seats/{seat}/moves"
        if content is not None:
            return self.http.post(path, content=content, headers=h)
        return self.http.post(path, json=body, headers=h)


@pytest.fixture
def table(gateways: Gateways) -> Iterator[Table]:
    """A fresh two-seat match behind the gateway with the usual limits."""
    t = Table(gateways, gateways.url)
    yield t
    t.http.close()


@pytest.fixture
def strict_table(gateways: Gateways) -> Iterator[Table]:
    """A fresh two-seat match behind the gateway with tight limits."""
    t = Table(gateways, gateways.strict_url)
    yield t
    t.http.close()


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Check a typed JSON error and return its body."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body: dict[str, Any] = r.json()
    assert body["error"] == code, body
    assert body["message"]
    return body


def test_bad_moves_get_typed_errors_and_leave_the_log_as_it_was(table: Table) -> None:
    """Tokens, idempotency keys, bodies and moves, each wrong in its own way."""
    t = table
    state = fold(t.log())
    turn, other = state.turn, 1 - state.turn
    legal = legal_moves(state)[0]
    move = {"type": "play_tile", "tile": list(legal.tile), "end": legal.end}  # type: ignore[union-attr]
    version = len(t.log()) + 1
    r = t.post(turn, move, key="first")
    assert r.json() == {"accepted": True, "version": version, "replayed": False}
    assert int(r.headers["ratelimit-limit"]) == GatewaySettings().move_burst
    before = t.log()

    # the same key and move again: applied once, answered as before
    again = t.post(turn, move, key="first")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["version"] == version
    # the same key for another move
    other_move = {"type": "pass_turn"}
    error(t.post(turn, other_move, key="first"), 409, "idempotency_key_reused")

    error(t.post(other, move, token="not-a-token"), 401, "unauthorized")
    error(t.post(other, move, headers={"authorization": "Basic xyz"}), 401, "unauthorized")
    error(t.post(turn, move, token=t.tokens[other]), 403, "wrong_seat")
    error(t.post(other, {"type": "pass_turn", "seat": turn}), 403, "wrong_seat")
    error(t.post(other, move, key=None), 400, "missing_idempotency_key")
    error(t.post(other, move, key="no spaces allowed"), 400, "bad_idempotency_key")
    error(t.post(other, content=b'{"type": "play_tile", "tile": [1,'), 400, "bad_json")
    error(t.post(other, content=b"\xff\xfe"), 400, "bad_json")
    error(t.post(other, {"type": "play_tile", "tile": "6-6"}), 422, "invalid_move")
    error(t.post(other, {"type": "play_tile", "tile": [1, 2], "end": 3}), 422, "invalid_move")
    error(t.post(other, {"type": "play_tile", "tile": [1, 2], "edge": "left"}), 422, "invalid_move")
    error(t.post(other, {"type": "castle"}), 422, "invalid_move")
    error(t.post(other, [1, 2]), 422, "invalid_move")
    huge = b'{"type": "pass_turn", "pad": "' + b"x" * 10_000 + b'"}'
    body = error(t.post(other, content=huge), 413, "body_too_large")
    assert body["limit"] == "body_bytes" and body["max"] == 4096

    def chunks() -> Iterator[bytes]:
        yield huge  # no Content-Length: the limit is counted as the body arrives

    r = t.http.post(
        f"/api/v1/matches/{t.match_id}/seats/{other}/moves",
        content=chunks(),
        headers={"authorization": f"Bearer {t.tokens[other]}", "idempotency-key": "c"},
    )
    error(r, 413, "body_too_large")
    # well-formed but against the rules: the referee's reason comes back
    now = fold(before)
    waiting = 1 - now.turn
    rejected = error(t.post(waiting, {"type": "pass_turn"}, key="out-of-turn"), 409, "rejected")
    assert rejected["reason"] == "not_your_turn" and rejected["rule"] == "C4"
    bad = {"type": "play_tile", "tile": list(next(iter(now.hands[waiting])))}
    rejected = error(t.post(now.turn, bad, key="not-mine"), 409, "rejected")
    assert rejected["reason"] == "tile_not_in_hand"

    time.sleep(0.3)  # anything the referee might still append would show by now
    assert t.log() == before


def test_too_many_moves_answer_429_naming_the_limit_and_when_to_retry(
    strict_table: Table,
) -> None:
    """The move limit counts every request of a token, good or bad."""
    t = strict_table
    before = t.log()
    answers = [t.post(0, content=b"{", key=f"k{i}") for i in range(12)]
    statuses = [r.status_code for r in answers]
    assert statuses[:5] == [400] * 5  # the burst (6) is not exhausted by the first five
    limited = [r for r in answers if r.status_code == 429]
    assert limited, statuses
    body = error(limited[0], 429, "rate_limited")
    assert body["limit"] == "moves_per_second"
    assert 0 < body["retry_after"] <= 1
    assert int(limited[0].headers["retry-after"]) >= 1
    time.sleep(body["retry_after"] + 0.05)
    assert t.post(0, content=b"{", key="later").status_code == 400  # allowed again
    assert t.log() == before


def test_a_third_stream_for_one_token_answers_429_and_a_closed_one_frees_its_place(
    strict_table: Table,
) -> None:
    """streams_per_token is 2 (the default)."""
    t = strict_table
    url = f"{t.url}/api/v1/matches/{t.match_id}/seats/0/stream"
    auth = {"authorization": f"Bearer {t.tokens[0]}"}

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            async with (
                http.stream("GET", url, headers=auth) as a,
                http.stream("GET", url, headers=auth) as b,
            ):
                assert a.status_code == b.status_code == 200
                r = await http.get(url, headers=auth)
                body = error(r, 429, "rate_limited")
                assert body["limit"] == "streams_per_token"
            for _ in range(50):  # the server notices the closed streams at once
                async with http.stream("GET", url, headers=auth) as c:
                    if c.status_code == 200:
                        return
                await asyncio.sleep(0.05)
            pytest.fail("closed streams were never released")

    asyncio.run(scenario())


def test_a_token_for_a_finished_match_is_refused_by_the_referee(gateways: Gateways) -> None:
    """The match is over (C9): the move is rejected with the engine's reason."""
    g = gateways
    match_id = create(g.url, ["random", None], rules={"players": 2, "target": 10})
    seat, token = join(g.url, match_id)

    async def play() -> None:
        await StrategyBot(RandomStrategy(3)).play(g.url, token)

    asyncio.run(play())
    n = len(g.log(match_id))
    r = httpx.post(
        f"{g.url}/api/v1/matches/{match_id}/seats/{seat}/moves",
        json={"type": "pass_turn"},
        headers={"authorization": f"Bearer {token}", "idempotency-key": "late"},
    )
    body = error(r, 409, "rejected")
    assert body["reason"] == "match_over" and body["rule"] == "C9"
    # its stream says how it ended and closes
    lines = httpx.get(
        f"{g.url}/api/v1/matches/{match_id}/seats/{seat}/stream",
        headers={"authorization": f"Bearer {token}"},
    ).text.splitlines()
    assert len(lines) == 1 and '"phase":"over"' in lines[0]
    assert len(g.log(match_id)) == n


def test_the_sdk_honours_429s_and_finishes_its_match_under_tight_limits(
    gateways: Gateways,
) -> None:
    """Four moves a second per token here: the bot is slowed down, never stopped."""
    g = gateways
    match_id = create(g.strict_url, ["random", None], rules={"players": 2, "target": 50})
    _, token = join(g.strict_url, match_id)
    limited: list[int] = []

    async def hook(response: httpx.Response) -> None:
        if response.status_code == 429:
            limited.append(1)

    async def play() -> Any:
        async with httpx.AsyncClient(event_hooks={"response": [hook]}, timeout=10) as http:
            bot = StrategyBot(RandomStrategy(5))
            return await bot.play(g.strict_url, token, client=http, transport="http")  # its 429s

    result = asyncio.run(asyncio.wait_for(play(), 40))
    assert result is not None
    assert limited
    # the SDK's MatchEnded and the engine's are two structs of one wire shape
    assert msgspec.to_builtins(fold(g.log(match_id)).result) == msgspec.to_builtins(result)


def test_lobby_mistakes_get_typed_errors(gateways: Gateways) -> None:
    """Unknown matches and seats, taken seats, house bot seats, bad rules and bodies."""
    url = gateways.url
    m = create(url, ["random", None, None], rules={"players": 3})
    api = f"{url}/api/v1"
    error(httpx.post(f"{api}/matches/m-nope/join", json={}), 404, "no_match")
    error(httpx.post(f"{api}/matches/{m}/join", json={"seat": 7}), 404, "no_such_seat")
    error(httpx.post(f"{api}/matches/{m}/join", json={"seat": -1}), 404, "no_such_seat")
    error(httpx.post(f"{api}/matches/{m}/join", json={"seat": 0}), 409, "seat_is_house_bot")
    join(url, m, seat=1, name="first")
    error(httpx.post(f"{api}/matches/{m}/join", json={"seat": 1}), 409, "seat_taken")
    error(httpx.post(f"{api}/matches/{m}/join", json={"name": ""}), 422, "invalid_name")
    join(url, m)
    error(httpx.post(f"{api}/matches/{m}/join", json={}), 409, "match_full")
    body = error(
        httpx.post(f"{api}/matches", json={"seats": [None], "rules": {"players": 5}}),
        422,
        "rejected",
    )
    assert body["reason"] == "bad_rules"
    body = error(
        httpx.post(f"{api}/matches", json={"seats": [None, "no such pool!"]}), 422, "unknown_pool"
    )
    assert "greedy" in body["message"]  # it names the pools there are
    error(httpx.post(f"{api}/matches", json={"seats": "two"}), 422, "invalid_match")
    error(httpx.post(f"{api}/matches", json={"seats": [None, "external"]}), 422, "invalid_match")
    error(httpx.post(f"{api}/matches", content=b"seats"), 400, "bad_json")
    error(httpx.get(f"{api}/matches", params={"status": "maybe"}), 422, "invalid_query")
    error(httpx.get(f"{api}/nothing-here"), 404, "not_found")
    error(httpx.delete(f"{api}/matches"), 405, "method_not_allowed")
    error(httpx.get(f"{api}/seat"), 401, "unauthorized")
    error(httpx.get(f"{api}/matches/m-nope/stream"), 404, "no_match")
    seat, token = join(url, create(url, [None, None], rules={"players": 2}))
    stream = f"{api}/matches/{m}/seats/{seat}/stream"
    error(httpx.get(stream, headers={"authorization": f"Bearer {token}"}), 403, "wrong_match")
    opened = httpx.get(f"{api}/matches", params={"status": "open"}).json()["matches"]
    assert all(x["status"] == "open" for x in opened)
    info = httpx.get(f"{api}/matches/{m}").json()
    assert info["status"] == "started" and [s["kind"] for s in info["seats"]] == [
        "bot",
        "taken",
        "taken",
    ]
    assert "token" not in str(info)


def test_numbers_written_with_other_digits_are_refused_not_a_500(table: Table) -> None:
    """Found by a hostile client: "²" passes str.isdigit() but not int(). A resume point in
    superscript or Arabic-Indic digits is a 400 like any other bad one."""
    stream = f"/api/v1/matches/{table.match_id}/stream"
    for raw in ("%C2%B2", "%D9%A3"):  # ², ٣
        error(table.http.get(f"{stream}?after={raw}"), 400, "bad_resume")
    error(table.http.get(stream, headers={"last-event-id": b"\xb2"}), 400, "bad_resume")


def test_a_cross_site_form_or_plain_text_post_creates_and_joins_nothing(
    gateways: Gateways,
) -> None:
    """Found by a hostile client: a page on another site could POST text/plain JSON (a
    browser sends it without a preflight) and open matches in a visitor's name. Forms and
    plain text are refused with 415; nothing is created and no seat is taken."""
    api = f"{gateways.url}/api/v1"
    body = b'{"seats": ["random", null], "rules": {"players": 2}}'
    before = httpx.get(f"{api}/matches", params={"status": "open"}).json()["matches"]
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"):
        error(httpx.post(f"{api}/matches", content=body, headers={"content-type": kind}), 415,
              "unsupported_media_type")  # fmt: skip
    assert httpx.get(f"{api}/matches", params={"status": "open"}).json()["matches"] == before
    m = create(gateways.url, [None, None], rules={"players": 2})
    plain = {"content-type": "text/plain;charset=UTF-8"}
    error(httpx.post(f"{api}/matches/{m}/join", content=b"{}", headers=plain), 415,
          "unsupported_media_type")  # fmt: skip
    info = httpx.get(f"{api}/matches/{m}").json()
    assert [s["kind"] for s in info["seats"]] == ["open", "open"]
