"""The account channel resumes exactly (docs/protocol.md, "The account channel"): a client that
cuts its connection at many points — after every k-th frame, mid-match, between a match's
``match_ended`` and its ``match_finished``, while a challenge arrives, while a match starts
and ends — and opens it again with the last cursor it read has read, in all, what one uncut
connection reads: the account's lines once each, and each seat's events 1..n once each, in
order, its match's log as it sees it. On the account socket, and on the account stream with
``play=1`` as NDJSON (``cursor=``) and as SSE (Last-Event-ID)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest

from services.gateway.protocol import API
from tests.gateway.account_channel import (
    Cut,
    Frame,
    Reader,
    check_exact,
    socket_session,
    stream_session,
)
from tests.gateway.conftest import Gateways, wait_for_version
from tests.gateway.test_account_socket import challenge_house
from tests.gateway.test_accounts import auth, register, unique

pytestmark = [pytest.mark.service, pytest.mark.both_topologies]

Session = Callable[[str, str, Reader, Cut, Callable[[Reader], bool]], Awaitable[None]]


def _transport(kind: str) -> Session:
    """The client's connection: the account socket, or the account stream (NDJSON, SSE)."""
    if kind == "socket":
        return socket_session

    async def session(
        url: str, token: str, reader: Reader, cut: Cut, done: Callable[[Reader], bool]
    ) -> None:
        await stream_session(url, token, reader, cut, done, sse=kind == "sse")

    return session


def _resign(url: str, token: str, match_id: str) -> None:
    r = httpx.post(
        f"{url}{API}/matches/{match_id}/seats/0/moves",
        json={"type": "resign"},
        headers={**auth(token), "Idempotency-Key": "resign"},
        timeout=30,
    )
    # on a loaded machine the match may have ended meanwhile (its seats timed out): as good
    assert r.status_code == 200 or r.json().get("reason") == "match_over", r.text


def _gateway_said(g: Gateways, name: str) -> list[str]:
    """The warnings and errors a gateway of the stack logged (its last 20), for a failure."""
    if g.stack.log_dir is None or not (g.stack.log_dir / f"{name}.log").exists():
        return []
    lines = (g.stack.log_dir / f"{name}.log").read_text(errors="replace").splitlines()
    said = [line for line in lines if "warn" in line.lower() or "error" in line.lower()]
    return [line[:400] for line in said[-20:]]


def _match_ended(frame: Frame) -> bool:
    return frame["type"] == "line" and frame["line"].get("event", {}).get("type") == "match_ended"


