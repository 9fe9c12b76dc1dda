"""Storage: a finished match moved to the archive reads through the gateway exactly as it did
from Redis — GET /matches/{id}, its replay as everyone and as a seat, its spectator and seat
streams from the first event (a seat's with its token or its account's) — and the page that
replays it is served as before."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from services.cli.supervisor import Stack
from services.config import Settings
from services.store.keys import Keys
from tests.gateway.conftest import (
    PLAY_LIMITS,
    Gateways,
    _environ,
    create,
    free_port,
    join,
    wait_healthy,
)
from tests.support.topology import client_for


@pytest.fixture(scope="module")
def archiving(redis_url: str) -> Iterator[Gateways]:
    """A stack of its own whose finished matches are archived two seconds after they end."""
    with tempfile.TemporaryDirectory(prefix="domino-archive-") as archive:
        settings = Settings(
            redis_url=redis_url,
            prefix=f"a{uuid.uuid4().hex[:10]}",
            partitions=4,
            claim_idle_ms=600,
            log_level="warning",
            archive=archive,
            archive_after_s=4.0,
            dedupe_keep_s=3.0,
            log_keep_s=0.5,
            trim_every_s=0.3,
        )
        with Stack(redis_url, settings, pools={"random": 1, "greedy": 1}) as stack:
            g = Gateways(stack, settings, redis_url, "", "")
            port = free_port()
            with _environ(PLAY_LIMITS):
                stack.spawn("gateway", "gateway", "--host", "127.0.0.1", "--port", str(port))
            g.url = f"http://127.0.0.1:{port}"
            wait_healthy(g.url, stack.processes["gateway"], timeout=120)  # a loaded machine
            yield g


def reads(g: Gateways, match_id: str, token: str) -> dict[str, object]:
    """Everything the gateway answers about a finished match."""
    api = f"{g.url}/api/v1/matches/{match_id}"
    seat = {"authorization": f"Bearer {token}"}
    with httpx.Client(timeout=20) as http:
        out: dict[str, object] = {
            "match": http.get(api).json(),
            "replay": http.get(f"{api}/replay").json(),
            "replay as seat 1": http.get(f"{api}/replay?seat=1").json(),
            "spectator stream": http.get(f"{api}/stream?after=0").text,
            "seat stream": http.get(f"{api}/seats/1/stream?after=0", headers=seat).text,
            "fresh seat stream": http.get(f"{api}/seats/1/stream", headers=seat).text,
            "page": http.get(f"{g.url}/replay/{match_id}").status_code,
        }
    return out


def test_an_archived_match_reads_through_the_gateway_as_it_did_from_redis(
    archiving: Gateways,
) -> None:
    g = archiving
    match_id = create(g.url, ["greedy", None], rules={"players": 2, "target": 50})
    seat, token = join(g.url, match_id)
    assert seat == 1

    def resign() -> httpx.Response:
        return httpx.post(
            f"{g.url}/api/v1/matches/{match_id}/seats/1/moves",
            json={"type": "resign"},
            headers={"authorization": f"Bearer {token}", "idempotency-key": "bye"},
            timeout=10,
        )

    first = resign()
    assert first.status_code == 200, first.text
    again = resign()  # a late retry of the last move, within DOMINO_DEDUPE_KEEP_S
    assert again.status_code == 200 and again.json()["replayed"], again.text
    assert again.json()["version"] == first.json()["version"]
    live = reads(g, match_id, token)
    keys = Keys(g.settings.prefix, g.settings.partitions)

    async def in_redis() -> int:
        redis = client_for(g.redis_url)
        try:
            return int(
                await redis.exists(
                    keys.match(match_id),
                    keys.lobby_match(match_id),
                    keys.inflight(match_id, "gw:1:bye"),  # expires on its own (its PX)
                )
            )
        finally:
            await redis.aclose()

    deadline = time.monotonic() + 60
    while asyncio.run(in_redis()):
        assert time.monotonic() < deadline, "the match was not archived"
        time.sleep(0.2)
    archived = reads(g, match_id, token)
    for what, answer in live.items():
        assert archived[what] == answer, what
    late = resign()  # long after: the match is over, and says so
    assert late.status_code == 409 and late.json()["reason"] == "match_over", late.text
    assert live["match"]["status"] == "started"  # type: ignore[index]
    assert '"match_ended"' in str(live["spectator stream"])
