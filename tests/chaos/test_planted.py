"""Malformed entries planted directly in Redis, where each process decodes what it reads:
command streams (the referee), turns streams (the bot workers), the notification log (the
projector and the gateway), a match log and the projections' data (the gateway's answers).

Entries are generated (Hypothesis: truncated, garbage, wrong-typed, huge, fields missing or
misnamed) and handmade from real ones. Whatever is planted, each process keeps serving the
other matches: it parks or passes over the entry with a reason in its log, never crashes,
never stalls a partition, and the gateway answers a typed error, never a 500.
tests/service/test_bad_input.py has the commands a sender can send (rejected to it, with the
engine's reason); these are the entries no sender of the service writes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import hypothesis
import hypothesis.strategies as st
import pytest

from engine.rules import Rules
from services.store.keys import Keys
from tests.chaos.conftest import Planted
from tests.service.conftest import read_log, wait_until_over
from tests.service.test_hosted_matches import create
from tests.support.checks import dead_letters, pending, projections_behind
from tests.support.topology import sync_client_for
from tests.support.watch import Watched, lost_events, spectate

pytestmark = pytest.mark.chaos

API = "/api/v1"
QUICK = Rules.make("straight", players=2, target=30)

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_payload = st.one_of(
    st.binary(max_size=64),
    _json.map(lambda v: json.dumps(v).encode()),
    st.just(b"x" * 200_000),  # huge
    st.just(b""),
)
_field = st.sampled_from([b"__data__", b"data", b"type", b"match", b"version", b"id"]) | st.binary(
    min_size=1, max_size=6
)
ENTRY = st.dictionaries(_field, _payload, min_size=1, max_size=4)
"""A stream entry no process of the service wrote: any fields, any values."""

EXAMPLES = hypothesis.settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)


def _keys(planted: Planted) -> Keys:
    return Keys(planted.settings.prefix, planted.settings.partitions)


def _plant(
    planted: Planted, entries: list[tuple[str, dict[bytes, bytes]]]
) -> list[tuple[str, str]]:
    """XADD each entry to its stream; the (stream, id) of each."""
    with sync_client_for(planted.redis_url) as redis:
        return [(stream, redis.xadd(stream, fields).decode()) for stream, fields in entries]


def _eventually(what: str, ok: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _parked(planted: Planted, ids: list[tuple[str, str]]) -> Callable[[], bool]:
    """Whether every planted entry is on the dead-letter stream, with a reason of its own —
    not for having been delivered too often — and nothing else is there."""

    def check() -> bool:
        with sync_client_for(planted.redis_url) as redis:
            rows = redis.xrange(_keys(planted).dead_letters)
        parked = {(f[b"stream"].decode(), f[b"id"].decode()): f[b"reason"] for _, f in rows}
        if not set(ids) <= set(parked):
            return False
        assert all(not parked[i].startswith(b"delivered") for i in ids), parked
        assert set(parked) <= _PLANTED | set(ids), f"parked, not planted: {parked}"
        _PLANTED.update(ids)
        return True

    return check


_PLANTED: set[tuple[str, str]] = set()
"""Every entry this module's tests planted (the stack is the module's)."""


def _play_one(planted: Planted) -> str:
    """A house match across the partitions the entries were planted in, to its end."""
    [match_id] = create(planted.redis_url, planted.settings, [(QUICK, ["greedy", "random"])])
    wait_until_over(planted.redis_url, planted.settings, [match_id], timeout=90)
    return match_id


def _caught_up(planted: Planted, what: str) -> None:
    """Wait until every projection of every partition is at its log's last entry."""
    url, settings = planted.redis_url, planted.settings
    _eventually(
        what,
        lambda: not asyncio.run(projections_behind(url, settings.prefix, settings.partitions)),
    )


def _settled(planted: Planted) -> None:
    """Nothing pending in any group, and every process still running."""
    url, prefix = planted.redis_url, planted.settings.prefix
    _eventually(
        "entries were left pending", lambda: not asyncio.run(pending(url, prefix)), timeout=30
    )
    assert not planted.stack.check(), f"processes exited: {planted.stack.check()}"


@EXAMPLES
@hypothesis.given(
    st.lists(
        st.tuples(
            st.integers(0, 3), ENTRY.filter(lambda f: b"reply_to" not in b"".join(f.values()))
        ),
        min_size=3,
        max_size=10,
    )
)
def test_garbage_on_the_command_streams_is_parked_with_a_reason_and_play_goes_on(
    planted: Planted, entries: list[tuple[int, dict[bytes, bytes]]]
) -> None:
    """An entry of a partition's command stream that names no reply stream to answer (no
    ``__data__``, not JSON, a wrong type, a missing field, 200 kB): the referee parks it on
    the dead-letter stream with why, and the partition's matches play on."""
    keys = _keys(planted)
    ids = _plant(planted, [(keys.commands(p), fields) for p, fields in entries])
    _play_one(planted)
    _eventually("a planted command was not parked", _parked(planted, ids))
    _settled(planted)


