"""Runs the arenas: starts the matches each running arena has due and reports their ends.

One runner at a time does this (the process holding the matchmaker's lease, see
:mod:`services.lobby.seeks`), a few times a second: for each running arena it asks
:meth:`Arenas.due` what to start, starts each match through the caller's starter (the same
way a challenge or a seek does, so accounts learn of it on their feeds), and reads the end of
each match in play from its log. A runner that dies mid-way loses nothing: a pairing it was
handed and never reported started is handed out again, under the same match id.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog

from events.codec import JSON
from events.model import MatchEnded
from services.lobby.arena import Pairing
from services.lobby.arenas import Arena, Arenas, match_id_for
from services.store.source import LogReader

log = structlog.get_logger()

ArenaStarter = Callable[[Arena, Pairing, str], Awaitable[None]]
"""Starts the match of a pairing (the arena, the pairing, its match id)."""


class ArenaRunner:
    """One round of work over every running arena per :meth:`tick`."""

    def __init__(self, arenas: Arenas, store: LogReader, start: ArenaStarter) -> None:
        self.arenas = arenas
        self.store = store
        self.start = start

    async def tick(self, now: float | None = None) -> int:
        """Start what is due and record what ended; return how many matches started."""
        now = time.time() if now is None else now
        started = 0
        for arena in await self.arenas.running():
            await self._record_ends(arena)
            for pairing in await self.arenas.due(arena.id, now):
                match_id = match_id_for(arena.id, pairing)
                try:
                    await self.start(arena, pairing, match_id)
                except Exception:
                    log.exception("arena match could not start", arena=arena.id, match_id=match_id)
                    continue
                await self.arenas.started(arena.id, pairing, match_id)
                started += 1
        return started

    async def _record_ends(self, arena: Arena) -> None:
        for game in arena.games.values():
            if game.match_id is None or game.finished is not None or game.started is None:
                continue
            version = await self.store.version(game.match_id)
            if version == 0:
                continue
            last = await self.store.read(game.match_id, version, version)
            if not last or last[0].type != "match_ended":
                continue
            ended = JSON.decode_envelope(last[0].data).event
            if isinstance(ended, MatchEnded):
                await self.arenas.finished(arena.id, game.match_id, ended)
