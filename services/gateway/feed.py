"""A match as the gateway follows it (:class:`Feed`: its state folded from the log, its
receivers, the views it frames for them), and what became of a command sent to it
(:class:`Outcome`, :class:`Flight`)."""

from __future__ import annotations

import asyncio
import time

from engine.state import MatchState
from engine.views import view_for
from events.envelope import Envelope
from events.model import AnyCommand, Rejection
from services.gateway.protocol import Snapshot, TurnLine, frame
from services.gateway.subscribers import Subscriber
from services.redis.clock import ServerClock


class FeedUnavailable(Exception):
    """Raised when a match's log could not be read (Redis failed while loading it)."""


class Feed:
    """A match followed by this gateway: its state folded from the log, and its receivers."""

    __slots__ = (
        "buffer",
        "clock",
        "deadline_at",
        "idle_since",
        "last_ts",
        "loading",
        "match_id",
        "ready",
        "state",
        "subs",
        "turn_sent",
        "version",
        "viewed",
    )

    def __init__(self, match_id: str, clock: ServerClock) -> None:
        self.match_id = match_id
        self.clock = clock
        self.state: MatchState | None = None
        self.version = 0
        self.last_ts = 0.0  # when the last append was written, on the referee's clock
        self.deadline_at: float | None = None  # the current turn's, on the server's clock
        self.loading = True
        self.ready = asyncio.Event()
        self.buffer: list[Envelope] = []  # live entries that came while reading the log
        self.subs: set[Subscriber] = set()
        self.turn_sent = -1
        self.viewed = -1  # the version the streams with views last had a snapshot of
        self.idle_since = time.monotonic()

    def deadline(self) -> float | None:
        """When the current turn times out, on the Redis server's clock (the append that began
        it set it from there); as the referee's clock said, for a turn whose deadline was not
        found."""
        state = self.state
        if state is None or not state.deadline_ms or state.phase != "playing":
            return None
        if self.deadline_at is not None:
            return self.deadline_at
        return self.last_ts + state.deadline_ms / 1000

    def view_line(
        self, seat: int | None, sse: bool, snapshot: bool, any_turn: bool = False
    ) -> bytes:
        """The receiver's view now: a snapshot, or the turn line of the seat to move. A turn's
        deadline is given both as a time and as the milliseconds left now: on the seat's own
        turn, or (``any_turn``, streams with views) whoever's turn it is."""
        state = self.state
        if state is None:
            line: Snapshot | TurnLine = Snapshot(id=0, match_id=self.match_id, seat=seat, view=None)
            return frame(line, sse)
        mine = state.phase == "playing" and (any_turn or (seat is not None and state.turn == seat))
        deadline = self.deadline() if mine else None
        left = None if deadline is None else max(0, round((deadline - self.clock.now()) * 1000))
        view = view_for(state, seat)
        if snapshot:
            line = Snapshot(
                id=self.version,
                match_id=self.match_id,
                seat=seat,
                view=view,
                deadline=deadline,
                remaining_ms=left,
            )
        else:
            line = TurnLine(id=self.version, view=view, deadline=deadline, remaining_ms=left)
        return frame(line, sse)

    @property
    def my_turn_seat(self) -> int | None:
        """The seat to move, while a round is being played."""
        state = self.state
        return state.turn if state is not None and state.phase == "playing" else None

    @property
    def over(self) -> bool:
        """The match has ended."""
        return self.state is not None and self.state.phase == "over"


class Outcome:
    """What became of a command: accepted at ``version`` (``replayed`` when it was an earlier
    copy of it that was applied: this one changed nothing), rejected, or — neither — unknown:
    no answer came in time."""

    __slots__ = ("rejection", "replayed", "version")

    def __init__(
        self,
        version: int | None = None,
        rejection: Rejection | None = None,
        replayed: bool = False,
    ) -> None:
        self.version = version
        self.rejection = rejection
        self.replayed = replayed


class Flight:
    """A command on its way from this gateway: what it asks, and its outcome once known. A
    copy of it posted meanwhile (the same id) waits for this outcome instead of being sent."""

    __slots__ = ("command", "outcome")

    def __init__(self, command: AnyCommand, outcome: asyncio.Future[Outcome]) -> None:
        self.command = command
        self.outcome = outcome
