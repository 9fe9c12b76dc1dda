"""The SDK plays as an account, against real gateway processes: bots that challenge each other,
seek games, play two matches at once, resign on request, live through a gateway killed
mid-match and through its 429s; and ``domino bot register`` / ``domino bot run --seek`` doing
the same from the command line."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
import msgspec
import pytest
from domino_sdk import (
    AccountClient,
    AccountState,
    Bot,
    Challenge,
    ChallengeDeclined,
    MatchStarted,
    PlayTile,
    SeenAccountEvent,
    StreamClosed,
    View,
    register,
)
from domino_sdk.lobby import PlayLine
from domino_sdk.model import Move
from domino_sdk.protocol import Line, Snapshot
from domino_sdk.session import AccountSession

from engine.verify import verify
from events.model import MatchCreated, MatchEnded
from services.gateway.protocol import API
from tests.gateway.conftest import PLAY_LIMITS, Gateways, create, free_port, join

SLOW_MOVES = {**PLAY_LIMITS, "DOMINO_GATEWAY_MOVES_PER_S": "1", "DOMINO_GATEWAY_MOVE_BURST": "1"}

pytestmark = [pytest.mark.service, pytest.mark.anyio]

SHORT = {"family": "express", "players": 2, "target": 30}


def unique(stem: str) -> str:
    return f"{stem}{uuid.uuid4().hex[:8]}"


class Heaviest(Bot):
    """Plays its heaviest tile; notes, by match, each turn it answers (a bot per match, made by
    ``for_match``, sharing the notes)."""

    def __init__(self, turns: list[str] | None = None, match_id: str = "") -> None:
        self.turns: list[str] = [] if turns is None else turns
        self.match_id = match_id

    def for_match(self, match_id: str, seat: int) -> Bot:
        return Heaviest(self.turns, match_id)

    def choose(self, view: View) -> Move:
        self.turns.append(self.match_id)
        plays = [m for m in view.legal if isinstance(m, PlayTile)]
        return max(plays, key=lambda m: sum(m.tile)) if plays else view.legal[0]


async def account(url: str, stem: str) -> tuple[str, str]:
    """A new account: its name and token."""
    made = await register(url, unique(stem))
    return made.account.name, made.token


async def challenge(url: str, token: str, opponents: list[str], **rules: Any) -> Challenge:
    """Challenge the accounts named, as the account of ``token``."""
    client = AccountClient(url, token)
    try:
        return await client.challenge(opponents, rules=rules or SHORT)
    finally:
        await client.aclose()


def log_of(g: Gateways, match_id: str) -> list[Any]:
    """A finished match's events, checked against the rules."""
    events = [e.event for e in g.log(match_id)]
    assert isinstance(events[-1], MatchEnded)
    assert verify(events) is None
    return events


async def test_two_account_bots_challenge_each_other_and_finish_the_match(
    gateways: Gateways,
) -> None:
    url = gateways.url
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "alpha"), account(url, "bravo")
    )
    a_bot, b_bot = Heaviest(), Heaviest()
    b_run = asyncio.create_task(b_bot.play_account(url, b_token, games=1, accept_from=[a_name]))
    a_run = asyncio.create_task(a_bot.play_account(url, a_token, games=1))
    made = await challenge(url, a_token, [b_name])
    assert made.status == "open" and [c.name for c in made.to] == [b_name]
    a_done, b_done = await asyncio.wait_for(asyncio.gather(a_run, b_run), 60)
    assert len(a_done) == len(b_done) == 1
    a_end, b_end = a_done[0], b_done[0]
    assert a_end.match_id == b_end.match_id
    assert a_end.reason == b_end.reason == "target"
    assert {a_end.result, b_end.result} == {"win", "loss"}
    assert a_end.players == b_end.players == (a_name, b_name)  # the challenger sits at seat 0
    assert set(a_bot.turns) == set(b_bot.turns) == {a_end.match_id}
    events = await asyncio.to_thread(log_of, gateways, a_end.match_id)
    assert isinstance(events[0], MatchCreated) and events[0].players == (a_name, b_name)


