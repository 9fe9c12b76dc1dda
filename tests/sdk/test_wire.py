"""The server and the SDK agree on the wire, though the SDK imports nothing of the server.

The gateway encodes its own lines (the engine's View, the stored events); the SDK decodes them
into its own structs. Over every line a gateway would send — to each seat and to a spectator,
after every event of matches played by the engine in every family, with timeouts, and ended
every way a match ends (target, resignation, forfeit, round cap, abort, cancel) — the SDK's
decoding holds every field the server encoded, and re-encodes to the very same JSON. The
paired structs' JSON schemas match too, so a field added on one side and not the other fails
here before any bot sees it.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Iterator
from typing import Any, Literal, get_args

import domino_sdk
import msgspec
import pytest
from domino_sdk.protocol import decode_event, decode_line

from engine.game import decide, evolve
from engine.rules import Rules
from engine.state import MatchState
from engine.strategy import GreedyStrategy, RandomStrategy, Strategy
from engine.views import OpenEnd, View, redact, view_for
from events import model
from events.model import (
    Abort,
    AnyCommand,
    CancelMatch,
    CreateMatch,
    EndReason,
    Rejection,
    Resign,
    TimeOutTurn,
)
from services.core.dealer import deal
from services.gateway.protocol import EventLine, Gap, Line, MoveBody, Snapshot, TurnLine, frame

pytestmark = pytest.mark.service

Stop = tuple[int, Literal["resign", "abort", "cancel"]]
"""At command n, the seat to move resigns or aborts, or the operator cancels."""
Settings = dict[str, int]
"""``forfeit_after`` and ``max_rounds`` for the match."""

MATCHES: list[tuple[Rules, bool, Stop | None, Settings]] = [  # rules, timeouts, stop, settings
    (Rules.make("express", players=4, target=60), False, None, {}),
    (Rules.make("express", players=2, target=60), True, None, {}),
    (Rules.make("express", players=3, target=40, next_leader="rotate"), False, None, {}),
    (Rules.make("express", players=2, top=9, target=60), False, (30, "resign"), {}),
    (Rules.make("straight", players=2, target=100), True, None, {}),
    (Rules.make("straight", players=3, top=9, target=100), False, None, {}),
    (Rules.make("straight", players=4, partners=True, target=100), False, (45, "resign"), {}),
    (Rules.make("straight", players=2, target=100, reveal_stock=True), True, None, {}),
    (Rules.make("straight", players=2, top=12, target=100), False, None, {}),
    (Rules.make("express", players=2, target=100), True, None, {"forfeit_after": 1}),
    (Rules.make("straight", players=2, target=250), False, None, {"max_rounds": 2}),
    (Rules.make("express", players=4, target=60), False, (1, "abort"), {}),
    (Rules.make("straight", players=3, target=100), False, (20, "cancel"), {}),
]
SEEDS = range(4)
MATCH = "m-wire"
SDK_LINES = {
    Snapshot: domino_sdk.Snapshot,
    EventLine: domino_sdk.EventLine,
    TurnLine: domino_sdk.TurnLine,
    Gap: domino_sdk.Gap,
}


def played(
    rules: Rules, seed: int, timeouts: bool, stop: Stop | None, settings: Settings
) -> Iterator[Line]:
    """Every line a gateway could send to every seat and a spectator as the engine plays a
    match: each event and the view after it, and each turn; a seat sometimes runs out of
    time, and with ``stop`` the match is stopped at that command."""
    rng = random.Random(seed)
    strategies: list[Strategy] = [
        GreedyStrategy(seed + s) if s % 2 else RandomStrategy(seed + s)
        for s in range(rules.players)
    ]
    receivers: list[int | None] = [None, *range(rules.players)]
    yield Snapshot(id=0, match_id=MATCH, seat=1, view=None)  # a match waiting for players
    players = tuple(f"player-{s}" for s in range(rules.players))
    bots = ("random", *(None for _ in range(1, rules.players)))
    accounts = (None, "u-0123456789ab", *(None for _ in range(2, rules.players)))
    command: AnyCommand = CreateMatch(
        rules=rules, players=players, bots=bots, accounts=accounts, deadline_ms=5000, **settings
    )
    state: MatchState | None = None
    commands = 0
    while True:
        result = decide(state, command)
        assert not isinstance(result, Rejection), result
        for event in result:  # a view after every event, as the gateway's feeds fold them
            state = evolve(state, event)
            for seat in receivers:
                yield EventLine(id=state.version, event=redact(event, seat))
                yield Snapshot(
                    id=state.version, match_id=MATCH, seat=seat, view=view_for(state, seat)
                )
        assert state is not None
        if state.phase == "over":
            return
        if state.phase == "playing" and state.turn is not None:
            deadline = rng.uniform(1.7e9, 1.8e9)  # seconds since the epoch
            left = rng.randint(0, 5000)  # the same deadline as milliseconds left
            view = view_for(state, state.turn)
            yield TurnLine(id=state.version, view=view, deadline=deadline, remaining_ms=left)
            yield Snapshot(
                id=state.version,
                match_id=MATCH,
                seat=state.turn,
                view=view,
                deadline=deadline,
                remaining_ms=left,
            )
        commands += 1
        stopping = None if stop is None or commands < stop[0] else stop[1]
        command = _next_command(state, strategies, rng, timeouts, stopping)


def _next_command(
    state: MatchState,
    strategies: list[Strategy],
    rng: random.Random,
    timeouts: bool,
    stop: Literal["resign", "abort", "cancel"] | None,
) -> AnyCommand:
    if state.phase == "dealing":
        return deal(state.rules, rng)
    assert state.turn is not None
    if stop == "cancel":
        return CancelMatch()
    if stop == "abort":
        return Abort(seat=state.turn)
    if stop == "resign":
        return Resign(seat=state.turn)
    if timeouts and rng.random() < 0.1:
        return TimeOutTurn(seat=state.turn, version=state.version)
    return strategies[state.turn].choose(view_for(state, state.turn))


def lines() -> Iterator[Line]:
    """The lines of every match of MATCHES, each dealt and played from every seed."""
    for rules, timeouts, stop, settings in MATCHES:
        for seed in SEEDS:
            yield from played(rules, seed, timeouts, stop, settings)


def test_every_line_the_gateway_sends_decodes_as_the_sdks_structs_with_every_field_equal() -> None:
    """Field for field, and the same JSON when the SDK encodes what it decoded (its fields are
    in the order of the recorded schema, alphabetical: a JSON object's order means nothing)."""
    seen: set[str] = set()
    endings: set[str] = set()
    for line in lines():
        wire = frame(line, sse=False)
        decoded = decode_line(wire.rstrip(b"\n"))
        assert type(decoded) is SDK_LINES[type(line)]
        assert msgspec.to_builtins(decoded) == msgspec.to_builtins(line)
        assert msgspec.json.decode(msgspec.json.encode(decoded)) == msgspec.json.decode(wire)
        if isinstance(decoded, domino_sdk.EventLine):
            assert not isinstance(decoded.event, domino_sdk.UnknownEvent)
            seen.add(type(decoded.event).__name__)
            if isinstance(decoded.event, domino_sdk.MatchEnded):
                endings.add(decoded.event.reason)
    assert seen == {t.__name__ for t in get_args(model.AnyEvent)}  # every event type was sent
    assert endings == set(get_args(EndReason))  # every way a match ends was sent


def test_every_legal_move_in_an_sdk_view_is_a_move_the_gateway_accepts_as_posted() -> None:
    """A bot posts an entry of ``view.legal`` as it is: the gateway reads the same move."""
    posted = msgspec.json.Decoder(MoveBody)
    for line in lines():
        if not isinstance(line, TurnLine):
            continue
        sdk_view = msgspec.json.decode(frame(line, sse=False), type=domino_sdk.TurnLine).view
        for move, engine_move in zip(sdk_view.legal, line.view.legal, strict=True):
            body = posted.decode(msgspec.json.encode(move))
            assert body.__struct_config__.tag == engine_move.__struct_config__.tag
            assert body.seat == engine_move.seat
            assert getattr(body, "tile", None) == getattr(engine_move, "tile", None)
            assert getattr(body, "end", None) == getattr(engine_move, "end", None)


PAIRED: list[tuple[Any, Any]] = [
    (View, domino_sdk.View),
    (OpenEnd, domino_sdk.OpenEnd),
    (Rules, domino_sdk.Rules),
    (model.Move, domino_sdk.Move),
    (model.AnyEvent, domino_sdk.AnyEvent),
    (Snapshot, domino_sdk.Snapshot),
    (TurnLine, domino_sdk.TurnLine),
    (Gap, domino_sdk.Gap),
    *((getattr(model, t.__name__), t) for t in get_args(domino_sdk.AnyEvent)),
]


def _comparable(schema: Any) -> Any:
    """A schema without what may rightly differ: the docstrings (``description``), written
    for each side's readers; ``additionalProperties``: the engine's Rules refuses unknown
    options, the SDK's ignores them so that an option added later cannot break an older bot;
    and the order of fields, of a union's members and of literal values (the SDK's structs are
    generated from the recorded schema, which keeps no order: it means nothing on the wire)."""
    if isinstance(schema, dict):
        return {
            k: sorted(map(_comparable, v), key=repr)
            if k in ("required", "enum", "anyOf")
            else _comparable(v)
            for k, v in schema.items()
            if k not in ("description", "additionalProperties")
        }
    if isinstance(schema, list):
        return [_comparable(v) for v in schema]
    return schema


@pytest.mark.parametrize(
    ("server", "sdk"), PAIRED, ids=[str(getattr(s, "__name__", s)) for s, _ in PAIRED]
)
def test_the_servers_struct_and_the_sdks_have_the_same_json_schema(server: Any, sdk: Any) -> None:
    """Same names, fields, types, defaults and tags."""
    assert _comparable(msgspec.json.schema(sdk)) == _comparable(msgspec.json.schema(server))


def test_an_event_line_differs_from_the_servers_only_by_the_sdks_fallback_for_unknown_events() -> (
    None
):
    """The SDK's event field is the server's union plus UnknownEvent, which nothing sends."""
    sdk = _comparable(msgspec.json.schema(domino_sdk.EventLine))
    del sdk["$defs"]["UnknownEvent"]
    event = sdk["$defs"]["EventLine"]["properties"]["event"]
    event["anyOf"].remove({"$ref": "#/$defs/UnknownEvent"})
    del event["discriminator"]["mapping"]["unknown_event"]
    assert sdk == _comparable(msgspec.json.schema(EventLine))


def test_an_event_of_a_type_the_sdk_does_not_know_is_read_as_an_unknown_event() -> None:
    """A newer server's event reaches the bot as UnknownEvent; a known one of the wrong shape
    is an error, not news; a line of an unknown type is skipped."""
    line = decode_line(b'{"type":"event","id":7,"event":{"type":"tile_polished","seat":1}}')
    assert line == domino_sdk.EventLine(
        id=7, event=domino_sdk.UnknownEvent(name="tile_polished", fields={"seat": 1})
    )
    with pytest.raises(msgspec.ValidationError):
        decode_event(b'{"type":"turn_passed","seat":"one"}')
    assert decode_line(b'{"type":"chat","id":8,"text":"gg"}') is None
    newer = b'{"type":"turn_passed","seat":1,"why":"nothing fits"}'  # a field added later
    assert decode_event(newer) == domino_sdk.TurnPassed(seat=1)


def test_the_sdks_names_for_literal_values_are_those_its_generated_structs_take() -> None:
    """model.End, Outcome, EndReason, Family, NextLeader and views.Phase are written for bots
    to annotate with; the generated structs (domino_sdk.wire) are what is read."""
    from domino_sdk import model, views, wire

    def values(struct: Any, name: str) -> set[Any]:
        hint = typing.get_type_hints(struct)[name]
        return {v for arg in (get_args(hint) or (hint,)) for v in get_args(arg) or (arg,)} - {
            type(None)
        }

    assert set(get_args(model.End)) == values(wire.PlayTile, "end")
    assert set(get_args(model.Outcome)) == values(wire.RoundEnded, "outcome")
    assert set(get_args(model.EndReason)) == values(wire.MatchEnded, "reason")
    assert set(get_args(model.Family)) == values(wire.Rules, "family")
    assert set(get_args(model.NextLeader)) == values(wire.Rules, "next_leader")
    assert set(get_args(views.Phase)) == values(wire.View, "phase")


LOBBY: list[tuple[Any, Any]] = [  # the account stream's structs the SDK keeps by hand
    ("Account", "AccountInfo"),
    ("Seek", "SeekInfo"),
    ("Challenge", "ChallengeInfo"),
    ("Challenger", "Challenger"),
    ("Challenged", "Challenged"),
    ("MatchLinks", "MatchLinks"),
    ("SeatLinks", "SeatLinks"),
    ("Registered", "Registered"),
    ("Me", "Me"),
    ("PlayLine", "PlayLine"),
]


@pytest.mark.parametrize(("sdk", "server"), LOBBY, ids=[s for s, _ in LOBBY])
def test_every_field_the_sdks_lobby_structs_read_is_one_the_server_writes(
    sdk: str, server: str
) -> None:
    """domino_sdk.lobby reads the account streams with structs of its own (more lenient: most
    fields have defaults): each field it reads is one the generated struct has."""
    from domino_sdk import lobby, wire

    def names(struct: Any) -> set[str]:
        return {f.encode_name for f in msgspec.structs.fields(struct)}

    assert names(getattr(lobby, sdk)) <= names(getattr(wire, server))


def test_every_account_event_the_sdk_reads_is_a_line_of_the_servers_account_stream() -> None:
    """Same tags, and each field the SDK's account event requires is one the server's line has
    (its base's ``id`` and ``ts`` have defaults: the state and gap lines have no ``ts``)."""
    from domino_sdk import lobby, wire

    ours = {t.__struct_config__.tag: t for t in get_args(lobby.AnyAccountEvent)}
    theirs = {t.__struct_config__.tag: t for t in get_args(wire.AccountLine)}
    assert set(ours) == set(theirs)
    for tag, struct in ours.items():
        mine = {f.encode_name for f in msgspec.structs.fields(struct) if f.required}
        assert mine <= {f.encode_name for f in msgspec.structs.fields(theirs[tag])}, tag
