"""A series of hosted matches, created for house bots and followed through their logs to the
end: what the demo and tournaments share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.rules import Rules
from engine.state import MatchState
from events.model import MatchEnded
from services.core.commands import ServiceClient
from services.core.repository import fold
from services.store import EventStore

MOVE_TYPES = frozenset({"tile_played", "tile_drawn", "turn_passed"})

Progress = Callable[[int, int, int], None]
"""Called as matches go: (finished, created, moves so far)."""


class UnfinishedMatch(RuntimeError):
    """Raised when the result of a match that has not ended is asked for."""


class SeriesRejected(RuntimeError):
    """Raised when the referee refuses a match of the series (the setup is wrong)."""


@dataclass(frozen=True, slots=True)
class Planned:
    """A match to create: its rules, the house bot pool of each seat, and a label."""

    rules: Rules
    seats: tuple[str, ...]
    label: str = ""
    names: tuple[str, ...] | None = None


@dataclass
class Followed:
    """A match of the series, folded from its log as it grows."""

    match_id: str
    plan: Planned
    index: int  # its place in the plan
    state: MatchState | None = None
    moves: int = 0
    _version: int = field(default=0, repr=False)

    @property
    def over(self) -> bool:
        """Whether the match has ended."""
        return self.state is not None and self.state.phase == "over"

    def final(self) -> tuple[MatchState, MatchEnded]:
        """The state at the end and how the match ended; raises UnfinishedMatch before."""
        if self.state is None or self.state.result is None:
            raise UnfinishedMatch(f"match {self.match_id} has not ended")
        return self.state, self.state.result

    async def catch_up(self, store: EventStore) -> None:
        """Fold what the log has gained since the last look."""
        records = await store.read(self.match_id, self._version + 1)
        if records:
            self.state = fold(records, self.state)
            self._version = records[-1].version
            self.moves += sum(r.type in MOVE_TYPES for r in records)


async def play_series(
    client: ServiceClient,
    store: EventStore,
    plan: Sequence[Planned],
    *,
    parallel: int,
    on_progress: Progress | None = None,
    timeout: float = 3600.0,
    poll: float = 0.05,
) -> list[Followed]:
    """Create the planned matches, at most ``parallel`` live at a time, and follow each to its
    end; return them in the plan's order. Raises TimeoutError after ``timeout`` seconds and
    SeriesRejected if the referee refuses a match."""
    deadline = time.monotonic() + timeout
    waiting = list(enumerate(plan))
    live: list[Followed] = []
    done: list[Followed] = []
    while waiting or live:
        while waiting and len(live) < parallel:
            index, planned = waiting.pop(0)
            match_id = await client.create_match(planned.rules, planned.seats, names=planned.names)
            live.append(Followed(match_id, planned, index))
        for match in list(live):
            await match.catch_up(store)
            if match.over:
                live.remove(match)
                done.append(match)
        for rejected in await client.rejections():
            raise SeriesRejected(f"the referee refused a match of the series: {rejected}")
        if on_progress is not None:
            moves = sum(m.moves for m in done) + sum(m.moves for m in live)
            on_progress(len(done), len(done) + len(live), moves)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(done)} of {len(plan)} matches finished in {timeout:.0f} s; "
                f"still playing: {', '.join(m.match_id for m in live[:3])}"
            )
        if live:
            await asyncio.sleep(poll)
    return sorted(done, key=lambda m: m.index)