async def test_an_account_bot_seeks_and_plays_its_games_against_another_or_house_bots(
    gateways: Gateways,
) -> None:
    """Two bots seek the same kind: each plays its two games, paired with the other or, after
    the fill wait (2 s here), with house bots."""
    url = gateways.url
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "seekera"), account(url, "seekerb")
    )
    a_bot, b_bot = Heaviest(), Heaviest()
    a_done, b_done = await asyncio.wait_for(
        asyncio.gather(
            a_bot.play_account(url, a_token, seek="express-2p", games=2),
            b_bot.play_account(url, b_token, seek="express-2p", games=2),
        ),
        240,
    )
    for name, done in ((a_name, a_done), (b_name, b_done)):
        assert len(done) == 2 and len({f.match_id for f in done}) == 2
        for finished in done:
            assert finished.reason == "target" and finished.result in ("win", "loss")
            assert name in finished.players and len(finished.players) == 2
    client = AccountClient(url, a_token)
    try:
        me = await client.me()
    finally:
        await client.aclose()
    assert me.live == () and me.seeks == ()  # nothing left running or waiting


async def test_one_account_bot_plays_two_matches_at_once_and_declines_past_its_cap(
    gateways: Gateways,
) -> None:
    url = gateways.url
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "busy"), account(url, "host")
    )

    class Challenger(Heaviest):
        def __init__(self) -> None:
            super().__init__()
            self.declined: list[str] = []

        def on_account_event(self, event: SeenAccountEvent) -> None:
            if isinstance(event, ChallengeDeclined):
                self.declined.append(event.challenge.id)

    a_bot, b_bot = Heaviest(), Challenger()
    a_bot.max_matches = 2
    b_run = asyncio.create_task(b_bot.play_account(url, b_token, games=2))
    rules = {"family": "straight", "players": 2, "target": 60}
    for _ in range(2):
        await challenge(url, b_token, [a_name], **rules)
    third = await challenge(url, b_token, [a_name], **rules)  # one too many
    # the bot comes to the three challenges waiting: it takes two at once, so that neither
    # match can be over before the other begins, however fast a match is played
    a_run = asyncio.create_task(a_bot.play_account(url, a_token, accept_from=[b_name]))
    b_done = await asyncio.wait_for(b_run, 90)
    a_bot.stop()
    a_done = await asyncio.wait_for(a_run, 10)
    ids = [f.match_id for f in b_done]
    assert sorted(ids) == sorted(f.match_id for f in a_done) and len(set(ids)) == 2
    # both matches were played at once: each had turns before the other's last
    turns = a_bot.turns
    one, other = ids
    first_of = {m: turns.index(m) for m in ids}
    last_of = {m: len(turns) - 1 - turns[::-1].index(m) for m in ids}
    assert first_of[one] < last_of[other] and first_of[other] < last_of[one], turns
    assert b_bot.declined == [third.id]


async def statuses(url: str, token: str) -> dict[str, str]:
    """The status of each challenge of the account of ``token``, by id."""
    client = AccountClient(url, token)
    try:
        return {c.id: c.status for c in await client.challenges()}
    finally:
        await client.aclose()


async def until_status(url: str, token: str, challenge_id: str, timeout: float = 20.0) -> str:
    """A challenge's status once it is no longer open."""
    deadline = time.monotonic() + timeout
    while (status := (await statuses(url, token))[challenge_id]) == "open":
        assert time.monotonic() < deadline, f"{challenge_id} stayed open"
        await asyncio.sleep(0.2)
    return status


async def test_an_account_bot_declines_every_challenge_unless_told_whose_to_take(
    gateways: Gateways,
) -> None:
    """By default nobody's; with ``accept_from`` those accounts' challenges, and only with
    turns no slower than ``accept_deadline_ms``."""
    url = gateways.url
    (host, host_token), (friend, friend_token), (_, stranger_token) = await asyncio.gather(
        account(url, "host"), account(url, "friend"), account(url, "stranger")
    )
    lone = Heaviest()
    lone_run = asyncio.create_task(lone.play_account(url, host_token, games=1))
    from_friend = await challenge(url, friend_token, [host])
    assert await until_status(url, host_token, from_friend.id) == "declined"
    lone.stop()
    assert await asyncio.wait_for(lone_run, 20) == []

    host_bot, friend_bot = Heaviest(), Heaviest()
    runs = [
        asyncio.create_task(host_bot.play_account(url, host_token, games=1, accept_from=[friend])),
        asyncio.create_task(friend_bot.play_account(url, friend_token, games=1)),
    ]
    from_stranger = await challenge(url, stranger_token, [host])
    assert await until_status(url, host_token, from_stranger.id) == "declined"
    client = AccountClient(url, friend_token)
    try:
        slow = await client.challenge([host], rules=SHORT, deadline_ms=60_000)
        assert await until_status(url, host_token, slow.id) == "declined"
        quick = await client.challenge([host], rules=SHORT, deadline_ms=5_000)
    finally:
        await client.aclose()
    (host_end,), (friend_end,) = await asyncio.wait_for(asyncio.gather(*runs), 90)
    assert host_end.match_id == friend_end.match_id
    assert (await statuses(url, host_token))[quick.id] == "started"


