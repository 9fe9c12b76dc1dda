"""Accounts, names, feeds and challenges against a real Redis (the lobby layer, no HTTP)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from engine.rules import Rules
from services.lobby.accounts import AccountError, Accounts
from services.lobby.accounts import new_token as account_token
from services.lobby.challenges import ChallengeError, Challenges
from services.lobby.names import BadName, check_name, skeleton
from services.lobby.tables import new_token as seat_token
from services.projections.accounts import MARK_S, AccountFeeds
from services.store.keys import Keys
from tests.support.topology import client_for

pytestmark = [pytest.mark.behaviour, pytest.mark.anyio, pytest.mark.both_topologies]


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = client_for(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def keys(key_prefix: str) -> Keys:
    return Keys(key_prefix, 4)


@pytest.mark.parametrize(
    "name", ["a", "x" * 21, "-lead", "bad name", "tab\tname", "[/]", "<b>", "zero\u200bwidth",
             "ｇｒｅｅｄｙ", "émile", "bell\x07"]
)  # fmt: skip
def test_names_are_a_safe_set_of_characters(name: str) -> None:
    with pytest.raises(BadName) as e:
        check_name(name)
    assert e.value.code == "bad_name"


@pytest.mark.parametrize(
    "name", ["greedy", "Greedy", "gr33dy", "g-r-e-e-d-y", "RANDOM", "search", "house_7", "guest1",
             "Operator", "admin"]
)  # fmt: skip
def test_house_pools_and_look_alikes_are_reserved(name: str) -> None:
    with pytest.raises(BadName) as e:
        check_name(name)
    assert e.value.code == "reserved_name"


def test_look_alikes_share_a_skeleton() -> None:
    assert skeleton("Alice_Bot") == skeleton("a1ice-b0t") == skeleton("ALICEBOT")
    assert skeleton("modern") == skeleton("modem")
    assert skeleton("alice") != skeleton("alicia")


async def test_register_authenticate_rotate_revoke(redis: Redis, keys: Keys) -> None:
    accounts = Accounts(redis, keys)
    account, token = await accounts.register("Alice_Bot")
    assert token.startswith("dab_")
    assert (await accounts.authenticate(token)) == account
    stored = await redis.hgetall(keys.account(account.id))
    assert token.encode() not in b"".join(stored.values())  # only its hash is kept
    with pytest.raises(AccountError) as e:
        await accounts.register("a1ice-b0t")
    assert e.value.code == "name_taken"
    new = await accounts.rotate(account.id)
    assert await accounts.authenticate(token) is None
    assert (await accounts.authenticate(new)) == account
    await accounts.revoke(account.id)
    assert await accounts.authenticate(new) is None
    issued = await accounts.rotate(account.id)  # the operator issues another
    assert (await accounts.authenticate(issued)) == account
    banned = await accounts.ban(account.id)
    assert banned.banned
    found = await accounts.authenticate(issued)
    assert found is not None and found.banned
    assert await accounts.by_name("ALICE-BOT") == banned


async def test_feed_is_numbered_and_started_finished_are_written_once(
    redis: Redis, keys: Keys
) -> None:
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys, kept=50)
    account, _ = await accounts.register("feeder")
    assert await feeds.append(account.id, "hello", {}) == 1
    assert await feeds.started(account.id, "m-1", {"seats": [0]}) == 2
    assert await feeds.started(account.id, "m-1", {"seats": [0]}) == 0
    assert await feeds.live(account.id) == ["m-1"]
    assert await feeds.finished(account.id, "m-1", {}) == 3
    assert await feeds.finished(account.id, "m-1", {}) == 0
    assert await feeds.live(account.id) == []
    lines = await feeds.read(account.id, 1)
    assert [n for n, _ in lines] == [2, 3]
    assert lines[0][1].startswith(b'{"id":2,"type":"match_started"')
    assert await feeds.append("u-000000000000", "nobody", {}) == 0  # no account, no feed


async def test_a_match_that_ends_before_its_start_is_written_never_stays_live(
    redis: Redis, keys: Keys
) -> None:
    """A deal that blocks at once ends the match inside its own creation: the feeds' follower
    may tell the end before the gateway tells the start. The feed still gets both, in order,
    once, and the match never joins the live set (it would stay there for ever)."""
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    account, _ = await accounts.register("quick")

    assert await feeds.finished(account.id, "m-1", {"result": "win"}, ended_at=None) == 0
    assert await feeds.started(account.id, "m-1", {"seats": [0]}) == 1
    assert await feeds.started(account.id, "m-1", {"seats": [0]}) == 0  # sent again
    assert await feeds.finished(account.id, "m-1", {"result": "win"}) == 0  # refolded

    assert await feeds.live(account.id) == []
    lines = await feeds.read(account.id, 0)
    assert [n for n, _ in lines] == [1, 2]
    assert lines[0][1].startswith(b'{"id":1,"type":"match_started"')
    assert lines[1][1].startswith(b'{"id":2,"type":"match_finished"')
    assert b'"result":"win"' in lines[1][1]
    assert await feeds.last(account.id) == 2


async def test_an_end_told_already_or_long_past_leaves_nothing_for_a_start(
    redis: Redis, keys: Keys
) -> None:
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    account, _ = await accounts.register("steady")
    assert await feeds.started(account.id, "m-1", {}) == 1
    assert await feeds.finished(account.id, "m-1", {}) == 2

    assert await feeds.started(account.id, "m-1", {}) == 0  # a start sent again, after the end
    # An old end refolded (a rebuild of the projections) is not waited for by a start.
    assert await feeds.finished(account.id, "m-2", {}, ended_at=time.time() - 86_400) == 0
    assert await feeds.started(account.id, "m-2", {}) == 3
    assert await feeds.live(account.id) == ["m-2"]
    mark = await redis.ttl(keys.account_mark(account.id, "m-1"))
    assert 0 < mark <= MARK_S


async def test_a_challenge_starts_once_when_everyone_accepts(redis: Redis, keys: Keys) -> None:
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    challenges = Challenges(redis, keys, accounts, feeds, ttl_s=60)
    a, _ = await accounts.register("ann")
    b, _ = await accounts.register("bob")
    c, _ = await accounts.register("cyd")
    rules = Rules.make("express", players=3)
    with pytest.raises(ChallengeError) as e:
        await challenges.create(a, ["bob"], rules, 5000)
    assert e.value.code == "bad_players"  # C3: three seats need two opponents
    with pytest.raises(ChallengeError):
        await challenges.create(a, ["bob", "nobody"], rules, 5000)
    made = await challenges.create(a, ["bob", "cyd"], rules, 5000)
    received = await feeds.read(b.id, 0)
    assert b'"type":"challenge"' in received[-1][1] and made.id.encode() in received[-1][1]
    with pytest.raises(ChallengeError) as e:
        await challenges.accept(a, made.id)  # the challenger does not accept its own
    assert e.value.status == 403
    _, ready = await challenges.accept(b, made.id)
    assert not ready
    _, again = await challenges.accept(b, made.id)
    assert not again
    now, ready = await challenges.accept(c, made.id)
    assert ready and now.status == "starting"
    with pytest.raises(ChallengeError) as e:
        await challenges.decline(c, made.id)
    assert e.value.code == "challenge_closed"
    await challenges.started(made.id, "m-abc")
    got = await challenges.get(made.id)
    assert got is not None and got.status == "started" and got.match_id == "m-abc"
    assert [x.id for x in await challenges.mine(c)] == [made.id]


async def test_declined_and_cancelled_challenges_tell_the_others(redis: Redis, keys: Keys) -> None:
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    challenges = Challenges(redis, keys, accounts, feeds, ttl_s=60)
    a, _ = await accounts.register("dee")
    b, _ = await accounts.register("eve")
    rules = Rules.make("straight", players=2)
    first = await challenges.create(a, ["eve"], rules, 5000)
    with pytest.raises(ChallengeError):
        await challenges.cancel(b, first.id)  # only the challenger withdraws
    await challenges.decline(b, first.id)
    assert b'"type":"challenge_declined"' in (await feeds.read(a.id, 0))[-1][1]
    second = await challenges.create(a, ["eve"], rules, 5000)
    await challenges.cancel(a, second.id)
    assert b'"type":"challenge_cancelled"' in (await feeds.read(b.id, 0))[-1][1]
    with pytest.raises(ChallengeError) as e:
        await challenges.accept(b, second.id)
    assert e.value.code == "challenge_closed"


def test_no_token_begins_like_a_command_line_option() -> None:
    """A token beginning with '-' broke `domino bot run --token $TOKEN` (argparse took it for
    an option): seat, account and owner tokens all begin with a prefix of their own."""
    seats = {seat_token() for _ in range(2000)}
    accounts = {account_token() for _ in range(2000)}
    assert all(t.startswith("dst_") for t in seats) and len(seats) == 2000
    assert all(t.startswith("dab_") for t in accounts) and len(accounts) == 2000


async def test_an_open_challenge_stays_in_the_list_through_a_flood_of_closed_ones(
    redis: Redis, keys: Keys
) -> None:
    accounts = Accounts(redis, keys)
    feeds = AccountFeeds(redis, keys)
    challenges = Challenges(redis, keys, accounts, feeds, ttl_s=600)
    target, _ = await accounts.register("flooded")
    friend, _ = await accounts.register("friendly")
    pest, _ = await accounts.register("pest")
    rules = Rules.make("straight", players=2)
    real = await challenges.create(friend, ["flooded"], rules, 5000)
    for _ in range(250):  # more than the index keeps, each made after the real one and closed
        made = await challenges.create(pest, ["flooded"], rules, 5000)
        await challenges.cancel(pest, made.id)
    listed = await challenges.mine(target)
    assert real.id in [c.id for c in listed if c.status == "open"]
    assert len(listed) == 100  # the open one, and the latest closed ones
    assert [c.id for c in listed if c.status == "open"] == [real.id]
