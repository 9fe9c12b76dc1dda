"""What anyone may watch of a match: its public stream (GET /matches/{match_id}/stream),
the public view as it happens (C8), and its replay (GET /matches/{match_id}/replay), every
event with the view after it, as a spectator or (the match over) one seat saw them.
"""

from __future__ import annotations

import asyncio

import msgspec

from engine.game import evolve
from engine.state import MatchState
from engine.views import redact, view_for
from events.codec import JSON
from events.model import MatchCreated, MatchEnded
from services.gateway import spec
from services.gateway.admission import Held
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.finished import Kept
from services.gateway.http import JSON_TYPE, ApiError, Request, Response
from services.gateway.hub import YIELD_EVERY
from services.gateway.protocol import API, REPLAYED, Replay, ReplayFrame
from services.gateway.query import count_of
from services.gateway.streaming import StreamResponse

RESUMED_CHEAPLY = 200
"""A spectator stream resumed at most this many events behind a match followed here reads so
little of its log that it is not a bulk read (a client back after a drop, or a failover)."""


async def replay(gw: Gateway, request: Request) -> Held:
    """GET /matches/{id}/replay[?seat=k]: every event and the view after it, as everyone
    or (the match over) as one seat saw them (C8). One read of the log, one fold, made
    and written in a place for bulk reads; a finished match's is made once."""
    match_id = gw.match_id_of(request)
    seat = count_of(request, "seat", 0, None, None)
    key = ("replay", match_id, seat)
    place = await gw.bulk.take()
    try:
        kept = gw.finished.get(key)
        if kept is None:
            kept, over = await _replay(gw, match_id, seat)
            if over:
                gw.finished.put(key, kept)
    except BaseException:
        place.release()
        raise
    place.charge(len(kept.body))
    return Held(Response(200, kept.body, [JSON_TYPE]), place)


async def _replay(gw: Gateway, match_id: str, seat: int | None) -> tuple[Kept, bool]:
    """The replay's body, and whether the match is over (its replay never changes)."""
    version = await gw.source.version(match_id)
    if version == 0:
        raise ApiError(404, "no_match", f"no match {match_id!r} (or it has not started)")
    if version > REPLAYED:
        raise ApiError(
            413, "replay_too_long", f"the match has {version} events: {REPLAYED} at most"
        )
    records = await gw.source.read(match_id, 1, version)
    created = JSON.decode_envelope(records[0].data).event
    if not isinstance(created, MatchCreated):
        raise ApiError(404, "no_match", f"the log of {match_id!r} does not open a match")
    over = isinstance(JSON.decode_envelope(records[-1].data).event, MatchEnded)
    if seat is not None:
        if seat >= created.rules.players:
            raise ApiError(404, "no_such_seat", f"seat {seat} does not exist (C3)")
        if not over:
            raise ApiError(
                403, "match_not_over", "a seat's replay shows its hand: once the match is over"
            )
    frames: list[ReplayFrame] = []
    state: MatchState | None = None
    for i, record in enumerate(records):
        env = JSON.decode_envelope(record.data)
        state = evolve(state, env.event)
        frames.append(
            ReplayFrame(id=env.version, event=redact(env.event, seat), view=view_for(state, seat))
        )
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)  # a long match: let play have the loop a while
    replay = Replay(
        match_id=match_id, seat=seat, status="finished" if over else "live", frames=frames
    )
    return Kept(msgspec.json.encode(replay)), over


async def spectate(gw: Gateway, request: Request) -> StreamResponse | Held:
    """GET /matches/{id}/stream: the public view (C8), as it happens. Opening one that
    reads much of the log (resumed more than RESUMED_CHEAPLY events back, or of a match
    not followed here yet) is a bulk read: it takes a place while it opens, and while it
    writes a finished match. A spectator resuming a followed match after a drop is not."""
    match_id = gw.match_id_of(request)
    after = gw.resume_point(request)
    sse = gw.wants_sse(request)
    everything = gw.wants_everything(request)
    views = gw.wants_views(request)
    feed = gw.hub.feeds.get(match_id)
    if feed is not None and (after is None or feed.version - after <= RESUMED_CHEAPLY):
        return await _spectate(gw, match_id, after, sse, everything, views, request)
    place = await gw.bulk.take()
    try:
        stream = await _spectate(gw, match_id, after, sse, everything, views, request)
    except BaseException:
        place.release()
        raise
    if stream.feed.over:  # its backlog is all it writes: the place is held meanwhile
        place.charge(sum(len(lines) for lines in stream.first))
        return Held(stream, place)
    place.release()
    return stream


async def _spectate(
    gw: Gateway,
    match_id: str,
    after: int | None,
    sse: bool,
    everything: bool,
    views: bool,
    request: Request,
) -> StreamResponse:
    if match_id not in gw.hub.feeds:
        exists = await gw.lobby.get(match_id) is not None
        if not exists and await gw.source.version(match_id) == 0:
            raise ApiError(404, "no_match", f"no match {match_id!r}")
    release = await gw.places((gw.public_streams, request.client))
    try:
        return await gw.open_stream(match_id, None, sse, after, everything, release, views=views)
    except BaseException:
        release()
        raise


OPERATIONS = (
    Operation(
        method="GET",
        path=f"{API}/matches/{{match_id}}/stream",
        handler=spectate,
        summary="The public stream: the public view and events (hands at round end)",
        parameters=[spec.MATCH, *spec.STREAM_PARAMS],
        answers={
            "200": spec.stream("the public lines (never a turn line)"),
            "400": spec.error("a resume point that is no id of the match", "bad_resume"),
            "404": spec.error("no such match", "no_match"),
            "422": spec.error("an unknown format, events or views", "invalid_query"),
            "429": spec.limited("streams_per_client", 1.0, "bulk_reads"),
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/matches/{{match_id}}/replay",
        handler=replay,
        summary="Replay a match: each event and the view just after it, as a "
        "spectator sees them (C8) or, once the match is over, as one seat did",
        description="Frame v's view is what `domino replay ID --at v [--seat K] "
        f"--json` prints last. A log of more than {REPLAYED} events is not replayed "
        "(413).",
        parameters=[
            spec.MATCH,
            {
                "name": "seat",
                "in": "query",
                "description": "the seat whose view to show (the match must be over)",
                "schema": {"type": "integer", "minimum": 0},
            },
        ],
        answers={
            "200": spec.answer("every event, from 1, with the view after it", spec.ref("Replay")),
            "403": spec.error(
                "a seat's replay of a match not over (it would show a live hand)",
                "match_not_over",
            ),
            "404": spec.error(
                "no such match (or not started), or seat", "no_match", "no_such_seat"
            ),
            "409": spec.CORRUPT,
            "413": spec.error(f"a log of more than {REPLAYED} events", "replay_too_long"),
            "422": spec.error("a seat that is no whole number", "invalid_query"),
            "429": spec.BULK,
            "503": spec.UNAVAILABLE,
        },
    ),
)