async def test_an_account_bot_that_overrides_accept_chooses_its_own_games(
    gateways: Gateways,
) -> None:
    url = gateways.url
    (host, host_token), (_, guest_token) = await asyncio.gather(
        account(url, "choosy"), account(url, "caller")
    )

    class StraightOnly(Heaviest):
        def accept(self, challenge: Challenge, live: int) -> bool:
            return challenge.rules.family == "straight"

    runs = [
        asyncio.create_task(StraightOnly().play_account(url, host_token, games=1)),
        asyncio.create_task(Heaviest().play_account(url, guest_token, games=1)),
    ]
    express = await challenge(url, guest_token, [host], family="express", players=2, target=30)
    assert await until_status(url, host_token, express.id) == "declined"
    straight = await challenge(url, guest_token, [host], family="straight", players=2, target=30)
    (host_end,), _ = await asyncio.wait_for(asyncio.gather(*runs), 90)
    assert (await statuses(url, host_token))[straight.id] == "started"
    assert host_end.match_id is not None


async def test_an_account_bot_resigns_a_match_when_asked(gateways: Gateways) -> None:
    url = gateways.url
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "quitter"), account(url, "stayer")
    )

    class Quitter(Heaviest):
        def on_account_event(self, event: SeenAccountEvent) -> None:
            if isinstance(event, MatchStarted):
                self.resign(event.match_id)

    quitter, stayer = Quitter(), Heaviest()
    runs = [
        asyncio.create_task(quitter.play_account(url, a_token, games=1, accept_from=[b_name])),
        asyncio.create_task(stayer.play_account(url, b_token, games=1)),
    ]
    await challenge(url, b_token, [a_name], family="straight", players=2, target=250)
    (q_end,), (s_end,) = await asyncio.wait_for(asyncio.gather(*runs), 30)
    assert (q_end.reason, q_end.result, s_end.result) == ("resigned", "loss", "win")


@pytest.mark.parametrize("transport", ["socket", "http"])
async def test_an_account_bot_finishes_its_match_through_a_gateway_killed_mid_match(
    gateways: Gateways, caplog: pytest.LogCaptureFixture, transport: str
) -> None:
    """The connections drop with the gateway; the bots reconnect to its successor on the same
    port: the account's socket at its last cursor, or over HTTP, the account stream resuming
    after its last event and the play stream starting each match again with a snapshot and
    the turn."""
    caplog.set_level(logging.INFO, logger="domino_sdk")
    g = gateways
    port = free_port()
    url = await asyncio.to_thread(g.spawn_gateway, "gateway-sdk-doomed", port, PLAY_LIMITS)
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "phoenix"), account(url, "ember")
    )
    a_bot, b_bot = Heaviest(), Heaviest()
    runs = [
        asyncio.create_task(a_bot.play_account(url, a_token, games=1, transport=transport)),
        asyncio.create_task(
            b_bot.play_account(url, b_token, games=1, accept_from=[a_name], transport=transport)
        ),
    ]
    await challenge(url, a_token, [b_name], family="express", players=2, target=100)
    deadline = time.monotonic() + 20
    while len(a_bot.turns) + len(b_bot.turns) < 10:  # well into the match
        assert time.monotonic() < deadline, "the match did not start"
        await asyncio.sleep(0.05)
    await asyncio.to_thread(g.stack.kill, "gateway-sdk-doomed", signal.SIGKILL)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(g.spawn_gateway, "gateway-sdk-reborn", port, PLAY_LIMITS)
    (a_end,), (b_end,) = await asyncio.wait_for(asyncio.gather(*runs), 90)
    assert a_end.match_id == b_end.match_id and a_end.reason == "target"
    assert {a_end.result, b_end.result} == {"win", "loss"}
    events = await asyncio.to_thread(log_of, g, a_end.match_id)
    assert events[0].players == (a_name, b_name)
    if transport == "http":
        dropped = [r for r in caplog.records if "dropped; reconnecting" in r.getMessage()]
        assert len(dropped) >= 4  # each bot's two streams
    else:
        dropped = [r for r in caplog.records if "opening it again" in r.getMessage()]
        assert len(dropped) >= 2  # each bot's one socket


