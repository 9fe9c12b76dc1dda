"""The SDK resumes across a gap: an account stream resumed from before what the feed still
keeps yields an AccountGap, then the AccountState to start again from, then what comes next;
a seat's stream whose log is gone yields a Gap, then the snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

import pytest
from domino_sdk import (
    AccountClient,
    AccountGap,
    AccountState,
    Gap,
    SeatClient,
    Snapshot,
    decode_line,
)
from domino_sdk.lobby import UnknownAccountEvent
from domino_sdk.protocol import ResignBody

from services.projections.accounts import AccountFeeds
from services.store.keys import Keys
from tests.gateway.conftest import Gateways, create, join
from tests.gateway.test_accounts import register, unique
from tests.gateway.test_resume_gaps import flood_account, oldest
from tests.support.topology import client_for

pytestmark = [pytest.mark.service]

T = TypeVar("T")


async def take(lines: AsyncIterator[T], n: int) -> list[T]:
    """The next ``n`` items, within a time limit."""

    async def go() -> list[T]:
        return [await anext(lines) for _ in range(n)]

    return await asyncio.wait_for(go(), 20)


def test_a_gap_line_decodes_as_a_gap() -> None:
    line = decode_line(b'{"type":"gap","id":4,"after":1,"oldest":5}')
    assert line == Gap(id=4, after=1, oldest=5)


def test_the_account_stream_resumed_past_a_trimmed_feed_yields_the_gap_then_resyncs(
    gateways: Gateways,
) -> None:
    g = gateways
    account_id, token = register(g.url, unique("sdkgap"))
    feed, last = flood_account(g, account_id)
    held = oldest(g, feed)
    assert held > 1

    async def follow() -> None:
        client = AccountClient(g.url, token)
        events = client.events(after=0)
        try:
            gap, state = await take(events, 2)
            assert gap == AccountGap(id=held - 1, after=0, oldest=held)
            assert isinstance(state, AccountState) and state.id == last
            redis = client_for(g.redis_url)
            try:  # and what comes next arrives, after the state's id
                feeds = AccountFeeds(redis, Keys(g.settings.prefix, g.settings.partitions))
                await feeds.append(account_id, "flood", {"n": -1})
            finally:
                await redis.aclose()
            (after,) = await take(events, 1)
            assert isinstance(after, UnknownAccountEvent) and after.id == last + 1
        finally:
            await events.aclose()
            await client.aclose()

    asyncio.run(follow())


def test_a_seat_stream_resumed_when_its_log_is_gone_yields_the_gap_then_the_snapshot(
    gateways: Gateways,
) -> None:
    g = gateways
    match_id = create(g.url, ["random", None], rules={"players": 2, "target": 50})
    seat, token = join(g.url, match_id)

    async def play() -> None:
        client = SeatClient(g.url, token)
        try:
            await client.whoami()
            await client.move(ResignBody(), key="bye")
            (over,) = [line async for line in client.lines()]  # followed by the gateway now
            assert isinstance(over, Snapshot) and over.view and over.view.phase == "over"
            redis = client_for(g.redis_url)
            try:
                keys = Keys(g.settings.prefix, g.settings.partitions)
                await redis.delete(keys.match(match_id))
            finally:
                await redis.aclose()
            lines = [line async for line in client.lines(after=1)]
            assert lines[0] == Gap(id=over.id, after=1, oldest=over.id + 1)
            assert isinstance(lines[1], Snapshot) and lines[1].id == over.id
            assert len(lines) == 2 and client.last_id == over.id
        finally:
            await client.aclose()

    assert seat == 1
    asyncio.run(play())
