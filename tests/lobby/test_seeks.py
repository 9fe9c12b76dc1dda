"""The seek queue: grouping by rating with a widening window, house fill, and the queue in
Redis (one seek per account and kind, groups taken out whole)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from services.lobby.accounts import Accounts
from services.lobby.seeks import (
    Group,
    Kind,
    Matchmaker,
    Seek,
    SeekError,
    Seeks,
    Window,
    form_groups,
)
from services.projections.accounts import AccountFeeds
from services.store.keys import Keys
from tests.support.topology import client_for

pytestmark = pytest.mark.both_topologies  # the queue's scripts span several keys


def seek(n: int, rating: float, since: float) -> Seek:
    return Seek(
        id=f"s-{n}", kind="express-2p", account=f"u-{n}", name=f"b{n}", rating=rating,
        since=since, expires=since + 600,
    )  # fmt: skip


W = Window(base=5.0, per_s=1.0)


@pytest.mark.behaviour
def test_close_ratings_pair_at_once_far_ones_wait() -> None:
    seeks = [seek(1, 10, 100), seek(2, 12, 100), seek(3, 40, 100)]
    groups = form_groups(seeks, 2, 100, W, fill_after_s=None)
    assert [[s.id for s in g.seeks] for g in groups] == [["s-1", "s-2"]]


@pytest.mark.behaviour
def test_the_window_widens_with_waiting() -> None:
    seeks = [seek(1, 10, 100), seek(2, 30, 100)]
    assert form_groups(seeks, 2, 110, W, None) == []  # 20 apart, windows 15
    assert len(form_groups(seeks, 2, 116, W, None)) == 1  # windows 21


@pytest.mark.behaviour
def test_the_longest_waiting_is_served_first_with_its_nearest() -> None:
    seeks = [seek(1, 20, 100), seek(2, 21, 105), seek(3, 19.5, 90), seek(4, 50, 80)]
    groups = form_groups(seeks, 2, 106, W, None)
    assert [[s.id for s in g.seeks] for g in groups] == [["s-3", "s-1"]]


@pytest.mark.behaviour
def test_house_bots_fill_after_the_wait() -> None:
    seeks = [seek(1, 0, 100), seek(2, 100, 100)]
    assert form_groups(seeks, 4, 110, W, fill_after_s=30) == []
    groups = form_groups(seeks, 4, 131, W, fill_after_s=30)
    assert groups == [Group((seeks[0],), 3), Group((seeks[1],), 3)]


@pytest.mark.behaviour
def test_a_seek_house_bots_may_not_fill_waits_and_the_others_are_filled_without_it() -> None:
    seeks = [seek(1, 0, 90), seek(2, 2, 100), seek(3, 3, 100)]
    groups = form_groups(seeks, 4, 131, W, fill_after_s=30, unfilled={"s-1"})
    assert groups == [Group((seeks[1], seeks[2]), 2)]  # s-1 waited longest, yet waits on
    full = form_groups([*seeks, seek(4, 1, 100)], 4, 131, W, fill_after_s=30, unfilled={"s-1"})
    assert [len(g.seeks) for g in full] == [4]  # with other accounts it plays at once


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = client_for(redis_url)
    yield client
    await client.aclose()


@pytest.mark.behaviour
@pytest.mark.anyio
async def test_queue_pairs_once_and_withdraws(redis: Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix, 4)
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    queue = Seeks(redis, keys, feeds, ttl_s=600)
    a, _ = await accounts.register("ann")
    b, _ = await accounts.register("bob")
    c, _ = await accounts.register("cyd")
    first, new = await queue.add(a, "express-2p", 0.0)
    again, new_again = await queue.add(a, "express-2p", 0.0)
    assert new and not new_again and again.id == first.id  # one seek per account and kind
    with pytest.raises(SeekError):
        await queue.add(a, "express-9p", 0.0)
    await queue.add(c, "straight-2p", 0.0)
    await queue.withdraw(c, (await queue.mine(c))[0].id)
    assert await queue.mine(c) == []
    await queue.add(b, "express-2p", 1.0)
    started: list[tuple[Kind, Group]] = []

    async def start(kind: Kind, group: Group) -> str | None:
        started.append((kind, group))
        return "m-1"

    maker = Matchmaker(queue, start, "test", window=W, fill_after_s=None)
    assert await maker.tick(first.since + 1) == 1
    assert await maker.tick(first.since + 2) == 0  # taken out: never paired twice
    ((kind, group),) = started
    assert kind.name == "express-2p" and {s.account for s in group.seeks} == {a.id, b.id}
    assert await queue.waiting("express-2p") == []


@pytest.mark.behaviour
@pytest.mark.anyio
async def test_a_match_that_cannot_start_puts_the_seeks_back(redis: Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix, 4)
    accounts = Accounts(redis, keys)
    queue = Seeks(redis, keys, AccountFeeds(redis, keys), ttl_s=600)
    a, _ = await accounts.register("ann")
    b, _ = await accounts.register("bob")
    s1, _ = await queue.add(a, "express-2p", 0.0)
    await queue.add(b, "express-2p", 0.0)

    async def fail(kind: Kind, group: Group) -> str | None:
        return None

    assert await Matchmaker(queue, fail, "t", window=W).tick(s1.since + 1) == 0
    assert len(await queue.waiting("express-2p")) == 2


@pytest.mark.behaviour
@pytest.mark.anyio
async def test_expired_seeks_leave_and_say_so(redis: Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix, 4)
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    queue = Seeks(redis, keys, feeds, ttl_s=5)
    a, _ = await accounts.register("ann")
    s1, _ = await queue.add(a, "express-3p", 0.0)

    async def never(kind: Kind, group: Group) -> str | None:
        raise AssertionError("nothing to start")

    await Matchmaker(queue, never, "t", window=W, fill_after_s=None).tick(s1.since + 6)
    assert await queue.waiting("express-3p") == []
    assert b'"type":"seek_expired"' in (await feeds.read(a.id, 0))[-1][1]


@pytest.mark.behaviour
@pytest.mark.anyio
async def test_an_account_waits_for_at_most_the_kinds_it_is_allowed(
    redis: Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix, 4)
    queue = Seeks(redis, keys, AccountFeeds(redis, keys), ttl_s=600)
    a, _ = await Accounts(redis, keys).register("ann")
    first, _ = await queue.add(a, "express-2p", 0.0, client="127.0.0.9", most=2)
    await queue.add(a, "straight-2p", 0.0, most=2)
    again, new = await queue.add(a, "express-2p", 0.0, most=2)
    assert again.id == first.id and not new and again.client == "127.0.0.9"
    with pytest.raises(SeekError) as e:
        await queue.add(a, "express-3p", 0.0, most=2)
    assert (e.value.status, e.value.code) == (429, "seeks_per_account")
    assert "client" not in first.public()  # the address is the gateway's, not shown
    await queue.withdraw(a, first.id)
    await queue.add(a, "express-3p", 0.0, most=2)
    await queue.put_back([first])  # a match that could not start: back, whatever the limit
    assert len(await queue.mine(a)) == 3


@pytest.mark.behaviour
@pytest.mark.anyio
async def test_the_matchmaker_leaves_a_seek_unfilled_while_it_may_not_have_house_bots(
    redis: Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix, 4)
    accounts = Accounts(redis, keys)
    queue = Seeks(redis, keys, AccountFeeds(redis, keys), ttl_s=600)
    a, _ = await accounts.register("ann")
    b, _ = await accounts.register("bob")
    s1, _ = await queue.add(a, "express-3p", 0.0)
    await queue.add(b, "express-3p", 0.0)
    started: list[Group] = []
    allowed = {b.id}

    async def start(kind: Kind, group: Group) -> str | None:
        started.append(group)
        return f"m-{len(started)}"

    async def may_fill(s: Seek) -> bool:
        return s.account in allowed

    maker = Matchmaker(queue, start, "t", window=W, fill_after_s=30, may_fill=may_fill)
    assert await maker.tick(s1.since + 31) == 1
    assert [[s.account for s in g.seeks] for g in started] == [[b.id]]  # ann's seek waits
    assert [s.account for s in await queue.waiting("express-3p")] == [a.id]
    allowed.add(a.id)
    assert await maker.tick(s1.since + 32) == 1
    assert [s.account for s in started[-1].seeks] == [a.id]
