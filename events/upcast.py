"""Older stored shapes brought to the current one: the one place a reader meets the past.

Every envelope records the schema it was written in (``schema``), and a writer only ever
writes :data:`SCHEMA`. A reader decodes the current schema on msgspec's typed fast path; an
envelope of any other schema comes here, as plain data (what ``msgspec.json.decode`` gives
without a type):

- an older one is raised one schema at a time (n to n + 1) by :data:`UPCASTERS`, then read as
  the current shape. Every read path decodes through :mod:`events.codec`, so the store, the
  archive, an import, a replay and the gateway's replays all see the current shape;
- a newer one is refused with :class:`SchemaTooNew`, never guessed at: a process of the
  current schema leaves it to one that knows it (docs/store.md, "Mixed versions");
- one older than the oldest upcaster, or not a schema at all, is :class:`UnknownSchema`.

A stored record keeps the bytes it was written with: the archive moves them as they are, and
they are upcast each time they are read. docs/store.md says which changes need a new schema
and an upcaster, and how to add one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from events.envelope import SCHEMA
from events.errors import SchemaTooNew, UnknownSchema

Raw = dict[str, Any]
"""An envelope, command envelope or event as plain data: what JSON or MessagePack decode to."""


@dataclass(frozen=True)
class Upcaster:
    """Brings data of schema ``reads`` to ``reads + 1``: the event inside an envelope, and a
    command envelope's command. Each function takes plain data and returns plain data; one
    left out keeps its shape as it is."""

    reads: int
    why: str
    event: Callable[[Raw], Raw] = lambda raw: raw
    command: Callable[[Raw], Raw] = lambda raw: raw


def _event_from_0(event: Raw) -> Raw:
    """Schema 0 to 1: ``round_ended`` named the pips left in each hand ``pips`` (now
    ``counts``), and a pass and a timeout were one event, ``turn_skipped``, told apart by
    ``why`` (now ``turn_passed`` and ``turn_timed_out``)."""
    kind = event.get("type")
    if kind == "round_ended" and "pips" in event:
        renamed = {key: value for key, value in event.items() if key != "pips"}
        renamed["counts"] = event["pips"]
        return renamed
    if kind == "turn_skipped":
        why = event.get("why")
        if why not in _SKIPPED:
            raise UnknownSchema(f"schema 0 turn_skipped with why={why!r}: not pass or timeout")
        return {"type": _SKIPPED[why], "seat": event.get("seat")}
    return event


_SKIPPED = {"pass": "turn_passed", "timeout": "turn_timed_out"}


UPCASTERS: dict[int, Upcaster] = {
    0: Upcaster(
        reads=0,
        why=(
            "the worked example every read path is tested with (a shape this service never "
            "wrote): a renamed field, round_ended.pips to counts, and a split event, "
            "turn_skipped to turn_passed or turn_timed_out"
        ),
        event=_event_from_0,
    ),
}
"""The upcasters by the schema they read; every schema from the oldest key up to
``SCHEMA - 1`` has one (tests/golden holds a corpus written in each)."""


def upcast(raw: Raw, field: str = "event") -> Raw:
    """An envelope (``field="event"``) or command envelope (``field="command"``) of any schema
    this reader knows, as plain data in the current schema; raises SchemaTooNew for a newer
    schema and UnknownSchema for one no upcaster reaches (or data an upcaster cannot read)."""
    schema = raw.get("schema", SCHEMA)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise UnknownSchema(f"schema {schema!r} is not a schema number")
    if schema > SCHEMA:
        raise SchemaTooNew(schema, SCHEMA)
    if schema < min(UPCASTERS, default=SCHEMA):
        raise UnknownSchema(f"schema {schema} is older than any this reader can bring forward")
    inner = raw.get(field)
    for step in range(schema, SCHEMA):
        if isinstance(inner, dict):
            upcaster = UPCASTERS[step]
            inner = upcaster.event(inner) if field == "event" else upcaster.command(inner)
    return {**raw, field: inner, "schema": SCHEMA}
