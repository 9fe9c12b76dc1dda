"""The gateway reads a match an older schema wrote as the current one: its replay, as
everyone and as a seat, and its spectator stream from the first event answer exactly what
the same match written in the current schema answers (events/upcast.py; schema 0 is the
worked example). A match holding an event of a newer schema is answered with a typed error,
never misread.

These tests write matches into the log themselves, some with an event no process of this
release can read, which parks the partitions' projections (docs/store.md, "Mixed versions"):
they run on a gateway and a key prefix of their own, with no referee, bots or projector,
never on the stack the other gateway tests share."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import httpx
import msgspec
import pytest

from events.envelope import SCHEMA
from services.cli.supervisor import Stack
from services.config import Settings
from services.store import NewEvent
from services.store.redis import RedisEventStore
from tests.gateway.conftest import PLAY_LIMITS, Gateways, free_port
from tests.support import schema0
from tests.support.topology import client_for

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def alone(redis_url: str) -> Iterator[Gateways]:
    """A gateway alone on a key prefix of its own: nothing but these tests writes there."""
    settings = Settings(
        redis_url=redis_url, prefix=f"o{uuid.uuid4().hex[:10]}", partitions=4, log_level="warning"
    )
    with Stack(redis_url, settings, referees=0, pools={}, projector=False) as stack:
        g = Gateways(stack, settings, redis_url, "", "")
        g.url = g.spawn_gateway("gateway", free_port(), PLAY_LIMITS)
        yield g


async def _store(g: Gateways, match_id: str, events: list[NewEvent], version: int = 0) -> None:
    """Append ``events`` to the match's log at ``version``, as a process that wrote them."""
    client = client_for(g.redis_url)
    try:
        settings = g.settings
        store = RedisEventStore(client, partitions=settings.partitions, prefix=settings.prefix)
        await store.append(match_id, events, version, f"written-{match_id}-{version}")
    finally:
        await client.aclose()


def _answers(g: Gateways, match_id: str) -> dict[str, str]:
    api = f"{g.url}/api/v1/matches/{match_id}"
    with httpx.Client(timeout=30.0) as http:
        answers = {
            "replay": http.get(f"{api}/replay"),
            "replay as seat 1": http.get(f"{api}/replay?seat=1"),
            "spectator stream": http.get(f"{api}/stream?after=0&until=over"),
        }
    assert all(a.status_code == 200 for a in answers.values()), answers
    return {what: a.text.replace(match_id, "MATCH") for what, a in answers.items()}


def test_a_match_an_older_schema_wrote_reads_through_the_gateway_as_the_current_one(
    alone: Gateways,
) -> None:
    tag = uuid.uuid4().hex[:8]
    old, new = f"m-old-{tag}", f"m-new-{tag}"
    asyncio.run(_store(alone, old, schema0.stored(schema0.played(old))))
    asyncio.run(_store(alone, new, schema0.current(schema0.played(new))))
    assert _answers(alone, old) == _answers(alone, new)


def test_a_match_holding_a_newer_schema_is_a_typed_error_on_every_read(
    alone: Gateways,
) -> None:
    match_id = f"m-newer-{uuid.uuid4().hex[:8]}"
    log = schema0.played(match_id)
    events = [*schema0.current(log[:-1]), schema0.stored_newer(log[-1])]
    asyncio.run(_store(alone, match_id, events))
    api = f"{alone.url}/api/v1/matches/{match_id}"
    with httpx.Client(timeout=30.0) as http:
        for path in ("/replay", "/replay?seat=0"):
            answer = http.get(f"{api}{path}")
            assert answer.status_code == 503, (path, answer.text)
            assert answer.json()["error"] == "newer_schema"
            assert f"schema {SCHEMA + 1} is newer" in answer.json()["message"]
        answer = http.get(f"{api}/stream?after=0")  # refused before it starts, never misread
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"] == "unavailable"


def test_a_followed_match_that_a_newer_schema_writes_to_ends_its_streams(
    alone: Gateways,
) -> None:
    """Never a stream with an event left out: the spectator's stream ends, and opened again is
    refused while this gateway cannot read the match."""
    match_id = f"m-newer-live-{uuid.uuid4().hex[:8]}"
    log = schema0.played(match_id)
    kept = 12
    asyncio.run(_store(alone, match_id, schema0.current(log[:kept])))
    url = f"{alone.url}/api/v1/matches/{match_id}/stream?after=0"
    lines: list[dict[str, object]] = []
    give_up = time.monotonic() + 30
    with httpx.Client(timeout=httpx.Timeout(10.0, read=20.0)) as http:
        with http.stream("GET", url) as stream:
            for line in stream.iter_lines():
                assert time.monotonic() < give_up, "the stream went on past the newer event"
                if not line.strip():  # a keep-alive
                    continue
                lines.append(msgspec.json.decode(line))
                if lines[-1].get("id") == kept:
                    newer = schema0.stored_newer(log[kept])
                    asyncio.run(_store(alone, match_id, [newer], kept))
        again = http.get(url)
    assert [line["id"] for line in lines if line["type"] == "event"] == list(range(1, kept + 1))
    assert again.status_code == 503, again.text
