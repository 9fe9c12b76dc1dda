"""The gateway's view of running matches: it follows the logs and feeds every stream.

The gateway reads a partition's notification log only while it has an interest there: a match
it follows (a :class:`Feed`, kept while a stream is open and ``LINGER_S`` after) or a move
waiting for its outcome. The read starts when the interest appears — from ``START_BACK_MS``
before the server's clock says now, so no entry appended after that is missed, and what is
read twice is passed over by version — and stops ``READ_LINGER_S`` after the last interest
there lapsed. One task reads, with a single blocking ``XREAD``, the logs read and the gateway's
reply stream (a partition that joins gives up the read waiting and starts one naming it); on a
Redis Cluster, where one XREAD covers one hash slot, one task per stream. So a gateway holds
at most one read per partition it has an interest in, never one per partition of the
deployment (``domino_gateway_partitions_read`` says how many).

For each match followed here, a :class:`Feed` folds the match's state from the log (read once
from the match stream, then kept up to date from the notification log) and sends each receiver
what it may see: events through ``engine.views.redact`` and views through
``engine.views.view_for`` (C8). A move waiting for its outcome is resolved by the first event
that carries its command id, or by the referee's ``Rejected`` on the reply stream. Entries of
matches nobody follows here are skipped unread.

Versions make it exact: a feed applies version k only after k-1, skips what it has, and reads
any gap back from the match stream; a stream resumed after version N is sent N+1.. from the
match stream, then the feed's live events, with no gap or repeat between the two.

Deadlines are the Redis server's, never this process's: a turn's deadline is its limit after
the time of the log entry that began it (the append set it from the same clock), or, for a
feed read from the match stream, the one in the partition's deadlines; the milliseconds left
are counted on the server's clock as :class:`~services.redis.clock.ServerClock` tells it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, cast

import structlog

from engine.game import evolve
from engine.views import redact
from events.codec import JSON, DecodeError
from events.envelope import Envelope
from events.errors import SchemaTooNew
from services.gateway.feed import Feed, FeedUnavailable, Flight, Outcome
from services.gateway.finished import Finished, Kept
from services.gateway.protocol import EventLine, Gap, frame
from services.gateway.subscribers import Subscriber, Waker, essential
from services.metrics import GATEWAY_PARTITIONS_READ
from services.redis.clock import ServerClock
from services.redis.connection import Client
from services.redis.lane import Lane
from services.store.errors import InvalidMatchId
from services.store.keys import Keys
from services.store.source import LogReader
from services.transport.base import DATA
from services.transport.redis import cancelled_here, id_ms

log = structlog.get_logger()

__all__ = [
    "YIELD_EVERY",
    "Feed",
    "FeedUnavailable",
    "Flight",
    "Hub",
    "Outcome",
    "Subscriber",
    "Waker",
    "essential",
]

LINGER_S = 30.0  # a feed nobody follows is kept this long, so a reconnect finds it warm
YIELD_EVERY = 200  # a long log is folded or framed this many events at a time, the loop between
CLOCK_EVERY_S = 10.0  # how often the server's clock is read again
READ_LINGER_S = 10.0
"""A partition's log is read this long after the last interest there lapsed (no feed, no move
waiting), so that a match followed again soon finds it read."""
START_BACK_MS = 5_000
"""A partition's log is read from this long before the server's clock says now when its read
starts: far more than the clock's error (a round trip) and than the skew of a cluster's
masters, so every entry appended once the interest appeared is read."""
LAPSE_EVERY_S = 1.0  # how often the partitions read are checked for an interest that lapsed


def _fields(flat: Sequence[bytes] | dict[bytes, bytes] | None) -> dict[bytes, bytes]:
    """A stream entry's fields, from Redis's flat list of names and values (or as redis-py
    parsed them already)."""
    if not flat:
        return {}
    if isinstance(flat, dict):
        return flat
    it = iter(flat)
    return dict(zip(it, it, strict=True))


def _unknown(fut: asyncio.Future[Outcome]) -> None:
    if not fut.done():
        fut.set_result(Outcome())


class Hub:
    """Follows matches from the notification logs; feeds streams and resolves waiting moves."""

    def __init__(
        self,
        redis: Client,
        store: LogReader,
        topo: Keys,
        replies: str,
        buffer_limit: int,
        tail: Lane | None,
        finished: Finished | None = None,
    ) -> None:
        self.redis = redis
        self.finished = finished  # finished matches' stream lines, made once
        self.tail = tail  # the blocking XREAD's own connection (None: one read per stream)
        self.reading: dict[int, str] = {}
        """The partitions whose log is read here, and the log's key."""
        self._lapsed: dict[int, float] = {}  # partition read -> when its interest lapsed
        self._readers: dict[str, asyncio.Task[None]] = {}  # key -> its read (a cluster's)
        self._wake = asyncio.Event()  # a partition joined: the one XREAD starts again
        self.store = store  # live logs, and archived ones (a finished match's stream)
        self.topo = topo
        self.replies = replies
        self.buffer_limit = buffer_limit
        self.feeds: dict[str, Feed] = {}
        self._waiters: dict[tuple[str, str], list[asyncio.Future[Outcome]]] = {}
        self.flights: dict[tuple[str, str], Flight] = {}  # (match, command id) -> in flight
        self._watched: dict[str, int] = {}  # match -> moves waiting on it
        self._positions: dict[str, bytes | str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.events_read = 0
        self.clock = ServerClock()

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start reading the reply stream after everything already in it (a partition's log is
        read from when an interest there appears)."""
        for _ in range(3):  # the best of a few readings
            await self.clock.read(self.redis)
        last = cast(list[Any], await self.redis.xrevrange(self.replies, "+", "-", count=1))
        self._positions[self.replies] = last[0][0] if last else b"0-0"
        if self.tail is None:
            self._readers[self.replies] = asyncio.create_task(self._tail_one(self.replies))
        else:
            self._tasks.append(asyncio.create_task(self._tail(self.tail), name="tail"))
        self._tasks.append(asyncio.create_task(self._janitor(), name="janitor"))
        self._tasks.append(asyncio.create_task(self._read_clock(), name="clock"))
        self._tasks.append(asyncio.create_task(self._lapse(), name="lapse"))
        GATEWAY_PARTITIONS_READ.set(0)

    async def stop(self) -> None:
        """Stop following; every open stream ends."""
        self._stopping = True
        tasks = [*self._tasks, *self._readers.values()]
        for task in tasks:
            task.cancel()
        if tasks:  # a read whose cancel the client took for its own timeout ends soon
            await asyncio.wait(tasks, timeout=2.0)
        for feed in self.feeds.values():
            for sub in feed.subs:
                sub.finish()
        for futures in self._waiters.values():
            for fut in futures:
                fut.cancel()

    # -- streams -------------------------------------------------------------------------------

    async def follow(self, match_id: str) -> Feed:
        """The match's feed, read from its log when nobody here followed it yet."""
        feed = self.feeds.get(match_id)
        if feed is None:
            feed = self.feeds[match_id] = Feed(match_id, self.clock)
            self._want(match_id)  # before the load reads the match: nothing falls between
            asyncio.create_task(self._load(feed))  # noqa: RUF006 - the feed holds the outcome
        if not feed.ready.is_set():
            await feed.ready.wait()
        if self.feeds.get(match_id) is not feed:
            raise FeedUnavailable(f"the log of match {match_id!r} could not be read")
        return feed

    def subscribe(
        self,
        feed: Feed,
        seat: int | None,
        sse: bool,
        after: int | None,
        everything: bool = True,
        until_turn: bool = False,
        waker: Waker | None = None,
        views: bool = False,
    ) -> tuple[Subscriber, int]:
        """Open a stream on a ready feed; return it and the version it starts from.

        A fresh stream (``after`` None) starts with a snapshot, and then, if it is the seat's
        move, a turn line like any other, so a client that acts on turn lines alone misses
        none. A resumed one needs the events after ``after`` up to the returned version (see
        :meth:`backlog`), then goes live. With a ``waker``, that is what wakes for its lines.
        With ``views``, a snapshot follows each batch of events and ends the stream (see
        :meth:`_settle_turn`), and every snapshot has the deadline of the seat to move.
        """
        version = feed.version
        start = version if after is None else max(after, version)
        sub = Subscriber(seat, sse, start, self.buffer_limit, everything, until_turn, waker, views)
        if after is None:
            sub.push(feed.view_line(seat, sse, snapshot=True, any_turn=views))
            if seat is not None and feed.my_turn_seat == seat:
                sub.push_turn(feed.view_line(seat, sse, snapshot=False))
        feed.subs.add(sub)
        if feed.over:
            sub.finish()
        return sub, version

    async def backlog(self, feed: Feed, sub: Subscriber, after: int, upto: int) -> list[bytes]:
        """The events after ``after`` up to ``upto`` for a resumed stream, then (with views)
        its snapshot and its turn if the feed is still at ``upto`` — else the live events that
        came meanwhile are queued, and a snapshot after them — and, opened ``until=turn``,
        nothing after its turn."""
        out: list[bytes] = []
        if after < upto and feed.over and sub.everything and self.finished is not None:
            key = ("lines", feed.match_id, sub.seat, sub.sse)
            kept = await self.finished.get_or_make(key, lambda: self._lines(feed, sub, upto))
            if kept is not None and len(kept.ends) == upto:
                out.append(kept.lines(after, upto))
                after = upto
        if after < upto:
            records = await self.store.read(feed.match_id, after + 1, upto)
            if [r.version for r in records] != list(range(after + 1, upto + 1)):
                oldest = records[0].version if records else upto + 1
                return self._resync(feed, sub, after, oldest)
            for i, record in enumerate(records):
                env = JSON.decode_envelope(record.data)
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # a long backlog: let play have the loop a while
                if not sub.everything and not essential(env.event, sub.seat):
                    continue
                line = EventLine(id=env.version, event=redact(env.event, sub.seat))
                out.append(frame(line, sub.sse))
        if sub.views and feed.version == upto:
            out.append(feed.view_line(sub.seat, sub.sse, snapshot=True, any_turn=True))
        if sub.seat is not None and feed.version == upto and feed.my_turn_seat == sub.seat:
            out.append(feed.view_line(sub.seat, sub.sse, snapshot=False))
            if sub.until_turn:
                sub.chunks.clear()  # live lines queued meanwhile come after the turn: drop them
                sub.size = 0
                sub.finish()
        return out

    def _resync(self, feed: Feed, sub: Subscriber, after: int, oldest: int) -> list[bytes]:
        """What a resumed stream gets when the log no longer holds the events after ``after``
        (a match archived where this gateway cannot read it): a gap line saying so, then what
        a fresh stream begins with — the snapshot, and the turn on the seat's move. The live
        lines queued since it subscribed are in that snapshot: they are dropped."""
        log.warning(
            "a resumed stream asked for events the log no longer holds",
            match_id=feed.match_id,
            after=after,
            oldest=oldest,
        )
        sub.chunks.clear()
        sub.size = 0
        sub.after = feed.version
        gap = Gap(id=oldest - 1, after=after, oldest=oldest)
        out = [frame(gap, sub.sse)]
        out.append(feed.view_line(sub.seat, sub.sse, snapshot=True, any_turn=sub.views))
        if sub.seat is not None and feed.my_turn_seat == sub.seat:
            out.append(feed.view_line(sub.seat, sub.sse, snapshot=False))
            if sub.until_turn:
                sub.finish()
        return out

    async def _lines(self, feed: Feed, sub: Subscriber, upto: int) -> Kept | None:
        """Every event line of a finished match up to ``upto`` as ``sub`` sees them, in one
        body, with where each ends; None when the log does not hold them all."""
        lines: list[bytes] = []
        ends: list[int] = []
        end = 0
        records = await self.store.read(feed.match_id, 1, upto)
        if [r.version for r in records] != list(range(1, upto + 1)):
            return None  # the log no longer holds them all here: the stream resyncs
        for i, record in enumerate(records):
            env = JSON.decode_envelope(record.data)
            data = frame(EventLine(id=env.version, event=redact(env.event, sub.seat)), sub.sse)
            lines.append(data)
            end += len(data)
            ends.append(end)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        return Kept(b"".join(lines), tuple(ends))

    def unsubscribe(self, feed: Feed, sub: Subscriber) -> None:
        """A stream ended."""
        sub.finish()
        feed.subs.discard(sub)
        if not feed.subs:
            feed.idle_since = time.monotonic()

    # -- moves ---------------------------------------------------------------------------------

    def expect(self, match_id: str, command_id: str) -> asyncio.Future[Outcome]:
        """A future resolved by the command's first event or by its rejection."""
        fut: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._want(match_id)  # before the command is sent: its event is read however soon
        self._waiters.setdefault((match_id, command_id), []).append(fut)
        self._watched[match_id] = self._watched.get(match_id, 0) + 1
        return fut

    async def outcome(self, fut: asyncio.Future[Outcome], timeout: float) -> Outcome:
        """What :meth:`expect`'s future resolves to; an empty Outcome (unknown) if nothing
        came within ``timeout`` seconds."""
        if not fut.done():
            handle = asyncio.get_running_loop().call_later(timeout, _unknown, fut)
            try:
                return await fut
            finally:
                handle.cancel()
        return fut.result()

    def forget(self, match_id: str, command_id: str, fut: asyncio.Future[Outcome]) -> None:
        """Stop waiting for a command (answered, timed out or given up)."""
        futures = self._waiters.get((match_id, command_id))
        if futures is not None:
            with contextlib.suppress(ValueError):
                futures.remove(fut)
            if not futures:
                del self._waiters[(match_id, command_id)]
        n = self._watched.get(match_id, 0) - 1
        if n > 0:
            self._watched[match_id] = n
        else:
            self._watched.pop(match_id, None)

    # -- reading -------------------------------------------------------------------------------

    def _want(self, match_id: str) -> None:
        """An interest in ``match_id`` appeared: read its partition's log, if it is not read
        yet, from ``START_BACK_MS`` before now on the server's clock (every entry appended
        from here on has a later id: the server's time when it was added)."""
        partition = self._partition(match_id)
        if partition is None:  # no such match can be: its feed fails to load, and says so
            return
        self._lapsed.pop(partition, None)
        if partition in self.reading or self._stopping:
            return
        key = self.topo.log(partition)
        self.reading[partition] = key
        self._positions[key] = f"{max(0, round(self.clock.now() * 1000) - START_BACK_MS)}-0"
        if self.tail is None:
            self._readers[key] = asyncio.create_task(self._tail_one(key), name=key)
        else:
            self._wake.set()
        GATEWAY_PARTITIONS_READ.set(len(self.reading))

    def let_go(self, now: float) -> list[int]:
        """Stop reading the partitions where nothing here has had an interest for
        ``READ_LINGER_S`` (``now``: ``time.monotonic()``); return them."""
        wanted = {self._partition(m) for m in self.feeds} | {
            self._partition(m) for m in self._watched
        }
        gone: list[int] = []
        for partition in list(self.reading):
            if partition in wanted:
                self._lapsed.pop(partition, None)
            elif now - self._lapsed.setdefault(partition, now) >= READ_LINGER_S:
                del self._lapsed[partition]
                key = self.reading.pop(partition)
                self._positions.pop(key, None)  # the one XREAD names it no more
                reader = self._readers.pop(key, None)
                if reader is not None:
                    reader.cancel()
                gone.append(partition)
        if gone:
            GATEWAY_PARTITIONS_READ.set(len(self.reading))
        return gone

    def _partition(self, match_id: str) -> int | None:
        """The partition of a match; None for an id no match can have."""
        try:
            return self.topo.partition_of(match_id)
        except InvalidMatchId:
            return None

    async def _lapse(self) -> None:
        while True:
            await asyncio.sleep(LAPSE_EVERY_S)
            try:
                self.let_go(time.monotonic())
            except Exception:  # the reads stay as they are until the next check
                log.exception("letting go of the partitions without an interest failed")

    async def _tail_one(self, key: str) -> None:
        """Follow one stream (on a Redis Cluster) until it is read here no more."""
        while not self._stopping and (position := self._positions.get(key)) is not None:
            try:
                reply = await self.redis.xread({key: position}, block=1000)
            except asyncio.CancelledError:
                if self._stopping or cancelled_here():
                    raise
                log.warning("a read of the logs was cut off; retrying", stream=key)
                await asyncio.sleep(0.5)
                continue
            except Exception:
                log.exception("reading the logs failed; retrying", stream=key)
                await asyncio.sleep(0.5)
                continue
            if reply:
                self._dispatch(cast(list[Any], reply))

    async def _tail(self, tail: Lane) -> None:
        """Follow the streams read here with one XREAD (on one Redis node). A partition that
        joins while the read waits gives that read up — its connection closed, Redis forgets
        it, and nothing it had read counts — and the next one names the partition."""
        while True:
            self._wake.clear()
            positions = dict(self._positions)
            read = asyncio.ensure_future(
                tail.call("XREAD", "BLOCK", 1000, "STREAMS", *positions, *positions.values())
            )
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait((read, woken), return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
                given_up = not read.done()
                if given_up:
                    read.cancel()
            if given_up:
                await asyncio.wait((read,))  # its cancel lands before the connection goes
                await tail.aclose()
                continue
            try:
                reply = read.result()
            except Exception:
                log.exception("reading the logs failed; retrying")
                await asyncio.sleep(0.5)
                continue
            if reply:
                self._dispatch(cast(list[Any], reply))

    def _dispatch(self, reply: Sequence[Any]) -> None:
        """Handle an XREAD's entries, as Redis sends them: [stream, [[id, [field, value,
        ...]], ...]] for each stream."""
        touched: dict[str, Feed] = {}
        feeds, watched = self.feeds, self._watched
        for raw_key, entries in reply:
            key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            if key not in self._positions:  # a partition let go while the read was out
                continue
            self._positions[key] = entries[-1][0]
            if key == self.replies:
                self._rejections([_fields(flat) for _, flat in entries])
                continue
            for entry_id, flat in entries:
                match_id = None
                try:
                    fields = _fields(flat)
                    raw_match = fields.get(b"match")
                    if raw_match is None:
                        continue
                    match_id = raw_match.decode(errors="replace")
                    feed = feeds.get(match_id)
                    if feed is None and match_id not in watched:
                        continue
                    env = JSON.decode_envelope(fields.get(DATA, b""))
                    if env.match_id != match_id:
                        raise DecodeError(f"an event of match {env.match_id!r}")
                    self.events_read += 1
                    if match_id in watched:
                        self._resolve(match_id, env.command_id, Outcome(version=env.version))
                    if feed is not None:
                        if feed.loading:
                            feed.buffer.append(env)
                        else:
                            self._apply(feed, env, id_ms(entry_id))
                            touched[match_id] = feed
                except Exception as e:  # one bad entry must not stop the streams of the rest
                    self._unreadable(key, entry_id, match_id, e)
        for feed in touched.values():
            self._settle_turn(feed)

    def _unreadable(
        self, stream: str, entry_id: bytes | str, match_id: str | None, error: Exception
    ) -> None:
        """A log entry that could not be read or applied: said in the log, and passed over.
        A feed it broke (its event would not fold, or a newer release wrote it) is dropped, so
        that its streams end and, opened again, read the match afresh from its own log (and
        are refused while this gateway cannot read it): never a stream with an event left out."""
        ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        log.error(
            "unreadable log entry passed over",
            stream=stream,
            id=ident,
            match_id=None if match_id is None else match_id[:200],
            error=repr(error)[:500],
        )
        if match_id is not None and (
            not isinstance(error, DecodeError) or isinstance(error, SchemaTooNew)
        ):
            feed = self.feeds.pop(match_id, None)
            for sub in feed.subs if feed is not None else ():
                sub.finish()

    def _rejections(self, entries: Sequence[dict[bytes, bytes]]) -> None:
        for fields in entries:
            try:
                message = JSON.decode_rejected(fields.get(DATA, b""))
            except DecodeError as e:
                log.error("unreadable reply", error=str(e))
                continue
            self._resolve(
                message.match_id, message.command_id, Outcome(rejection=message.rejection)
            )

    def _resolve(self, match_id: str, command_id: str, outcome: Outcome) -> None:
        for fut in self._waiters.get((match_id, command_id), ()):
            if not fut.done():
                fut.set_result(outcome)

    def _apply(self, feed: Feed, env: Envelope, at_ms: int | None = None) -> None:
        """Fold one event and send it to every receiver, redacted for each (C8). ``at_ms`` is
        when its log entry was written (the server's clock): the turn it begins has its
        deadline that long after (None: read from the match stream, deadline unknown)."""
        version = env.version
        if version <= feed.version:
            return
        if version != feed.version + 1:  # a gap: read it back from the match stream
            feed.loading = True
            feed.buffer.append(env)
            asyncio.create_task(self._load(feed))  # noqa: RUF006
            return
        event = env.event
        state = feed.state = evolve(feed.state, event)
        feed.version = version
        feed.last_ts = env.ts
        limit = state.deadline_ms if state.phase == "playing" else 0
        feed.deadline_at = None if at_ms is None or not limit else (at_ms + limit) / 1000
        if not feed.subs:
            return
        framed: dict[tuple[bool, int | None], bytes] = {}
        for sub in feed.subs:
            if version <= sub.after:
                continue
            if not sub.everything and not essential(event, sub.seat):
                continue
            seen = redact(event, sub.seat)
            key = (sub.sse, -1 if seen is event else sub.seat)
            data = framed.get(key)
            if data is None:
                data = framed[key] = frame(EventLine(id=version, event=seen), sub.sse)
            sub.push(data)

    def _settle_turn(self, feed: Feed) -> None:
        """After a batch: a snapshot to the streams with views, tell the seat to move that it
        is its turn; end streams at the end."""
        if feed.viewed != feed.version:
            feed.viewed = feed.version
            self._send_views(feed)
        if feed.over:
            for sub in feed.subs:
                sub.finish()
            return
        seat = feed.my_turn_seat
        if seat is None or feed.turn_sent == feed.version:
            return
        feed.turn_sent = feed.version
        lines: dict[bool, bytes] = {}
        for sub in feed.subs:
            if sub.seat == seat and sub.after < feed.version:
                data = lines.get(sub.sse)
                if data is None:
                    data = lines[sub.sse] = feed.view_line(seat, sub.sse, snapshot=False)
                sub.push_turn(data)

    def _send_views(self, feed: Feed) -> None:
        """A snapshot at the feed's version to each stream with views that has not seen it:
        one view per (seat, framing), however many streams share it."""
        lines: dict[tuple[int | None, bool], bytes] = {}
        for sub in feed.subs:
            if sub.views and sub.after < feed.version:
                key = (sub.seat, sub.sse)
                data = lines.get(key)
                if data is None:
                    data = lines[key] = feed.view_line(sub.seat, sub.sse, True, any_turn=True)
                sub.push(data)

    async def _load(self, feed: Feed) -> None:
        """Read the match stream from where the feed is, then what came meanwhile, and the
        current turn's deadline."""
        try:
            while True:
                records = await self.store.read(feed.match_id, feed.version + 1)
                for i, record in enumerate(records):
                    self._apply_loaded(feed, JSON.decode_envelope(record.data))
                    if i % YIELD_EVERY == YIELD_EVERY - 1:
                        await asyncio.sleep(0)  # a long log: let play have the loop a while
                buffered = sorted(feed.buffer, key=lambda e: e.version)
                feed.buffer.clear()
                for env in buffered:
                    if env.version > feed.version + 1:
                        feed.buffer.append(env)
                    else:
                        self._apply_loaded(feed, env)
                if feed.buffer:
                    continue
                deadline = await self._deadline_of(feed)
                if not feed.buffer:  # else the match moved meanwhile: read on
                    feed.deadline_at = deadline
                    break
        except Exception:
            log.exception("reading a match log failed", match_id=feed.match_id)
            for sub in feed.subs:
                sub.finish()
            self.feeds.pop(feed.match_id, None)
        finally:
            feed.loading = False
            feed.ready.set()
        self._settle_turn(feed)

    async def _deadline_of(self, feed: Feed) -> float | None:
        """The deadline of the feed's current turn as the referee scheduled it (seconds, on
        the server's clock), if it has one."""
        state = feed.state
        if state is None or state.phase != "playing" or not state.deadline_ms:
            return None
        key = self.topo.deadlines(self.topo.partition_of(feed.match_id))
        score = await self.redis.zscore(key, feed.match_id)
        return None if score is None else float(score) / 1000

    async def _read_clock(self) -> None:
        while True:
            await asyncio.sleep(CLOCK_EVERY_S)
            try:
                await self.clock.read(self.redis)
            except Exception as e:  # the last offset holds meanwhile
                log.warning("reading the server's clock failed", error=str(e))

    def _apply_loaded(self, feed: Feed, env: Envelope) -> None:
        if env.version == feed.version + 1:
            feed.loading = False
            self._apply(feed, env)
            feed.loading = True

    async def _janitor(self) -> None:
        while True:
            await asyncio.sleep(5.0)
            now = time.monotonic()
            for match_id, feed in list(self.feeds.items()):
                if feed.subs or feed.loading:
                    continue
                if feed.over or now - feed.idle_since > LINGER_S:
                    del self.feeds[match_id]
