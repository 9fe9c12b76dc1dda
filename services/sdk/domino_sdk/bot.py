"""Write a bot: subclass :class:`Bot`, implement ``choose(view) -> move``, call ``run``.

    class Heaviest(Bot):
        def choose(self, view: View) -> Move:
            plays = [m for m in view.legal if isinstance(m, PlayTile)]
            return max(plays, key=lambda m: sum(m.tile)) if plays else view.legal[0]

    Heaviest().run("http://127.0.0.1:8080", token)

``choose`` is called once per turn with the seat's view (C8): its hand, the table, and
``view.legal``, the moves it may make. The bot answers each turn with an Idempotency-Key
derived from the turn's version, so a turn seen twice (after a reconnect) is answered once.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable

import httpx

from domino_sdk.client import GatewayError, MoveRejected, SeatClient
from domino_sdk.model import MatchEnded, Move, SeenEvent
from domino_sdk.protocol import EventLine
from domino_sdk.views import View

log = logging.getLogger(__name__)


class Bot(abc.ABC):
    """An external bot: one seat of one match, played over HTTP."""

    name = "bot"

    @abc.abstractmethod
    def choose(self, view: View) -> Move:
        """Return one of ``view.legal`` (never called with an empty list)."""

    def on_event(self, event: SeenEvent, version: int) -> None:  # noqa: B027 - optional hook
        """Called with every event the seat sees, in order; override to keep track.

        A bot that does not override this asks for a minimal stream: its turns, its own
        timeouts, and the ends of rounds and of the match.
        """

    async def play(
        self, url: str, token: str, *, client: httpx.AsyncClient | None = None
    ) -> MatchEnded | None:
        """Play the token's seat until the match ends; return how it ended."""
        seat_client = SeatClient(url, token, client=client)
        try:
            match_id, seat = await seat_client.whoami()
            where = f"{self.name} in {match_id} seat {seat}"
            log.debug("%s: playing", where)
            answered: set[int] = set()
            result: MatchEnded | None = None
            # a bot that does not follow events only needs its turns and how rounds end
            events = "all" if type(self).on_event is not Bot.on_event else "minimal"
            async for line in seat_client.lines(events=events):
                if isinstance(line, EventLine):
                    self.on_event(line.event, line.id)
                    if isinstance(line.event, MatchEnded):
                        result = line.event
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
                    if e.code != "idempotency_key_reused":  # answered by an earlier run
                        raise
            winner = None if result is None else result.winner
            log.debug("%s: match over, won by side %s", where, winner)
            return result
        finally:
            await seat_client.aclose()

    def run(self, url: str, token: str) -> MatchEnded | None:
        """Play until the match ends (blocking); return how it ended."""
        _log_at_info_unless_configured()
        with asyncio.Runner(loop_factory=_fastest_loop()) as runner:
            return runner.run(self.play(url, token))


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
