"""The account channel: everything an account needs on one connection, under one cursor.

The account's feed (challenges, its matches starting and ending) and the lines of every seat
it holds are merged into one sequence of frames (docs/protocol.md, "The account channel"),
each carrying the cursor that covers it and every frame before it, so that a reconnect with
the last cursor read gets exactly the frames it missed. The socket (account_socket.py) and
the account stream with ``play=1`` (:func:`channel_stream`) carry the same frames.

The cursor is ``F`` or ``F,M:S:V,M:S:V...``: F the last feed id sent, then, for each seat
followed, its match, seat and the last version sent of it. A seat joins the cursor, at 0,
with the frame that makes it followed (the ``state`` frame for the live seats, or its
match's ``match_started``), and leaves it with its ``match_ended`` line; a seat whose line
is sent moves to the cursor's end. Resumed, the feed sends its lines after F (a
``match_started`` among them following its match from event 1), and each seat of the cursor,
in the cursor's order (the least recently sent first, so that a client cut again and again
still hears from every seat), its events after V, as a seat stream resumed after V would.

A seat's lines are the hub's, framed once for every stream of that seat's view (C8): a frame
is the line's bytes spliced into a head and a tail, never decoded and encoded again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import msgspec
import structlog

from services.gateway.config import GatewaySettings
from services.gateway.credentials import Credential, Credentials
from services.gateway.http import ApiError, Request
from services.gateway.hub import FeedUnavailable, Hub
from services.gateway.live import LiveResponse
from services.gateway.protocol import Gap
from services.gateway.subscribers import Subscriber, Watch
from services.lobby.accounts import Account
from services.lobby.challenges import Challenges
from services.lobby.seeks import Seeks
from services.projections.accounts import AccountFeeds
from services.redis.lua import LuaScript

log = structlog.get_logger()

SEATS_PER_MATCH = 4
"""The most seats an account may hold in one match: every seat of a four-player match (C3)."""
ENTRY_BYTES = 80
"""The longest seat entry of a cursor: a match id of 64 characters, seat, version, comma."""
POLL_S = 0.5
"""How often a quiet channel looks at the account's feed."""
LOOK_S = 0.05
"""How often, at most, a busy channel looks at the account's feed."""
_ENTRY = re.compile(r"([A-Za-z0-9_-]{1,64}):(\d{1,2}):(\d{1,9})")
_FEED_ID = re.compile(r"\d{1,12}")

Frame = tuple[bytes, bytes, bytes]
"""A frame as the transports write it: its cursor, its type (account or line) and its JSON."""


class Cursor(msgspec.Struct, frozen=True):
    """Where a client is: the last feed id sent, and each followed seat's last version."""

    fed: int
    seats: dict[tuple[str, int], int]


def most_seats(config: GatewaySettings) -> int:
    """The most seats a cursor names: twice every seat the account may hold at once (its live
    matches' cap, each with every seat of it; twice, for matches whose end the client has not
    read yet while others start), so that every seat it holds is followed."""
    return 2 * config.matches_per_account * SEATS_PER_MATCH


def parse_cursor(raw: str, seats_at_most: int) -> Cursor:
    """The cursor a client sent back; ApiError 400 ``bad_cursor`` for one that is malformed,
    names more than ``seats_at_most`` seats (or is longer than they take), or names a seat
    twice (what it names is checked by :meth:`Channel.open`)."""
    longest = 16 + seats_at_most * ENTRY_BYTES
    if len(raw) > longest or not raw.isascii():
        raise _bad(f"a cursor is at most {longest} ASCII characters")
    head, *rest = raw.split(",")
    if len(rest) > seats_at_most:
        raise _bad(f"a cursor names at most {seats_at_most} seats: those you may hold at once")
    if not _FEED_ID.fullmatch(head):
        raise _bad("a cursor begins with a feed id: 0, 1, 2, ...")
    seats: dict[tuple[str, int], int] = {}
    for entry in rest:
        m = _ENTRY.fullmatch(entry)
        if m is None:
            raise _bad("each seat of a cursor is match:seat:version")
        key = (m.group(1), int(m.group(2)))
        if key in seats:
            raise _bad(f"seat {key[1]} of match {key[0]} is named twice")
        seats[key] = int(m.group(3))
    return Cursor(int(head), seats)