def _a_turn(planted: Planted, pool: str) -> tuple[str, dict[str, Any]]:
    """A real turn message of ``pool`` (its stream and its JSON), from a match played now."""
    match_id = _play_one(planted)
    keys = _keys(planted)
    stream = keys.turns(keys.partition_of(match_id), pool)
    with sync_client_for(planted.redis_url) as redis:
        _, fields = redis.xrevrange(stream, "+", "-", count=1)[0]
    return stream, json.loads(fields[b"__data__"])


@EXAMPLES
@hypothesis.given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["greedy", "random"]), ENTRY),
        min_size=3,
        max_size=10,
    )
)
def test_garbage_on_the_turns_streams_is_parked_with_a_reason_and_the_bots_play_on(
    planted: Planted, entries: list[tuple[int, str, dict[bytes, bytes]]]
) -> None:
    """An entry of a pool's turns stream that is no turn: the pool's workers park it with
    why, and answer every other turn of the batch."""
    keys = _keys(planted)
    ids = _plant(planted, [(keys.turns(p, pool), fields) for p, pool, fields in entries])
    _play_one(planted)
    _eventually("a planted turn was not parked", _parked(planted, ids))
    _settled(planted)


def test_turns_that_look_real_but_cannot_be_answered_are_parked_and_the_bots_play_on(
    planted: Planted,
) -> None:
    """Handmade from a real turn: no legal move, a match id no store accepts, a view cut
    short, the seat a string. Each one used to fail the whole batch it came in (its other
    turns unanswered, delivered again and again, then parked with it)."""
    stream, turn = _a_turn(planted, "greedy")
    bad = [
        {**turn, "view": {**turn["view"], "legal": []}},
        {**turn, "match_id": "no{such}match"},
        {**turn, "seat": "zero"},
    ]
    payloads = [json.dumps(t).encode() for t in bad] + [json.dumps(turn).encode()[:-40]]
    ids = _plant(planted, [(stream, {b"__data__": p}) for p in payloads])
    _play_one(planted)
    _eventually("a planted turn was not parked", _parked(planted, ids))
    _settled(planted)


@EXAMPLES
@hypothesis.given(st.lists(st.tuples(st.integers(0, 3), ENTRY), min_size=3, max_size=10))
def test_garbage_in_the_notification_log_is_passed_over_by_the_projector_and_the_gateway(
    planted: Planted, entries: list[tuple[int, dict[bytes, bytes]]]
) -> None:
    """Entries of a partition's notification log that the append script never wrote: the
    projector passes over each (saying so) and its projections go on to the log's end; the
    gateway goes on following the logs, so a match watched through it is shown to its end,
    every event as its log holds it."""
    keys = _keys(planted)
    [match_id] = create(planted.redis_url, planted.settings, [(QUICK, ["greedy", "random"])])
    watched = Watched(match_id)

    async def watch() -> None:
        stop = asyncio.Event()
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=30.0)) as http:
            await asyncio.wait_for(spectate(http, planted.gateway, watched, stop), 90)

    forged = [
        {b"match": match_id.encode(), b"version": b"1", b"type": b"tile_played", **fields}
        for _, fields in entries[:2]
    ]
    planted_ids = _plant(planted, [(keys.log(p), fields) for p, fields in entries])
    planted_ids += _plant(planted, [(keys.log(keys.partition_of(match_id)), f) for f in forged])
    asyncio.run(watch())
    log = asyncio.run(read_log(planted.redis_url, planted.settings, match_id))
    assert watched.over and not lost_events(log, watched.seen)
    _caught_up(planted, "the projections stopped at a planted entry")
    listed = httpx.get(f"{planted.gateway}{API}/matches", params={"status": "finished"})
    assert listed.status_code == 200
    assert match_id in [m["match_id"] for m in listed.json()["matches"]]
    _settled(planted)


