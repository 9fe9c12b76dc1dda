"""A resume never skips silently: a stream resumed from events it no longer holds — an
account's feed or an arena's trimmed past them, a match's log gone from where this gateway can
read it — begins with a ``gap`` line saying what was lost, then resyncs, in NDJSON and in
server-sent events alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from services.lobby.arenas import Arenas
from services.projections.accounts import AccountFeeds
from services.store.keys import Keys
from tests.gateway.conftest import OPERATOR, Gateways, create, join
from tests.gateway.test_accounts import auth, register, unique
from tests.support.topology import client_for

pytestmark = [pytest.mark.service]

KEPT = 50
"""How many events the floods below keep (the feed trims to about this many, by whole nodes)."""
FLOOD = 300


def read(url: str, path: str, n: int, sse: bool, **params: Any) -> list[dict[str, Any]]:
    """The first ``n`` lines of a stream (fewer if it ends first), keep-alives skipped; as
    server-sent events each line is its data with its ``id:`` and ``event:`` under ``_sse``."""
    headers = params.pop("headers", {})
    if sse:
        params["format"] = "sse"
    with (
        httpx.Client(base_url=url, timeout=20) as http,
        http.stream("GET", path, params=params, headers=headers) as r,
    ):
        assert r.status_code == 200, r.read()
        return parse(r.iter_lines(), n, sse)


def parse(lines: Iterator[str], n: int, sse: bool) -> list[dict[str, Any]]:
    """The first ``n`` objects of a stream's lines (see :func:`read`)."""
    out: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    for line in lines:
        if not sse:
            if line.strip():
                out.append(json.loads(line))
        elif line.startswith(("id:", "event:", "data:")):
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        elif not line and "data" in fields:
            data = json.loads(fields.pop("data"))
            data["_sse"] = dict(fields)
            fields.clear()
            out.append(data)
        if len(out) >= n:
            break
    return out


def oldest(g: Gateways, stream: str) -> int:
    """The id of the oldest entry a feed still holds."""

    async def first() -> int:
        redis = client_for(g.redis_url)
        try:
            entries = await redis.xrange(stream, "-", "+", count=1)
            return int(entries[0][0].split(b"-")[0])
        finally:
            await redis.aclose()

    return asyncio.run(first())


def flood_account(g: Gateways, account_id: str) -> tuple[str, int]:
    """Append FLOOD events to the account's feed, trimming it to about KEPT; the feed's key and
    its latest id."""
    keys = Keys(g.settings.prefix, g.settings.partitions)

    async def go() -> int:
        redis = client_for(g.redis_url)
        try:
            feeds = AccountFeeds(redis, keys, kept=KEPT)
            for k in range(FLOOD):
                await feeds.append(account_id, "flood", {"n": k})
            return await feeds.last(account_id)
        finally:
            await redis.aclose()

    return keys.account_feed(account_id), asyncio.run(go())


@pytest.mark.parametrize("sse", [False, True], ids=["ndjson", "sse"])
def test_an_account_stream_resumed_from_before_its_trimmed_events_says_so_then_resyncs(
    gateways: Gateways, sse: bool
) -> None:
    g = gateways
    account_id, token = register(g.url, unique("gap"))
    feed, last = flood_account(g, account_id)
    held = oldest(g, feed)
    assert held > 1, "the flood trimmed nothing"
    gap, state = read(g.url, "/api/v1/account/stream", 2, sse, after=0, headers=auth(token))
    assert {k: gap[k] for k in ("type", "id", "after", "oldest")} == {
        "type": "gap",
        "id": held - 1,
        "after": 0,
        "oldest": held,
    }
    assert state["type"] == "state" and state["id"] == last
    assert state["live"] == [] and state["challenges"] == [] and state["seeks"] == []
    if sse:
        assert gap["_sse"] == {"id": str(held - 1), "event": "gap"}
        assert state["_sse"] == {"id": str(last), "event": "state"}
    # Last-Event-ID says the same; a resume from what the feed still holds has no gap
    headers = {**auth(token), "last-event-id": str(held - 5)}
    assert read(g.url, "/api/v1/account/stream", 1, sse, headers=headers)[0]["type"] == "gap"
    kept = read(g.url, "/api/v1/account/stream", 2, sse, after=held - 1, headers=auth(token))
    assert [(e["type"], e["id"]) for e in kept] == [("flood", held), ("flood", held + 1)]


def test_an_account_stream_open_through_a_flood_skips_nothing_without_saying_so(
    gateways: Gateways,
) -> None:
    g = gateways
    account_id, token = register(g.url, unique("gap"))
    with (
        httpx.Client(base_url=g.url, timeout=20) as http,
        http.stream("GET", "/api/v1/account/stream", headers=auth(token)) as r,
    ):
        lines = (json.loads(line) for line in r.iter_lines() if line.strip())
        first = next(lines)
        assert first["type"] == "state" and first["id"] == 0
        _, last = flood_account(g, account_id)  # it may outrun the stream's reads, or not
        seen = 0
        while seen < last:
            line = next(lines)
            if line["type"] == "gap":  # then where things stand, and on from there
                assert line["after"] == seen and line["oldest"] > seen + 1
                state = next(lines)
                assert state["type"] == "state" and state["id"] >= line["id"]
                seen = state["id"]
                continue
            assert line["id"] == seen + 1, f"{line['id']} after {seen}, and no gap line"
            seen = line["id"]
    assert seen == last