def cursor_of(
    request_cursor: str | None, last_event_id: str | None, seats_at_most: int
) -> Cursor | None:
    """The cursor a request resumes from: the ``cursor`` query parameter, else (SSE) the
    Last-Event-ID header; None for a fresh start."""
    raw = request_cursor if request_cursor is not None else last_event_id
    if raw is None or raw == "":
        return None
    return parse_cursor(raw, seats_at_most)


def _bad(message: str) -> ApiError:
    return ApiError(400, "bad_cursor", message)


class Host(Protocol):
    """What the channel needs of the gateway (services/gateway/commands.py's Gateway)."""

    config: GatewaySettings

    @property
    def hub(self) -> Hub: ...
    @property
    def feeds(self) -> AccountFeeds: ...
    @property
    def challenges(self) -> Challenges: ...
    @property
    def seeks(self) -> Seeks: ...
    async def seats_of(self, account: Account, match_id: str) -> list[int]: ...


class _Started(msgspec.Struct):
    type: str = ""
    match_id: str = ""
    seats: list[int] = []


_STARTED = msgspec.json.Decoder(_Started)


class Followed:
    """A seat the channel follows: its subscriber and the head of its frames."""

    __slots__ = ("head", "key", "sub")

    def __init__(self, key: tuple[str, int], sub: Subscriber) -> None:
        self.key = key
        self.sub = sub
        self.head = b'","match_id":"%s","seat":%d,"line":' % (key[0].encode(), key[1])