@pytest.mark.parametrize("transport", ["socket", "http"])
async def test_an_account_bot_waits_out_429s_and_still_finishes(
    gateways: Gateways, caplog: pytest.LogCaptureFixture, transport: str
) -> None:
    """On a gateway with tight move limits (one a second, one at once) the bots outrun their
    budget: a seat moves every other round trip, and again at once after each draw, so it is
    refused unless the machine is so slow that its turns come more than a second apart (at
    two a second a loaded machine once let a whole match through unrefused). They wait as
    each 429 (each limited frame, over the socket) says and finish."""
    caplog.set_level(logging.INFO, logger="domino_sdk")
    name = f"gateway-sdk-slow-{uuid.uuid4().hex[:6]}"
    url = await asyncio.to_thread(gateways.spawn_gateway, name, free_port(), SLOW_MOVES)
    (a_name, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "hasty"), account(url, "rushed")
    )
    a_bot, b_bot = Heaviest(), Heaviest()
    runs = [
        asyncio.create_task(a_bot.play_account(url, a_token, games=1, transport=transport)),
        asyncio.create_task(
            b_bot.play_account(url, b_token, games=1, accept_from=[a_name], transport=transport)
        ),
    ]
    await challenge(url, a_token, [b_name], family="straight", players=2, target=30)
    (a_end,), (b_end,) = await asyncio.wait_for(asyncio.gather(*runs), 120)
    assert a_end.reason == "target" and {a_end.result, b_end.result} == {"win", "loss"}
    assert any("rate limited" in r.getMessage() for r in caplog.records)


