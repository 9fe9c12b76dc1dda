"""Matches loaded from the event store: folded through the engine and cached.

Every reader of match logs — the referee, the projector, the gateway, the demo and
tournaments — folds matches here, so there is one loop that turns stored events into a state.
The cache mirrors what is stored: a state is put in it only after the append that made it has
succeeded (a writer takes a state out while it decides and appends), and a match whose append
failed, or whose partition this process has just acquired, is read afresh.

Finished matches are kept apart, in a much smaller cache: a late command to a match that has
just ended is answered without reading its log again, but a process that has seen a million
matches end does not hold them (a live match's state is tens of kilobytes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from engine.game import evolve
from engine.state import MatchState
from events.codec import JSON
from services.store.base import Recorded
from services.store.source import LogReader


def fold(records: Iterable[Recorded], state: MatchState | None = None) -> MatchState | None:
    """``state`` advanced by stored events, in order (the whole match from None)."""
    for record in records:
        state = evolve(state, JSON.decode_envelope(record.data).event)
    return state


class MatchCache:
    """The states of recently used matches, least recently used evicted first."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._states: OrderedDict[str, MatchState] = OrderedDict()

    def get(self, match_id: str) -> MatchState | None:
        """The cached state, or None."""
        state = self._states.get(match_id)
        if state is not None:
            self._states.move_to_end(match_id)
        return state

    def put(self, match_id: str, state: MatchState) -> None:
        """Remember a state, evicting the least recently used beyond ``size``."""
        self._states[match_id] = state
        self._states.move_to_end(match_id)
        while len(self._states) > self.size:
            self._states.popitem(last=False)

    def drop(self, match_id: str) -> MatchState | None:
        """Forget one match, returning its state if it was cached."""
        return self._states.pop(match_id, None)

    def ids(self) -> list[str]:
        """The cached match ids."""
        return list(self._states)

    def __len__(self) -> int:
        return len(self._states)


class _Split:
    """Live matches in one cache, finished ones in another: a state goes where its phase
    says."""

    def __init__(self, live: MatchCache, finished: MatchCache) -> None:
        self.live = live
        self.finished = finished

    def get(self, match_id: str) -> MatchState | None:
        state = self.live.get(match_id)
        return state if state is not None else self.finished.get(match_id)

    def put(self, match_id: str, state: MatchState) -> None:
        if state.phase == "over":
            self.live.drop(match_id)
            self.finished.put(match_id, state)
        else:
            self.finished.drop(match_id)
            self.live.put(match_id, state)

    def drop(self, match_id: str) -> MatchState | None:
        state = self.live.drop(match_id)
        return state if state is not None else self.finished.drop(match_id)

    def ids(self) -> list[str]:
        return self.live.ids() + self.finished.ids()

    def __len__(self) -> int:
        return len(self.live) + len(self.finished)


FINISHED_KEPT = 256
"""How many finished matches a repository keeps (beside its live ones)."""


class MatchRepository:
    """Loads matches from an event store (or a source that also reads the archive), folds
    them, and caches what is stored: live matches up to ``cache_size``, finished ones up to
    ``finished_size``."""

    def __init__(
        self, store: LogReader, cache_size: int = 20_000, finished_size: int = FINISHED_KEPT
    ) -> None:
        self.store = store
        self.cache = _Split(MatchCache(cache_size), MatchCache(finished_size))

    async def load(self, match_id: str) -> MatchState | None:
        """The match's state, from the cache or folded from its log (None if it has none)."""
        state = self.cache.get(match_id)
        if state is not None:
            return state
        return await self.reload(match_id)

    async def take(self, match_id: str, *, fresh: bool = False) -> MatchState | None:
        """The match's state, handed over: out of the cache, so the caller may evolve it in
        place; it comes back with :meth:`stored` once its append has succeeded (or
        unchanged, if nothing was appended). ``fresh`` reads it from the log regardless."""
        state = self.cache.drop(match_id)
        if fresh or state is None:
            state = fold(await self.store.read(match_id))
        return state

    async def reload(self, match_id: str) -> MatchState | None:
        """The match's state folded from its log, replacing what the cache held."""
        self.cache.drop(match_id)
        state = fold(await self.store.read(match_id))
        if state is not None:
            self.cache.put(match_id, state)
        return state

    async def at(self, match_id: str, version: int) -> MatchState | None:
        """The state right after ``version`` (the cached one when it is there, else folded)."""
        state = self.cache.get(match_id)
        if state is not None and state.version == version:
            return state
        if state is not None and state.version < version:
            state = fold(await self.store.read(match_id, state.version + 1, version), state)
        else:
            state = fold(await self.store.read(match_id, 1, version))
        return state

    def stored(self, match_id: str, state: MatchState) -> None:
        """Record the state an append has just stored."""
        self.cache.put(match_id, state)

    def forget(self, match_id: str) -> None:
        """Read this match afresh next time (its append failed or went elsewhere)."""
        self.cache.drop(match_id)

    def forget_partitions(self, partitions: set[int]) -> None:
        """Read afresh every cached match of ``partitions`` (just acquired: another writer
        may have moved them on meanwhile)."""
        keys = self.store.keys
        for match_id in self.cache.ids():
            if keys.partition_of(match_id) in partitions:
                self.cache.drop(match_id)
