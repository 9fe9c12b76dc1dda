"""An account at play: every match it is in played at once, over one connection.

:class:`AccountSession` is what ``Bot.run_account`` runs. It follows the account's events —
answering challenges by the bot's policy, counting matches as they start and finish, keeping a
seek in the queue while it has games to play — and the lines of every seat the account holds,
each seat with a worker of its own: each turn line wakes it, it asks the bot for a move and
sends it, while the other seats go on. Both come over the account's socket, under one cursor,
and the moves go up it; over HTTP (the account stream, the play stream and POST /moves) when
the gateway has no socket or the client asks for HTTP. A turn seen twice (a reconnect of the
play stream starts every match again with a snapshot and the turn) is answered once; a move
refused with a 429 waits as long as the gateway says and is sent again, unless the turn has
passed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import httpx

from domino_sdk.account import AccountClient
from domino_sdk.lobby import (
    Account,
    AccountGap,
    AccountState,
    Challenge,
    ChallengeReceived,
    MatchFinished,
    MatchStarted,
    PlayLine,
    Seek,
    SeekExpired,
    SeenAccountEvent,
)
from domino_sdk.model import MatchEnded, Move, SeenEvent
from domino_sdk.protocol import EventLine, Gap, MoveBody
from domino_sdk.socket import AccountSocket, SocketLost, SocketUnavailable, fall_back
from domino_sdk.transport import RETRYABLE, GatewayError, MoveRejected, ProtocolMismatch
from domino_sdk.views import View

log = logging.getLogger(__name__)
T = TypeVar("T")

RESULTS_KEPT = 1000
"""The most finished matches a session keeps to return (the latest)."""
CLOSED_KEPT = 1000
"""The most ended matches a session remembers, so late lines of theirs are left unread."""


class Player(Protocol):
    """What a session asks of a bot (:class:`domino_sdk.bot.Bot` has all of it)."""

    name: str

    def choose(self, view: View) -> Move | MoveBody: ...
    def on_event(self, event: SeenEvent, version: int) -> None: ...
    def accept(self, challenge: Challenge, live: int) -> bool: ...
    def on_account_event(self, event: SeenAccountEvent) -> None: ...
    def for_match(self, match_id: str, seat: int) -> Player: ...


class _Seat:
    """One seat of a live match: the bot playing it, its latest turn, and the task answering."""

    def __init__(self, match_id: str, seat: int, player: Player) -> None:
        self.match_id = match_id
        self.seat = seat
        self.player = player
        self.turn: View | None = None  # the latest turn offered
        self.answered = 0  # the version of the latest turn answered
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def offer(self, view: View) -> None:
        """A turn of this seat: answer it unless it is one already seen."""
        if view.version <= self.answered:
            return
        if self.turn is not None and view.version <= self.turn.version:
            return
        self.turn = view
        self.wake.set()

    def __str__(self) -> str:
        return f"{self.match_id} seat {self.seat}"


class AccountSession:
    """One account playing: its challenges answered, its seeks kept, its seats played at once.

    ``seek``: a kind of game to seek (e.g. ``express-4p``), one seek at a time, again as each
    is matched; ``games``: how many matches to start in all (seeks, challenges, matches the
    account was already in) before taking no more — the session returns once they have all
    finished (None: play until :meth:`stop`); ``max_matches``: seek no more while this many
    are live (the bot's ``accept`` gets the count too).
    """

    def __init__(
        self,
        bot: Player,
        client: AccountClient,
        *,
        seek: str | None = None,
        games: int | None = None,
        max_matches: int = 4,
    ) -> None:
        self.bot = bot
        self.client = client
        self.seek_kind = seek
        self.games = games
        self.max_matches = max_matches
        self.account: Account | None = None
        self.live: dict[str, tuple[int, ...]] = {}  # match id -> the seats held, when known
        self.started = 0  # matches started (or found live) since the session began
        self.finished: deque[MatchFinished] = deque(maxlen=RESULTS_KEPT)
        self.seeking: Seek | None = None
        self.seats: dict[tuple[str, int], _Seat] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._stop = False
        self._done = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- running -------------------------------------------------------------------------------

    async def run(self) -> list[MatchFinished]:
        """Play until the games are all started and finished (or :meth:`stop`); return the
        matches finished meanwhile, in order. Raises GatewayError when the gateway refuses
        the account (401, 403), and the transport error when a stream cannot reconnect."""
        self.account = (await self.client.me()).account
        streams = asyncio.create_task(self._streams())
        done = asyncio.create_task(self._done.wait())
        try:
            ended, _ = await asyncio.wait({streams, done}, return_when=asyncio.FIRST_COMPLETED)
            for task in ended:
                task.result()  # a stream that gave up raises here
        finally:
            tasks = [streams, done, *self._tasks]
            tasks += [s.task for s in self.seats.values() if s.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._withdraw(), 5.0)
        return list(self.finished)

    def stop(self) -> None:
        """Take no more games: withdraw the seek, decline challenges, and return once the live
        matches have finished."""
        self._stop = True
        self._spawn(self._withdraw())
        self._check_done()

    def resign(self, match_id: str) -> asyncio.Task[None]:
        """Concede a live match (for the side of the account's first seat in it); returns the
        task posting it, to await if wanted."""
        return self._spawn(self._resign(match_id))

    async def _resign(self, match_id: str) -> None:
        seats = self.live.get(match_id) or tuple(s for m, s in self.seats if m == match_id)
        if not seats:
            log.warning("%s: not a live match of this account; not resigned", match_id)
            return
        await self.client.resign(match_id, seats[0])
        log.info("%s seat %d: resigned", match_id, seats[0])

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _stopping(self) -> bool:
        return self._stop or (self.games is not None and self.started >= self.games)

    def _check_done(self) -> None:
        if self._stopping() and not self.live:
            self._done.set()

    # -- the connections ------------------------------------------------------------------------

    async def _streams(self) -> None:
        """Follow the account and play its seats: over the account's socket, one connection
        for everything, unless the client asks for HTTP or the gateway has no socket; then
        over the account stream and the play stream."""
        follows = getattr(self.bot, "follows_events", True)
        transport = self.client.transport
        if transport != "http":
            socket = self.client.socket("all" if follows else "minimal")
            try:
                await socket.open()
                await self._over_socket(socket)
                return
            except SocketUnavailable as e:
                fall_back(transport, e, self.account.name if self.account else "the account")
        await _race(self._follow(), self._play())

    async def _over_socket(self, socket: AccountSocket) -> None:
        """Every frame of the socket as it is read: a seat's line handed to its seat at once,
        an account event to the follower, in order (answering a challenge must not hold up
        the turns)."""
        events: asyncio.Queue[SeenAccountEvent] = asyncio.Queue()

        def take(item: SeenAccountEvent | PlayLine) -> None:
            if isinstance(item, PlayLine):
                self._route(item)
            else:
                events.put_nowait(item)

        async def follow() -> None:
            while True:
                await self._on_account_event(await events.get())

        await _race(socket.feed(take), follow())

    # -- the account stream --------------------------------------------------------------------

    async def _follow(self) -> None:
        events = self.client.events()
        async with contextlib.aclosing(events):
            async for event in events:
                await self._on_account_event(event)

    async def _on_account_event(self, event: SeenAccountEvent) -> None:
        if isinstance(event, AccountState):
            await self._begin(event)
        elif isinstance(event, AccountGap):  # the AccountState that follows resyncs
            log.warning("account events %d to %d are lost", event.after + 1, event.id)
        elif isinstance(event, ChallengeReceived):
            await self._consider(event.challenge)
        elif isinstance(event, MatchStarted):
            await self._started(event)
        elif isinstance(event, MatchFinished):
            await self._finished(event)
        elif isinstance(event, SeekExpired) and self.seeking and event.seek.id == self.seeking.id:
            self.seeking = None
            await self._keep_seeking()
        _hook(self.bot.on_account_event, event, failed=None)

    async def _begin(self, state: AccountState) -> None:
        """Where things stood when the session began: matches already live, challenges
        waiting for an answer, a seek already in the queue. After a gap in the account's
        events, a match no longer live ended while its end was lost: it is counted live no
        more (its seats' lines still come on the play stream, up to its end)."""
        for match_id in [m for m in self.live if m not in state.live]:
            del self.live[match_id]
        for match_id in state.live:
            self._live(match_id, ())
        self.seeking = next((s for s in state.seeks if s.kind == self.seek_kind), None)
        name = self.account.name if self.account else "?"
        log.info("%s: %d live matches, %d challenges", name, len(state.live), len(state.challenges))
        for challenge in sorted(state.challenges, key=lambda c: c.created):
            await self._consider(challenge)
        await self._keep_seeking()
        self._check_done()

    async def _consider(self, challenge: Challenge) -> None:
        """Accept or decline a challenge made to the account, by the bot's policy."""
        me = self.account
        if me is None or challenge.status != "open" or challenge.challenger.id == me.id:
            return
        seats = [k + 1 for k, c in enumerate(challenge.to) if c.id == me.id]
        if not seats or any(c.id == me.id and c.accepted for c in challenge.to):
            return
        take = not self._stopping() and _hook(
            self.bot.accept, challenge, len(self.live), failed=False
        )
        try:
            if not take:
                await self.client.decline(challenge.id)
                log.info("challenge %s from %s declined", challenge.id, challenge.challenger.name)
                return
            answer = await self.client.accept(challenge.id)
        except GatewayError as e:  # closed, expired, or the account is at its cap
            log.info("challenge %s: %s", challenge.id, e)
            return
        log.info("challenge %s from %s accepted", challenge.id, challenge.challenger.name)
        if answer.match_id is not None:
            self._live(answer.match_id, tuple(seats))
            await self._keep_seeking()

    async def _started(self, event: MatchStarted) -> None:
        if not self._live(event.match_id, event.seats):
            return
        log.info("%s started: %s", event.match_id, " v ".join(event.players))
        if self.seeking is not None:
            try:
                waiting = {s.id for s in await self.client.seeks()}
            except GatewayError as e:
                log.warning("could not read the seeks: %s", e)
                return
            if self.seeking.id not in waiting:
                self.seeking = None  # this is (most likely) the match it was waiting for
        await self._keep_seeking()

    def _live(self, match_id: str, seats: tuple[int, ...]) -> bool:
        """Count a match as live; False if it was already."""
        if match_id in self.live:
            self.live[match_id] = seats or self.live[match_id]
            return False
        self.live[match_id] = seats
        self.started += 1
        return True

    async def _finished(self, event: MatchFinished) -> None:
        self.live.pop(event.match_id, None)
        self.finished.append(event)
        self._close(event.match_id)
        scores = "-".join(str(s) for s in event.scores)
        log.info("%s finished: %s, %s (%s)", event.match_id, event.result, scores, event.reason)
        await self._keep_seeking()
        self._check_done()

    # -- the seek ------------------------------------------------------------------------------

    async def _keep_seeking(self) -> None:
        """One seek in the queue while games are left to start and the cap allows."""
        if self.seek_kind is None:
            return
        if self._stopping():
            await self._withdraw()
            return
        if self.seeking is not None or len(self.live) >= self.max_matches:
            return
        try:
            self.seeking = await self.client.seek(self.seek_kind)
        except GatewayError as e:
            if e.code != "too_many_matches":
                raise
            return  # sought again when one of its matches finishes
        log.info("seeking %s (%s)", self.seek_kind, self.seeking.id)

    async def _withdraw(self) -> None:
        seek, self.seeking = self.seeking, None
        if seek is None:
            return
        try:
            await self.client.withdraw(seek.id)
        except GatewayError as e:  # matched meanwhile: that match is played all the same
            log.info("seek %s not withdrawn: %s", seek.id, e)

    # -- the play stream -----------------------------------------------------------------------

    async def _play(self) -> None:
        follows = getattr(self.bot, "follows_events", True)
        lines = self.client.play(events="all" if follows else "minimal")
        async with contextlib.aclosing(lines):
            async for line in lines:
                self._route(line)

    def _route(self, wrapped: PlayLine) -> None:
        """Hand a seat's line to the seat: its events to the bot, its turns to its worker."""
        if wrapped.match_id in self._closed:
            return  # lines of an ended match, sent again after a reconnect
        key = (wrapped.match_id, wrapped.seat)
        seat = self.seats.get(key)
        if seat is None:
            player = self.bot.for_match(wrapped.match_id, wrapped.seat)
            seat = self.seats[key] = _Seat(wrapped.match_id, wrapped.seat, player)
            seat.task = asyncio.create_task(self._answer(seat))
        line = wrapped.line
        if isinstance(line, Gap):
            return  # a seat's line of play never resumes: a fresh snapshot follows anyway
        if isinstance(line, EventLine):
            _hook(seat.player.on_event, line.event, line.id, failed=None)
            if isinstance(line.event, MatchEnded):
                self._close(wrapped.match_id)
            return
        view = line.view
        if view is None:
            return
        if view.phase == "over":
            self._close(wrapped.match_id)
        elif view.turn == wrapped.seat and view.legal:
            seat.offer(view)

    def _close(self, match_id: str) -> None:
        """The match ended: its seats' workers stop and its late lines are left unread."""
        self._closed[match_id] = None
        while len(self._closed) > CLOSED_KEPT:
            self._closed.popitem(last=False)
        for key in [k for k in self.seats if k[0] == match_id]:
            task = self.seats.pop(key).task
            if task is not None:
                task.cancel()

    async def _answer(self, seat: _Seat) -> None:
        """The seat's worker: each new turn, the bot's move, posted until it is answered."""
        while True:
            await seat.wake.wait()
            seat.wake.clear()
            view = seat.turn
            if view is None or view.version <= seat.answered:
                continue
            seat.answered = view.version
            try:
                move: Move | MoveBody = seat.player.choose(view)
            except Exception:
                log.exception("%s: choose failed; playing the first legal move", seat)
                move = view.legal[0]
            await self._post(seat, view, move)

    async def _post(self, seat: _Seat, view: View, move: Move | MoveBody) -> None:
        attempt = 0
        while True:
            try:
                await self.client.move(seat.match_id, seat.seat, move, key=f"v{view.version}")
                return
            except MoveRejected as e:  # e.g. the turn timed out just before
                log.warning("%s: move rejected (%s): %s", seat, e.reason, e)
                return
            except ProtocolMismatch as e:  # never tried again, whatever its status
                log.error("%s: move not taken: %s", seat, e)
                return
            except GatewayError as e:
                if e.status == 429:
                    wait = _retry_after(e)
                elif e.status in RETRYABLE:
                    wait = _backoff(attempt)
                elif e.code == "idempotency_key_reused":  # answered by an earlier connection
                    return
                else:
                    log.warning("%s: move not taken: %s", seat, e)
                    return
            except (httpx.TransportError, SocketLost) as e:
                log.info("%s: move not sent (%r); trying again", seat, e)
                wait = _backoff(attempt)
            if seat.turn is not None and seat.turn.version > view.version:
                return  # the turn has passed (a timeout): a newer one is being answered
            await asyncio.sleep(wait)
            attempt += 1


def _retry_after(error: GatewayError) -> float:
    value = error.body.get("retry_after")
    return float(value) if isinstance(value, int | float) and value >= 0 else 1.0


def _backoff(attempt: int) -> float:
    """Exponential backoff with jitter, capped at 5 s."""
    delay: float = min(5.0, 0.05 * 2.0**attempt)
    return delay * (0.5 + random.random() / 2)


async def _race(*work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` at once until the first of it ends; cancel the rest; raise what it raised."""
    tasks = [asyncio.create_task(w) for w in work]
    try:
        ended, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in ended:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _hook(call: Callable[..., T], *args: object, failed: T) -> T:
    """Call one of the bot's hooks; an exception in it is logged, not raised (``failed``)."""
    try:
        return call(*args)
    except Exception:
        log.exception("%s raised", getattr(call, "__qualname__", call))
        return failed