def test_a_corrupt_summary_is_left_out_of_the_lists_and_a_corrupt_match_log_is_a_typed_error(
    planted: Planted,
) -> None:
    """The projections' data and a match log are read by the gateway: a summary that does
    not decode is left out of the lists (the others are listed), and a match whose log has an
    unreadable entry is answered with a typed error — never a 500."""
    keys = _keys(planted)
    match_id = _play_one(planted)
    _caught_up(planted, "the projector never showed the match finished")
    p = keys.partition_of(match_id)
    summaries = f"{keys.projection('summary', p)}:matches"
    finished = f"{keys.projection('summary', p)}:finished"
    with sync_client_for(planted.redis_url) as redis:
        redis.hset(summaries, "m-garbage", b'{"match_id": 3, "status":')
        redis.zadd(finished, {"m-garbage": time.time() + 10})
        version = redis.xlen(keys.match(match_id))
        redis.xadd(
            keys.match(match_id),
            {b"type": b"tile_played", b"__data__": b"{cut"},
            id=f"0-{version + 1}",
        )
    listed = httpx.get(f"{planted.gateway}{API}/matches", params={"status": "finished"})
    assert listed.status_code == 200, listed.text
    assert match_id in [m["match_id"] for m in listed.json()["matches"]]
    replay = httpx.get(f"{planted.gateway}{API}/matches/{match_id}/replay", timeout=10)
    assert (replay.status_code, replay.json()["error"]) == (409, "corrupt_data"), replay.text
    for path in (f"/matches/{match_id}", "/matches/m-garbage"):
        r = httpx.get(f"{planted.gateway}{API}{path}", timeout=10)
        assert r.status_code in (200, 404), (path, r.status_code, r.text)
    with httpx.stream("GET", f"{planted.gateway}{API}/matches/{match_id}/stream", timeout=10) as r:
        assert r.status_code != 500
    assert "request failed" not in planted.log_text("gateway")
    dead = asyncio.run(dead_letters(planted.redis_url, planted.settings.prefix))
    assert all(d["reason"] for d in dead)


def test_a_corrupt_lobby_record_is_a_typed_error_and_is_left_out_of_the_lobby(
    planted: Planted,
) -> None:
    """A lobby record (``{pN}:seat:<match>``) with fields missing or of the wrong type: the
    match is answered 409 ``corrupt_data``, a join a typed error (never a 500), and the lobby
    lists the others."""
    keys = _keys(planted)
    good = httpx.post(f"{planted.gateway}{API}/matches", json={"seats": [None, "greedy"]})
    assert good.status_code == 201, good.text
    good_id = good.json()["match"]["match_id"]
    records = {
        "m-nopools": {"status": "open", "rules": "{}"},
        "m-badpools": {"pools": "[1, 2", "rules": "{}", "status": "open", "created": "1"},
        "m-badtime": {"pools": '["greedy", null]', "rules": "{}", "status": "open",
                      "created": "soon", "deadline_ms": "x"},
    }  # fmt: skip
    with sync_client_for(planted.redis_url) as redis:
        for match_id, fields in records.items():
            tag = keys.tag(keys.partition_of(match_id))
            redis.hset(f"{keys.prefix}:{tag}:seat:{match_id}", mapping=fields)
            redis.zadd(f"{keys.prefix}:{tag}:lobby", {match_id: 0})
    for match_id in records:
        r = httpx.get(f"{planted.gateway}{API}/matches/{match_id}")
        assert (r.status_code, r.json()["error"]) == (409, "corrupt_data"), r.text
        # the join's script reads the record in Redis, and fails there: typed, if not precise
        r = httpx.post(f"{planted.gateway}{API}/matches/{match_id}/join", json={})
        assert r.status_code in (409, 503) and r.json()["error"], r.text
    listed = httpx.get(f"{planted.gateway}{API}/matches", params={"status": "open"})
    assert listed.status_code == 200, listed.text
    assert good_id in [m["match_id"] for m in listed.json()["matches"]]
    assert "request failed" not in planted.log_text("gateway")


def test_a_corrupt_account_feed_event_is_passed_over_and_the_account_stream_stays_open(
    planted: Planted,
) -> None:
    """Entries of an account's feed that are no event (no ``d`` field, not a JSON object): the
    account's stream passes over them, sends no broken line, and stays open — it used to end
    at once, and again at every reconnect, on the first of them."""
    keys = _keys(planted)
    r = httpx.post(f"{planted.gateway}{API}/accounts", json={"name": "Planted"})
    assert r.status_code == 201, r.text
    account, token = r.json()["account"]["id"], r.json()["token"]
    with sync_client_for(planted.redis_url) as redis:
        feed = keys.account_feed(account)
        redis.xadd(feed, {b"x": b"no d"}, id="0-5")
        redis.xadd(feed, {b"d": b"[1, 2]"}, id="0-6")
        redis.xadd(feed, {b"d": b"{cut"}, id="0-7")
    lines: list[bytes] = []
    url = f"{planted.gateway}{API}/account/stream"
    auth = {"authorization": f"Bearer {token}"}
    timeout = httpx.Timeout(10, read=3)
    with (
        pytest.raises(httpx.ReadTimeout),  # still open, with nothing to say
        httpx.stream("GET", url, params={"after": "0"}, headers=auth, timeout=timeout) as response,
    ):
        assert response.status_code == 200
        lines += [line.encode() for line in response.iter_lines() if line.strip()]
    assert all(isinstance(json.loads(line), dict) for line in lines), lines
    assert "request failed" not in planted.log_text("gateway")
