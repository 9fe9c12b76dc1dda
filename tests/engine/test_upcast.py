"""Older stored shapes read as the current one, newer ones refused (events/upcast.py).

Schema 0 is the worked example (tests/support/schema0.py): a renamed field and a split event.
These are the codec's and the export format's own checks; tests/service/test_upcast_paths.py
reads the same logs through the store, the archive, the CLI and the gateway.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from engine.game import evolve
from engine.state import MatchState
from engine.views import view_for
from events.codec import JSON, MSGPACK
from events.envelope import SCHEMA, CommandEnvelope
from events.errors import DecodeError, SchemaTooNew, UnknownSchema
from events.model import PlayTile, RoundEnded, TurnPassed, TurnTimedOut
from events.upcast import UPCASTERS
from events.view import View
from events.wire import TurnMessage
from services.cli import jsonl
from tests.service.conftest import fold
from tests.support import schema0

pytestmark = pytest.mark.engine

LOG = schema0.played("m-upcast")


def _seen(state: MatchState) -> list[View]:
    """What every seat and a spectator see of ``state``: the whole of it, between them."""
    return [view_for(state, seat) for seat in [*range(state.rules.players), None]]


def test_the_worked_example_covers_both_of_its_changes() -> None:
    """The log holds passes, timeouts and round ends: the split and the rename both apply."""
    kinds = {type(e.event) for e in LOG}
    assert {TurnPassed, TurnTimedOut, RoundEnded} <= kinds


@pytest.mark.parametrize("codec", [JSON, MSGPACK], ids=["json", "msgpack"])
def test_every_schema_0_envelope_reads_as_exactly_the_current_one(codec: object) -> None:
    for envelope in LOG:
        old = msgspec.json.decode(schema0.downcast(envelope))
        data = msgspec.json.encode(old) if codec is JSON else msgspec.msgpack.encode(old)
        assert codec.decode_envelope(data) == envelope  # type: ignore[attr-defined]


def test_a_schema_0_log_folds_to_the_state_its_current_form_folds_to() -> None:
    upcast = [JSON.decode_envelope(schema0.downcast(e)) for e in LOG]
    final = fold(upcast)
    assert final.phase == "over"
    assert _seen(final) == _seen(fold(LOG))


def test_an_exported_schema_0_log_is_read_and_written_again_in_the_current_schema(
    tmp_path: Path,
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"".join(schema0.downcast(e) + b"\n" for e in LOG))
    read = jsonl.read(old)
    assert read == LOG
    new = tmp_path / "new.jsonl"
    jsonl.write(new, read)
    lines = new.read_bytes().splitlines()
    assert all(msgspec.json.decode(line)["schema"] == SCHEMA for line in lines)
    assert b"turn_skipped" not in new.read_bytes() and b'"pips"' not in new.read_bytes()


def test_a_newer_schema_is_refused_even_where_its_shape_would_decode() -> None:
    """A newer release may mean something else by the same fields: never read as current."""
    current = msgspec.json.decode(JSON.encode(LOG[1]))
    for newer in ({**current, "schema": SCHEMA + 1}, {**current, "schema": 99, "event": {}}):
        with pytest.raises(SchemaTooNew, match=f"newer than this reader's \\({SCHEMA}\\)"):
            JSON.decode_envelope(msgspec.json.encode(newer))


def test_a_newer_command_envelope_and_a_newer_turn_are_refused() -> None:
    command = CommandEnvelope(
        match_id="m-upcast", command_id="c1", command=PlayTile(seat=0, tile=(1, 2))
    )
    with pytest.raises(SchemaTooNew):
        JSON.decode_command_envelope(schema0.newer(command))
    assert JSON.decode_command_envelope(JSON.encode(command)) == command
    turn = _a_turn()
    with pytest.raises(SchemaTooNew):
        JSON.decode_turn(schema0.newer(turn))
    assert JSON.decode_turn(JSON.encode(turn)) == turn


def _a_turn() -> TurnMessage:
    state = None
    for envelope in LOG:
        state = evolve(state, envelope.event)
        if state.phase == "playing":
            view: View = view_for(state, state.turn)
            return TurnMessage(
                match_id="m-upcast",
                seat=state.turn,
                version=state.version,
                pool="random",
                deadline=None,
                caused_at=0.0,
                view=view,
            )
    raise AssertionError("no turn in the log")


def test_an_export_line_of_a_newer_schema_is_refused_with_its_line_number(tmp_path: Path) -> None:
    lines = [JSON.encode(e) for e in LOG[:2]] + [schema0.newer(LOG[2])]
    path = tmp_path / "newer.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(jsonl.LogFormatError, match=r"line 3.*newer than this reader"):
        jsonl.read(path)


@pytest.mark.parametrize("schema", [-1, "1", True, 1.5, None])
def test_a_schema_no_upcaster_reaches_is_a_typed_error(schema: object) -> None:
    raw = msgspec.json.decode(schema0.downcast(LOG[1]))
    with pytest.raises(DecodeError) as raised:
        JSON.decode_envelope(msgspec.json.encode({**raw, "schema": schema}))
    assert not isinstance(raised.value, SchemaTooNew)


def test_a_split_event_the_upcaster_cannot_place_is_refused() -> None:
    raw = msgspec.json.decode(schema0.downcast(LOG[0]))
    raw["event"] = {"type": "turn_skipped", "seat": 0, "why": "bored"}
    with pytest.raises(UnknownSchema, match="turn_skipped with why='bored'"):
        JSON.decode_envelope(msgspec.json.encode(raw))


def test_every_schema_from_the_oldest_to_the_current_has_its_upcaster() -> None:
    assert sorted(UPCASTERS) == list(range(min(UPCASTERS), SCHEMA))
    assert all(step == upcaster.reads for step, upcaster in UPCASTERS.items())