@pytest.mark.parametrize(
    ("kind", "every"), [("socket", 2), ("socket", 5), ("ndjson", 3), ("sse", 4)]
)
def test_a_client_cut_again_and_again_reads_every_frame_once_as_an_uncut_one_does(
    gateways: Gateways, kind: str, every: int
) -> None:
    """Cut after every ``every``-th frame and after each match_ended; while away, a match
    against the house starts, a challenge arrives, and a match starts and ends (resigned).
    What the cut client read equals what an uncut socket read meanwhile, and the truth."""
    g = gateways
    _, token = register(g.url, unique("cut"))
    other_name = unique("rival")
    _, other = register(g.url, other_name)
    me = httpx.get(f"{g.url}{API}/account", headers=auth(token), timeout=10).json()["account"]
    session = _transport(kind)
    reader, uncut = Reader(), Reader()
    whole: dict[str, str] = {}  # match -> how it came

    def cut(r: Reader, frame: Frame, n: int) -> bool:
        state = frame["type"] == "account" and frame["line"]["type"] == "state"
        return n % every == 0 or _match_ended(frame) or state

    def finished(r: Reader) -> set[str]:
        return {line["match_id"] for line in r.account_lines() if line["type"] == "match_finished"}

    def done(r: Reader) -> bool:
        challenged = any(line["type"] == "challenge" for line in r.account_lines())
        over = r.ended() >= set(whole) and finished(r) >= set(whole)
        return len(whole) == 2 and challenged and over

    def idle(r: Reader) -> bool:
        """Nothing more comes until the next thing happens while away: the matches so far
        are over and told (a played match can end before the cuts reach the fifth connection)."""
        return 0 < len(whole) < 2 and r.ended() >= set(whole) and finished(r) >= set(whole)

    def done_or_idle(r: Reader) -> bool:
        return done(r) or idle(r)

    async def away(step: int) -> None:
        """What happens while the cut client is away, by how many times it has connected."""
        if step == 1:
            whole[await asyncio.to_thread(challenge_house, g.url, token)] = "played"
        elif step == 3:
            r = await asyncio.to_thread(
                httpx.post,
                f"{g.url}{API}/challenges",
                json={"opponents": [me["name"]]},
                headers=auth(other),
                timeout=30,
            )
            assert r.status_code == 201, r.text
        elif step >= 5 and len(whole) < 2:
            quick = await asyncio.to_thread(challenge_house, g.url, token)
            await asyncio.to_thread(wait_for_version, g, quick, 2)
            await asyncio.to_thread(_resign, g.url, token, quick)
            await asyncio.to_thread(wait_for_version, g, quick, 3)
            whole[quick] = "started and ended while away"

    async def watch() -> None:
        await socket_session(g.url, token, uncut, lambda r, f, n: False, done)

    async def run() -> None:
        watcher = asyncio.create_task(watch())
        while not done(reader):
            await session(g.url, token, reader, cut, done_or_idle)
            await away(reader.connections)
            assert reader.connections < 2000
        await asyncio.wait_for(watcher, 60)

    try:
        asyncio.run(asyncio.wait_for(run(), 240))
    except TimeoutError:  # say what never came, for each reader
        missing = {
            name: {
                "connections": r.connections,
                "cursor": r.cursor,
                "challenged": any(line["type"] == "challenge" for line in r.account_lines()),
                "not_ended": sorted(set(whole) - r.ended()),
                "not_finished": sorted(set(whole) - finished(r)),
                "stalls": r.stalls,
            }
            for name, r in (("cut", reader), ("uncut", uncut))
        }
        said = _gateway_said(g, "gateway")
        raise AssertionError(f"not done in 240 s: {whole} {missing}; {said}") from None
    assert reader.connections > 5
    check_exact(g, token, reader, set(whole))
    check_exact(g, token, uncut, set(whole))
    assert reader.account_lines() == uncut.account_lines()
    mine, theirs = reader.seat_lines(), uncut.seat_lines()
    assert set(mine) == set(theirs) == {(m, 0) for m in whole}
    for key in mine:
        events = [line for line in mine[key] if line["type"] == "event"]
        assert events == [line for line in theirs[key] if line["type"] == "event"]
        assert [e["id"] for e in events] == list(range(1, len(g.log(key[0])) + 1))
        assert events[-1]["event"]["type"] == "match_ended"


def test_a_fresh_channel_snapshots_the_live_seats_and_a_cut_after_its_state_resumes_them_whole(
    gateways: Gateways,
) -> None:
    """A match live when the channel opens fresh: the state frame names it in its cursor at
    version 0, then its seat's snapshot, under a cursor at the snapshot's version. A client
    cut right after that state frame resumes with its cursor and gets the
    match from its first event, each once, to its end."""
    g = gateways
    _, token = register(g.url, unique("live"))
    match_id = challenge_house(g.url, token)
    wait_for_version(g, match_id, 2)
    fresh, cut = Reader(), Reader()

    def state_only(r: Reader, frame: Frame, n: int) -> bool:
        return r.connections == 1  # the first connection ends after its first frame

    async def run() -> None:
        await socket_session(g.url, token, fresh, lambda r, f, n: n == 2, lambda r: False)
        while match_id not in cut.ended():
            await socket_session(g.url, token, cut, state_only, lambda r: match_id in r.ended())

    asyncio.run(asyncio.wait_for(run(), 90))
    state = fresh.frames[0]
    assert state["line"]["type"] == "state" and state["line"]["live"] == [match_id]
    assert state["cursor"] == f"{state['line']['id']},{match_id}:0:0"
    snapshot = fresh.frames[1]
    assert (snapshot["type"], snapshot["line"]["type"]) == ("line", "snapshot")
    assert snapshot["cursor"] == f"{state['line']['id']},{match_id}:0:{snapshot['line']['id']}"
    assert cut.frames[0]["cursor"] == state["cursor"]
    lines = cut.seat_lines()[(match_id, 0)]
    assert lines[0]["type"] == "event" and lines[0]["id"] == 1  # no snapshot: from event 1
    check_exact(g, token, cut, {match_id})
    events = [line for line in lines if line["type"] == "event"]
    assert [e["id"] for e in events] == list(range(1, len(g.log(match_id)) + 1))
