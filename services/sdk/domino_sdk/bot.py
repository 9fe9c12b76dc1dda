"""Write a bot: subclass :class:`Bot`, implement ``choose(view) -> move``, call ``run``.

    class Heaviest(Bot):
        def choose(self, view: View) -> Move:
            plays = [m for m in view.legal if isinstance(m, PlayTile)]
            return max(plays, key=lambda m: sum(m.tile)) if plays else view.legal[0]

    Heaviest().run("http://127.0.0.1:8080", token)

``choose`` is called once per turn with the seat's view (C8): its hand, the table, and
``view.legal``, the moves it may make. The bot answers each turn with an Idempotency-Key
derived from the turn's version, so a turn seen twice (after a reconnect) is answered once.

With an account token the same bot plays as the account, every match it is in at once:

    Heaviest().run_account(url, account_token, seek="express-4p", games=20)

It answers challenges by :meth:`Bot.accept` — by default it declines every one unless told
whose to take (``accept_from``) — keeps a seek in the queue while it has games to play, and
returns once they have all finished (docs/bots.md).
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
import logging
from collections.abc import Callable, Collection

import httpx

from domino_sdk.account import AccountClient, is_account_token
from domino_sdk.client import GatewayError, MoveRejected, SeatClient
from domino_sdk.lobby import Challenge, MatchFinished, SeenAccountEvent
from domino_sdk.model import MatchEnded, Move, SeenEvent
from domino_sdk.protocol import EventLine, Gap, MoveBody
from domino_sdk.session import AccountSession
from domino_sdk.socket import Transport
from domino_sdk.views import View

log = logging.getLogger(__name__)
_SESSION: contextvars.ContextVar[AccountSession] = contextvars.ContextVar("domino_sdk_session")


class Bot(abc.ABC):
    """An external bot: one seat of one match (:meth:`run`), or every match of an account at
    once (:meth:`run_account`), played over the gateway's socket (over HTTP where it has
    none, or when asked: ``transport="http"``)."""

    name = "bot"
    max_matches = 4
    """As an account: seek no more, and by default accept no challenge, while this many of its
    matches are live."""
    accept_from: Collection[str] = ()
    """As an account: the accounts (names or ids) whose challenges :meth:`accept` takes by
    default; ``"*"`` among them: any account's. Empty (the default): every challenge is
    declined, so nobody can fill the bot's matches with games it did not ask for."""
    accept_deadline_ms = 10_000
    """As an account: the longest turn (a challenge's ``deadline_ms``) :meth:`accept` takes by
    default: a challenger allowed slow turns could keep a match, and one of ``max_matches``,
    busy for a long while."""

    _session: AccountSession | None = None

    @abc.abstractmethod
    def choose(self, view: View) -> Move | MoveBody:
        """Return one of ``view.legal`` (never called with an empty list), or
        ``domino_sdk.protocol.ResignBody()`` to concede the match."""

    def on_event(self, event: SeenEvent, version: int) -> None:  # noqa: B027 - optional hook
        """Called with every event the seat sees, in order; override to keep track.

        A bot that does not override this asks for a minimal stream: its turns, its own
        timeouts, and the ends of rounds and of the match.
        """

    @property
    def follows_events(self) -> bool:
        """Whether this bot overrides :meth:`on_event`: a bot that does not only needs its
        turns and how rounds end, so it asks for minimal streams."""
        return type(self).on_event is not Bot.on_event

    # -- as an account -------------------------------------------------------------------------

    def accept(self, challenge: Challenge, live: int) -> bool:
        """Whether to accept a challenge made to the account, ``live`` being how many of its
        matches are being played now. By default only a challenge from an account of
        :attr:`accept_from` (none unless set), whose turns last at most
        :attr:`accept_deadline_ms`, while fewer than ``max_matches`` are live; override to
        choose by opponent, rules or anything else."""
        who = challenge.challenger
        named = (
            "*" in self.accept_from or who.name in self.accept_from or who.id in self.accept_from
        )
        quick = 0 < challenge.deadline_ms <= self.accept_deadline_ms
        return named and quick and live < self.max_matches

    def on_account_event(self, event: SeenAccountEvent) -> None:  # noqa: B027 - optional hook
        """Called with every event of the account stream (challenges, matches started and
        finished, seeks expired), in order, once the session has acted on it."""

    def for_match(self, match_id: str, seat: int) -> Bot:
        """The bot that plays this seat of this match (its ``choose`` and ``on_event`` are
        called for it alone); this one by default. Override to keep state by match, e.g.
        ``return type(self)()``."""
        return self

    def resign(self, match_id: str) -> asyncio.Task[None]:
        """Concede a live match of the account (from a hook, or any coroutine); returns the
        task posting the resignation. Raises RuntimeError unless ``run_account`` is running."""
        return self._running("resign()").resign(match_id)

    def stop(self) -> None:
        """Take no more games as an account: ``run_account`` returns once the live matches
        have finished. Raises RuntimeError unless ``run_account`` is running."""
        self._running("stop()").stop()

    def _running(self, what: str) -> AccountSession:
        """This bot's session, or (for a bot made by ``for_match``) the one calling it."""
        session = self._session or _SESSION.get(None)
        if session is None:
            raise RuntimeError(f"{what} needs the bot playing as an account (run_account)")
        return session

    async def play_account(
        self,
        url: str,
        token: str,
        *,
        seek: str | None = None,
        games: int | None = None,
        max_matches: int | None = None,
        accept_from: Collection[str] | None = None,
        client: httpx.AsyncClient | None = None,
        transport: Transport = "auto",
    ) -> list[MatchFinished]:
        """Play as the account of ``token`` (``dab_...``): every match it is in, at once.

        ``seek``: a kind of game (``express-4p``, ``straight-2p``, …) to keep seeking; ``games``:
        how many matches to start in all before taking no more (None: until :meth:`stop`);
        ``max_matches``: the cap of live matches (default the class's); ``accept_from``: the
        accounts whose challenges :meth:`accept` takes (``["*"]``: anyone's; default the
        class's, nobody's); ``transport``: ``"auto"`` (the account's socket, or HTTP where
        the gateway has none), ``"socket"`` or ``"http"``. Returns the matches finished, in
        order, once every one started has finished.
        """
        if accept_from is not None:
            if isinstance(accept_from, str):
                raise TypeError("accept_from is a collection of names: ['OtherBot'], or ['*']")
            self.accept_from = frozenset(accept_from)
        account = AccountClient(url, token, client=client, transport=transport)
        cap = self.max_matches if max_matches is None else max_matches
        session = AccountSession(self, account, seek=seek, games=games, max_matches=cap)
        self._session = session
        current = _SESSION.set(session)  # the session's tasks, and the hooks they call, see it
        try:
            return await session.run()
        finally:
            _SESSION.reset(current)
            self._session = None
            await account.aclose()

    def run_account(
        self,
        url: str,
        token: str,
        *,
        seek: str | None = None,
        games: int | None = None,
        max_matches: int | None = None,
        accept_from: Collection[str] | None = None,
        transport: Transport = "auto",
    ) -> list[MatchFinished]:
        """:meth:`play_account`, blocking."""
        _log_at_info_unless_configured()
        with asyncio.Runner(loop_factory=_fastest_loop()) as runner:
            return runner.run(
                self.play_account(
                    url,
                    token,
                    seek=seek,
                    games=games,
                    max_matches=max_matches,
                    accept_from=accept_from,
                    transport=transport,
                )
            )

    # -- one seat --------------------------------------------------------------------------------

    async def play(
        self,
        url: str,
        token: str,
        *,
        client: httpx.AsyncClient | None = None,
        transport: Transport = "auto",
    ) -> MatchEnded | None:
        """Play the token's seat until the match ends; return how it ended. ``transport``:
        ``"auto"`` (the seat's socket, or HTTP where the gateway has none), ``"socket"`` or
        ``"http"``."""
        if is_account_token(token):
            raise ValueError("an account token plays every seat of the account: play_account()")
        seat_client = SeatClient(url, token, client=client, transport=transport)
        try:
            match_id, seat = await seat_client.whoami()
            where = f"{self.name} in {match_id} seat {seat}"
            log.debug("%s: playing", where)
            answered: set[int] = set()
            result: MatchEnded | None = None
            events = "all" if self.follows_events else "minimal"
            async for line in seat_client.lines(events=events):
                if isinstance(line, EventLine):
                    self.on_event(line.event, line.id)
                    if isinstance(line.event, MatchEnded):
                        result = line.event
                    continue
                if isinstance(line, Gap):  # events lost: the snapshot after it resyncs
                    log.warning("%s: events %d to %d are lost", where, line.after + 1, line.id)
                    continue
                view = line.view
                if view is None:
                    continue
                if view.result is not None:
                    result = view.result
                if view.turn != seat or not view.legal or view.version in answered:
                    continue
                answered.add(view.version)
                move = self.choose(view)
                try:
                    await seat_client.move(move, key=f"v{view.version}")
                except MoveRejected as e:  # e.g. the turn timed out just before
                    log.warning("%s: move rejected (%s): %s", where, e.reason, e)
                except GatewayError as e:
                    # answered by an earlier run; or the socket closed at the match's end
                    if e.code not in ("idempotency_key_reused", "socket_closed"):
                        raise
            winner = None if result is None else result.winner
            log.debug("%s: match over, won by side %s", where, winner)
            return result
        finally:
            await seat_client.aclose()

    def run(self, url: str, token: str, *, transport: Transport = "auto") -> MatchEnded | None:
        """Play until the match ends (blocking); return how it ended."""
        _log_at_info_unless_configured()
        with asyncio.Runner(loop_factory=_fastest_loop()) as runner:
            return runner.run(self.play(url, token, transport=transport))


def _log_at_info_unless_configured() -> None:
    """A script's first call gets info and up on stderr; a program's own set-up is kept."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # httpx logs every request at info: a line per move would bury the bot's own lines
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _fastest_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (the services run on it too), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
