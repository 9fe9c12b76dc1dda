"""Decoding a stored record into the event its type says it holds, checked."""

from __future__ import annotations

from typing import TypeVar

from events.codec import JSON
from events.envelope import Envelope
from events.model import Event
from services.store.base import Recorded

E = TypeVar("E", bound=Event)


class MalformedLog(ValueError):
    """Raised when a match's log does not hold what every log must: an event where a record
    should be, or a record whose event is not the one its type names."""


def envelope_of(record: Recorded, kind: type[E]) -> tuple[Envelope, E]:
    """The envelope of ``record`` and its event, which must be a ``kind``; raises MalformedLog
    if it is another event."""
    envelope = JSON.decode_envelope(record.data)
    event = envelope.event
    if not isinstance(event, kind):
        raise MalformedLog(
            f"match {record.match_id!r}: event {record.version} should be "
            f"{kind.__struct_config__.tag}, it is {event.__struct_config__.tag}"
        )
    return envelope, event