class Ended(Exception):
    """Raised by :meth:`Channel.frames` when the channel cannot go on exactly (a seat's
    stream was cut: ``too_slow`` when it fell too far behind, ``resume`` when its feed failed
    or the gateway is stopping): the client reconnects with its last cursor."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Channel:
    """One account's merged feed: :meth:`open` checks the cursor and subscribes, then
    :meth:`frames` gives what is ready, in send order, each frame with its cursor."""

    def __init__(self, gw: Host, account: Account, everything: bool) -> None:
        self.gw = gw
        self.account = account
        self.everything = everything
        self.most = most_seats(gw.config)  # the seats a cursor may name
        self.waker = Watch()
        self.fed = 0
        self.seats: dict[tuple[str, int], int] = {}  # the cursor's seats, in the order followed
        self._entries: dict[tuple[str, int], bytes] = {}  # each seat's part of the cursor
        self.followed: dict[Subscriber, Followed] = {}
        self.retry: set[tuple[str, int]] = set()  # seats whose feed could not be read yet
        self.over: set[tuple[str, int]] = set()  # seats whose match_ended this channel sent
        self.out: list[Frame] = []
        self.look_at = 0.0
        self._text = b""  # the cursor as last encoded, and whether it still is
        self._dirty = True

    # -- opening ---------------------------------------------------------------------------

    async def open(self, cursor: Cursor | None) -> None:
        """Start fresh (``cursor`` None: the state frame, then each live seat's snapshot) or
        resume after ``cursor``: ApiError 400 ``bad_cursor`` when it names a feed id beyond
        the feed, a seat the account does not hold or a version beyond its match's, 503 when a
        match's log cannot be read."""
        if cursor is None:
            await self._state()
            return
        last = await self.gw.feeds.last(self.account.id)
        if cursor.fed > last:
            raise _bad(f"feed id {cursor.fed} does not exist yet: the feed is at {last}")
        self.fed = cursor.fed
        held: dict[str, list[int]] = {}
        for match_id, seat in cursor.seats:
            if match_id not in held:
                held[match_id] = await self.gw.seats_of(self.account, match_id)
            if seat not in held[match_id]:
                raise _bad(f"your account does not hold seat {seat} of match {match_id}")
        hub = self.gw.hub
        for key, after in cursor.seats.items():
            try:
                feed = await hub.follow(key[0])
            except FeedUnavailable as e:
                self.close()
                raise ApiError(503, "unavailable", str(e)) from None
            if after > feed.version:
                self.close()
                raise _bad(
                    f"version {after} of match {key[0]} does not exist yet: it is at {feed.version}"
                )
            self._set(key, after)
            await self._follow(key, after)

    async def _follow(self, key: tuple[str, int], after: int | None) -> None:
        """Subscribe to a seat: fresh (a snapshot) or after version ``after`` (its backlog
        queued first)."""
        hub = self.gw.hub
        try:
            feed = await hub.follow(key[0])
        except FeedUnavailable:
            self.retry.add(key)  # looked at again with the feed; the cursor holds it meanwhile
            return
        self.retry.discard(key)
        sub, version = hub.subscribe(feed, key[1], False, after, self.everything, waker=self.waker)
        self.followed[sub] = Followed(key, sub)
        if after is not None:
            first = await hub.backlog(feed, sub, after, version)
            if first:
                sub.chunks[:0] = first
                sub.size += sum(map(len, first))
                self.waker.wake(sub)

    async def _state(self) -> None:
        """Where things stand: the state frame (every live seat joins the cursor at 0 with
        it), then each live seat followed from its snapshot."""
        gw, account = self.gw, self.account
        latest, live, line = await account_state(gw, account)
        self.fed = max(self.fed, latest)
        fresh: list[tuple[str, int]] = []
        for match_id in live:
            for seat in await gw.seats_of(account, match_id):
                key = (match_id, seat)
                if key in self.over:
                    continue  # its end was sent: it is still live only until its finish is told
                if self._may_follow(key):
                    self._set(key, 0)
                    fresh.append(key)
        self._account(line)
        for key in fresh:
            await self._follow(key, None)

    # -- frames ----------------------------------------------------------------------------

    def cursor(self) -> bytes:
        """The cursor as of the frames made so far: joined from each seat's part, kept
        encoded as it changes (a line changes one part, not the other seats')."""
        if self._dirty:
            self._text = b",".join([b"%d" % self.fed, *self._entries.values()])
            self._dirty = False
        return self._text

    def _may_follow(self, key: tuple[str, int]) -> bool:
        """Whether a seat the account holds is to join the cursor: not if it is in it already;
        nor past the cursor's bound, which only a cap lowered under live matches can reach
        (said in the log, as the seat then goes unfollowed)."""
        if key in self.seats:
            return False
        if len(self.seats) < self.most:
            return True
        log.warning(
            "channel_full", account=self.account.id, match_id=key[0], seat=key[1], most=self.most
        )
        return False

    def _set(self, key: tuple[str, int], version: int) -> None:
        """A seat at ``version``, last in the cursor (the least recently sent first)."""
        self.seats.pop(key, None)
        self._entries.pop(key, None)
        self.seats[key] = version
        self._entries[key] = b"%s:%d:%d" % (key[0].encode(), key[1], version)
        self._dirty = True

    def _unset(self, key: tuple[str, int]) -> bool:
        """A seat leaves the cursor; whether it was in it."""
        self._entries.pop(key, None)
        if self.seats.pop(key, None) is None:
            return False
        self._dirty = True
        return True

    def _account(self, line: bytes) -> None:
        cursor = self.cursor()
        data = b'{"type":"account","cursor":"%s","line":%s}' % (cursor, line)
        self.out.append((cursor, b"account", data))

    async def frames(self, timeout: float) -> list[Frame]:
        """The frames ready now, waiting up to ``timeout`` seconds for one ([] if none came);
        raises :class:`Ended` when the channel cannot go on exactly."""
        loop = asyncio.get_running_loop()
        if not self.out and loop.time() < self.look_at:
            ready = await self.waker.wait(min(timeout, POLL_S))
        else:
            ready = self.waker.wait_now()
        if loop.time() >= self.look_at:
            self.look_at = loop.time() + LOOK_S
            await self._look()
            ready += self.waker.wait_now()
        for sub in dict.fromkeys(ready):
            self._lines(sub)
        out, self.out = self.out, []
        return out

    async def _look(self) -> None:
        """The account's feed after the cursor's id: each line a frame; a match started
        followed from its first event; a feed trimmed past the cursor a gap and a state."""
        feeds = self.gw.feeds
        for key in list(self.retry):
            await self._follow(key, self.seats.get(key, 0))
        oldest, batch = await feeds.since(self.account.id, self.fed)
        if self.fed < oldest - 1:
            gap = msgspec.json.encode(Gap(id=oldest - 1, after=self.fed, oldest=oldest))
            self.fed = oldest - 1
            self._dirty = True
            self._account(gap)
            await self._state()
            return
        for n, data in batch:
            self.fed = n
            self._dirty = True
            started: list[tuple[str, int]] = []
            if b'"type":"match_started"' in data:
                event = _STARTED.decode(data)
                for seat in event.seats:
                    key = (event.match_id, seat)
                    if key in self.over:
                        continue  # its end was sent already
                    if self._may_follow(key):
                        self._set(key, 0)
                        started.append(key)
            self._account(data)
            for key in started:
                await self._follow(key, 0)

    def _lines(self, sub: Subscriber) -> None:
        """A seat's queued lines as frames, each under the cursor that counts it; at its
        stream's end, the seat leaves the cursor (its match over) or the channel ends."""
        followed = self.followed.get(sub)
        if followed is None:
            return
        data = sub.drain()
        key, head = followed.key, followed.head
        seats = self.seats
        if data:
            for line in data.split(b"\n"):
                if not line:
                    continue
                version, ended = _read_head(line)
                if ended:
                    self._unset(key)
                    self.over.add(key)
                elif key in seats:
                    self._set(key, version)
                cursor = self.cursor()
                self.out.append(
                    (cursor, b"line", b'{"type":"line","cursor":"%s%s%s}' % (cursor, head, line))
                )
        if sub.finished and not sub.chunks:
            self._drop(sub)
            feed = self.gw.hub.feeds.get(key[0])
            if feed is not None and feed.over:
                self._unset(key)
                return
            raise Ended("too_slow" if sub.overflow else "resume")

    def _drop(self, sub: Subscriber) -> None:
        """Stop following a seat: its subscriber leaves its feed."""
        followed = self.followed.pop(sub, None)
        feed = self.gw.hub.feeds.get(followed.key[0]) if followed is not None else None
        if feed is not None:
            self.gw.hub.unsubscribe(feed, sub)
        else:
            sub.finish()

    def close(self) -> None:
        """Unsubscribe every seat (the connection ended)."""
        for sub in list(self.followed):
            self._drop(sub)


WHERE = LuaScript(
    """
-- KEYS: the account's hash, its live set. The feed's latest id, and the live matches.
return {redis.call('HGET', KEYS[1], 'feed'), redis.call('SMEMBERS', KEYS[2])}
"""
)


async def account_state(gw: Host, account: Account) -> tuple[int, list[str], bytes]:
    """Where the account stands: the feed's latest id, the live matches (read at one instant)
    and the ``state`` line saying so, with the challenges waiting for its answer and its
    seeks: the first line of a fresh account stream and of a fresh channel."""
    latest, live = await _where(gw.feeds, account.id)
    waiting = [
        c.public()
        for c in await gw.challenges.mine(account)
        if c.status == "open" and account.id in c.opponents
    ]
    line = {
        "type": "state",
        "id": latest,
        "live": live,
        "challenges": waiting,
        "seeks": [s.public() for s in await gw.seeks.mine(account)],
    }
    return latest, live, msgspec.json.encode(line)


async def _where(feeds: AccountFeeds, account_id: str) -> tuple[int, list[str]]:
    """The account feed's latest id and its live matches, read at one instant: a match's
    start adds it to both at once, so a match is either live here or started after the id."""
    keys = [feeds.keys.account(account_id), feeds.keys.account_live(account_id)]
    last, live = await WHERE(feeds.redis, keys, [])
    return int(last or 0), sorted(m.decode() for m in live)


def _read_head(line: bytes) -> tuple[int, bool]:
    """A seat line's id (its first field after its type, as the hub encodes every line) and
    whether it is the match's end."""
    start = line.find(b'"id":') + 5
    end = start
    while 48 <= line[end] <= 57:
        end += 1
    ended = line.startswith(b'"event":{"type":"match_ended"', end + 1)
    return int(line[start:end]), ended


async def channel_lines(channel: Channel, sse: bool) -> AsyncIterator[bytes]:
    """The channel as the account stream writes it (``play=1``): each ready batch in one
    chunk, NDJSON lines or server-sent events whose ``id:`` is the frame's cursor; b"" when
    nothing came. Ends (the client resumes) when the channel cannot go on exactly."""
    try:
        while True:
            try:
                batch = await channel.frames(POLL_S)
            except Ended as e:
                log.info("account channel ended", account=channel.account.id, reason=e.reason)
                return
            if not batch:
                yield b""
            elif sse:
                yield b"".join(
                    b"id: %s\nevent: %s\ndata: %s\n\n" % (cursor, kind, data)
                    for cursor, kind, data in batch
                )
            else:
                yield b"".join(data + b"\n" for _, _, data in batch)
    finally:
        channel.close()


def wants_play(request: Request) -> bool:
    """``play=1`` on the account stream: the account channel; ``play=0`` (or none) the
    account's feed alone, as before; 422 for anything else."""
    play = request.query("play")
    if play not in (None, "0", "1"):
        raise ApiError(422, "invalid_query", "play is 1 or 0")
    return play == "1"


def request_cursor(request: Request, config: GatewaySettings) -> Cursor | None:
    """The cursor a request resumes from (``cursor``, else Last-Event-ID); 400 bad_cursor."""
    most = most_seats(config)
    return cursor_of(request.query("cursor"), request.header(b"last-event-id"), most)


class StreamHost(Host, Protocol):
    """What the account stream with ``play=1`` needs of the gateway besides the channel's."""

    @property
    def credentials(self) -> Credentials: ...
    async def account(self, request: Request) -> Account: ...
    def account_credential(self, request: Request, account: Account) -> Credential: ...
    def wants_sse(self, request: Request) -> bool: ...
    def wants_everything(self, request: Request) -> bool: ...
    async def open_account_stream(
        self, account: Account, request: Request
    ) -> Callable[[], Awaitable[None]]: ...


async def open_channel(
    gw: StreamHost, request: Request, account: Account, cursor: Cursor | None, everything: bool
) -> tuple[Channel, Callable[[], Awaitable[None]]]:
    """An account's channel in one of its stream places, open at ``cursor``, and what closes
    the place; ApiError or LimitExceeded when it would be refused, nothing taken."""
    close = await gw.open_account_stream(account, request)
    channel = Channel(gw, account, everything)
    try:
        await channel.open(cursor)
    except BaseException:
        channel.close()
        await close()
        raise
    return channel, close


async def channel_stream(gw: StreamHost, request: Request) -> LiveResponse:
    """GET /account/stream?play=1: the account channel as NDJSON or server-sent events,
    resumed after ``cursor`` (or Last-Event-ID), in one of the account's stream places."""
    account = await gw.account(request)
    cursor = request_cursor(request, gw.config)
    sse = gw.wants_sse(request)
    everything = gw.wants_everything(request)
    channel, close = await open_channel(gw, request, account, cursor, everything)
    bound = (gw.credentials, gw.account_credential(request, account))
    response = LiveResponse(
        channel_lines(channel, sse), sse, gw.config.keepalive_s, close, bound=bound
    )
    response.wake = channel.waker.poke  # its credential's end is written at once
    return response
