"""What the SDK's generated wire module (:mod:`domino_sdk.wire`) builds on: the SDK's own
pieces, which the server's schema cannot say.

- :class:`Event`, the base of every event, and :class:`UnknownEvent`, how an event of a type
  this SDK does not know (a newer server's) reaches a bot, so that an older bot keeps playing;
- :class:`RulesHelpers`, what ``Rules`` can tell beyond its fields;
- ``Tile`` and ``End``, the names the request bodies are written with.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import msgspec

Tile = tuple[int, int]
"""A tile: its two halves' pips, e.g. ``(3, 5)``."""

End = Literal["left", "right", "up", "down"]
"""An open end: the line's two arms, and the spinner's crosswise sides (Straight, S2)."""


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event: something that happened in the match."""


class UnknownEvent(Event, frozen=True, tag="unknown_event"):
    """An event of a type this SDK does not know, from a newer server: ``name`` is its ``type``
    on the wire and ``fields`` the rest of it, as plain JSON. Nothing on the wire carries this
    tag; :func:`domino_sdk.protocol.decode_event` makes one."""

    name: str
    fields: dict[str, Any]


class _Seats(Protocol):
    @property
    def players(self) -> int: ...

    @property
    def partners(self) -> bool: ...


class RulesHelpers:
    """What a match's rules tell beyond their fields (a mixin of ``Rules``: methods only)."""

    __slots__ = ()

    @property
    def sides(self: _Seats) -> int:
        """How many scoring sides: 2 with partners, else one per player."""
        return 2 if self.partners else self.players

    def side_of(self: _Seats, seat: int) -> int:
        """The side a seat scores for, an index into ``scores`` (C3)."""
        return seat % 2 if self.partners else seat