def flood_arena(g: Gateways, arena_id: str, account_id: str) -> tuple[str, int]:
    """An account joins and leaves the arena until its feed is trimmed to about KEPT; the
    feed's key and its latest id."""
    keys = Keys(g.settings.prefix, g.settings.partitions)

    async def go() -> tuple[str, int]:
        redis = client_for(g.redis_url)
        try:
            arenas = Arenas(redis, keys, kept=KEPT)
            for _ in range(FLOOD // 2):
                await arenas.join(arena_id, account_id, "flooder")
                await arenas.leave(arena_id, account_id)
            return arenas.key(arena_id, "feed"), await arenas.last(arena_id)
        finally:
            await redis.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("sse", [False, True], ids=["ndjson", "sse"])
def test_an_arena_stream_from_before_its_trimmed_lines_says_so_then_sends_the_oldest_kept(
    gateways: Gateways, sse: bool
) -> None:
    g = gateways
    account_id, _ = register(g.url, unique("gap"))
    r = httpx.post(
        f"{g.url}/api/v1/arenas",
        json={"name": unique("gaps"), "rules": {"players": 2}},
        headers=auth(OPERATOR),
    )
    assert r.status_code == 201, r.text
    arena_id = r.json()["arena"]["id"]
    feed, last = flood_arena(g, arena_id, account_id)
    held = oldest(g, feed)
    assert 1 < held < last
    path = f"/api/v1/arenas/{arena_id}/stream"
    for params in ({"after": "3"}, {}):  # resumed, or from the first line
        after = int(params.get("after", 0))
        gap, line, following = read(g.url, path, 3, sse, **params)
        assert {k: gap[k] for k in ("type", "id", "after", "oldest")} == {
            "type": "gap",
            "id": held - 1,
            "after": after,
            "oldest": held,
        }
        assert line["id"] == held and line["type"] in ("joined", "left")
        assert following["id"] == held + 1
        if sse:
            assert gap["_sse"] == {"id": str(held - 1), "event": "gap"}
    kept = read(g.url, path, 1, sse, after=held - 1)
    assert kept[0]["id"] == held and kept[0]["type"] != "gap"


@pytest.mark.parametrize("sse", [False, True], ids=["ndjson", "sse"])
def test_a_match_stream_resumed_when_its_log_is_gone_says_so_then_sends_a_snapshot(
    gateways: Gateways, sse: bool
) -> None:
    """A gateway that still holds a finished match (it drops one nobody follows at its next
    look, every 5 s) is asked to resume it after its log has gone: a gap line, then the
    snapshot. Should the gateway have let the match go before the resumed streams reached it
    (a loaded machine), the resume is refused instead (400, the match unknown there) — never
    a silent skip — and the scenario is played again on a new match."""
    for _ in range(5):
        if _resumed_after_the_log_is_gone(gateways, sse):
            return
    pytest.fail("the gateway never held the finished match long enough to be asked")


def _resumed_after_the_log_is_gone(g: Gateways, sse: bool) -> bool:
    match_id = create(g.url, ["random", None], rules={"players": 2, "target": 50})
    seat, token = join(g.url, match_id)
    api = f"/api/v1/matches/{match_id}"
    r = httpx.post(
        f"{g.url}{api}/seats/{seat}/moves",
        json={"type": "resign"},
        headers={**auth(token), "idempotency-key": "bye"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    # followed here: the gateway keeps the match's state after the streams close
    (over,) = read(g.url, f"{api}/stream", 5, sse)
    assert over["type"] == "snapshot" and over["view"]["phase"] == "over"
    version = over["id"]
    assert version > 2
    keys = Keys(g.settings.prefix, g.settings.partitions)

    async def lose_the_log() -> None:  # as if archived where this gateway cannot read
        redis = client_for(g.redis_url)
        try:
            await redis.delete(keys.match(match_id))
        finally:
            await redis.aclose()

    asyncio.run(lose_the_log())
    for path, headers in ((f"{api}/stream", {}), (f"{api}/seats/{seat}/stream", auth(token))):
        params = {"after": "2", "format": "sse"} if sse else {"after": "2"}
        r = httpx.get(f"{g.url}{path}", params=params, headers=headers, timeout=20)
        if r.status_code == 400:  # let go meanwhile: it no longer knows the match
            assert r.json()["error"] == "bad_resume", r.text
            assert "version 0" in r.json()["message"], r.text
            return False
        assert r.status_code == 200, r.text
        gap, snapshot = parse(iter(r.text.split("\n")), 5, sse)
        assert {k: gap[k] for k in ("type", "id", "after", "oldest")} == {
            "type": "gap",
            "id": version,
            "after": 2,
            "oldest": version + 1,
        }
        assert snapshot["type"] == "snapshot" and snapshot["id"] == version
        assert snapshot["view"]["phase"] == "over"
        if sse:
            assert gap["_sse"] == {"id": str(version), "event": "gap"}
    return True