def domino(g: Gateways, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli.main", *args],
        env=g.stack.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_the_cli_registers_an_account_and_plays_its_seeks(gateways: Gateways) -> None:
    g = gateways
    name = unique("clibot")
    made = domino(g, "bot", "register", "--url", g.url, name)
    out, err = made.communicate(timeout=30)
    assert made.returncode == 0, err.decode()
    token = out.decode().strip()
    assert token.startswith("dab_") and "\n" not in token and name in err.decode()
    player = domino(
        g, "bot", "run", "--url", g.url, "--token", token, "--seek", "express-2p",
        "--games", "2", "--strategy", "greedy",
    )  # fmt: skip
    try:
        out, err = player.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        player.kill()
        out, err = player.communicate()
        pytest.fail(f"the bot did not finish: {err.decode()[-2000:]}")
    assert player.returncode == 0, err.decode()[-2000:]
    lines = out.decode().splitlines()
    assert sum(" started: " in line for line in lines) == 2, lines
    assert sum(" win: " in line or " loss: " in line for line in lines) == 2, lines
    assert lines[-1].startswith("played 2: "), lines


def test_the_cli_still_plays_a_seat_token_and_refuses_seeking_with_one(
    gateways: Gateways,
) -> None:
    g = gateways
    r = domino(g, "bot", "run", "--url", g.url, "--token", "nope", "--seek", "express-2p",
               "--strategy", "greedy")  # fmt: skip
    _, err = r.communicate(timeout=30)
    assert r.returncode == 2 and b"account token" in err


def test_an_example_bot_plays_its_seeks_as_an_account(gateways: Gateways) -> None:
    g = gateways
    made = asyncio.run(register(g.url, unique("example")))
    player = subprocess.Popen(
        [sys.executable, "-m", "domino_sdk.examples.heaviest", "--url", g.url,
         "--token", made.token, "--seek", "straight-2p", "--games", "1"],
        env=g.stack.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = player.communicate(timeout=120)
    assert player.returncode == 0, err.decode()[-2000:]
    (line,) = out.decode().splitlines()
    assert line.startswith("m-") and ("win" in line or "loss" in line), line


async def test_an_account_stream_whose_token_is_rotated_raises_stream_closed_and_stays_closed(
    gateways: Gateways,
) -> None:
    """The gateway ends a stream whose token ended with a ``closed`` line (docs/protocol.md,
    "When a token ends"); the SDK raises it as StreamClosed, with its reason, and does not
    open the stream again with a token that opens nothing."""
    _, token = await account(gateways.url, "closed")
    client = AccountClient(gateways.url, token)
    try:
        events = client.events()
        first = await asyncio.wait_for(events.__anext__(), 15)
        assert isinstance(first, AccountState)
        await client.rotate()
        with pytest.raises(StreamClosed) as closed:
            await asyncio.wait_for(events.__anext__(), 5)
        assert closed.value.code == "token_rotated"
        assert closed.value.status == 401
        assert client.dropped == 0
    finally:
        await client.aclose()


async def test_a_challenge_withdrawn_while_the_bot_decides_is_passed_over_and_play_goes_on(
    gateways: Gateways, caplog: pytest.LogCaptureFixture
) -> None:
    """The challenger withdraws its challenge while the bot is deciding: the bot's accept is
    refused (the challenge is closed), the bot says so and goes on following its account."""
    caplog.set_level(logging.INFO, logger="domino_sdk")
    url = gateways.url
    (_, a_token), (b_name, b_token) = await asyncio.gather(
        account(url, "fickle"), account(url, "eager")
    )
    decided: list[str] = []

    class Keen(Heaviest):
        def accept(self, challenge: Challenge, live: int) -> bool:
            # the challenger is quicker: the challenge is withdrawn before the answer
            withdrawn = httpx.post(
                f"{url}{API}/challenges/{challenge.id}/cancel",
                headers={"authorization": f"Bearer {a_token}"},
            )
            assert withdrawn.status_code == 200, withdrawn.text
            decided.append(challenge.id)
            return True

    bot = Keen()
    run = asyncio.create_task(bot.play_account(url, b_token))
    made = await challenge(url, a_token, [b_name])
    said = f"challenge {made.id}: "
    deadline = time.monotonic() + 30
    while not any(r.getMessage().startswith(said) for r in caplog.records):
        assert time.monotonic() < deadline, "the refused accept was never reported"
        assert not run.done(), run
        await asyncio.sleep(0.05)
    assert decided == [made.id]
    assert not run.done()  # still following the account
    bot.stop()
    assert await asyncio.wait_for(run, 30) == []


async def test_a_snapshot_of_a_match_that_is_over_closes_its_seats_and_what_follows_is_left(
    gateways: Gateways,
) -> None:
    """A play stream resumed after a match ended may show the end only in a snapshot (its
    match_ended line not seen): the session closes the match — its seat's worker stops — and
    leaves the match's later lines unread."""
    url = gateways.url
    match_id = await asyncio.to_thread(create, url, ["random", None], rules={"players": 2})
    seat, token = await asyncio.to_thread(join, url, match_id)
    auth = {"authorization": f"Bearer {token}"}
    path = f"{API}/matches/{match_id}/seats/{seat}"
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        resigned = await http.post(
            f"{path}/moves", json={"type": "resign"}, headers={**auth, "idempotency-key": "r"}
        )
        assert resigned.status_code == 200, resigned.text
        async with http.stream("GET", f"{path}/stream", headers=auth) as stream:
            first = await anext(stream.aiter_lines())
    snapshot = msgspec.json.decode(first, type=Line)
    assert isinstance(snapshot, Snapshot) and snapshot.view.phase == "over"

    _, b_token = await account(url, "resumed")
    client = AccountClient(url, b_token)
    try:
        session = AccountSession(Heaviest(), client)
        line = PlayLine(match_id=match_id, seat=seat, line=snapshot)
        session._route(line)
        assert (match_id, seat) not in session.seats
        session._route(line)  # sent again after a reconnect: left unread
        assert (match_id, seat) not in session.seats
    finally:
        await client.aclose()
