"""Envelopes: the metadata around each stored event and each command in transit."""

from __future__ import annotations

import msgspec

from events.model import AnyCommand, AnyEvent

SCHEMA = 1
"""Version of the envelope and event shapes; raised only with an upcaster for older data."""


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """One event of a match log: the match, its 1-based position, the command that caused it."""

    match_id: str
    version: int
    command_id: str
    ts: float  # seconds since the epoch, set by the writer
    event: AnyEvent
    schema: int = SCHEMA


class CommandEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """A command on its way to the referee, with where to send a rejection."""

    match_id: str
    command_id: str
    command: AnyCommand
    reply_to: str | None = None
    ts: float = 0.0
    schema: int = SCHEMA
