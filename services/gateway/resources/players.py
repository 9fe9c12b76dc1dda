"""The standings: a game family's ratings (GET /ratings) and one player's results,
ratings and latest matches (GET /players/{key}): the compacted ratings table with the results
after it rated on top, and a player's older matches from the archive
(services/projections/history.py says what a player's page shows).
"""

from __future__ import annotations

from services.gateway import spec
from services.gateway.commands import FAMILIES, Gateway
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response
from services.gateway.protocol import (
    API,
    NAME_CHARS,
    RECENT,
    PlayerAnswer,
    PlayerResults,
    RatingsAnswer,
    RecentMatch,
)
from services.gateway.query import count_of, cursor_of
from services.projections.history import HISTORY, older_points, played
from services.projections.identity import kind_of, shown_name
from services.projections.queries import Queries
from services.projections.ratings import MatchResult, RatingsProjector

KEY_CHARS = 6 + NAME_CHARS
"""The longest player key: guest: and a name (an account id, house: and a pool are shorter)."""
STANDINGS_FRESH_S = 5.0
"""How long the ratings and players pages are answered from one fold of the results."""


async def ratings(gw: Gateway, request: Request) -> Response:
    """GET /ratings?family=express|straight: a family's ratings table, best first."""
    asked = request.query("family")
    family = FAMILIES.get("express" if asked is None else asked)  # ?family= is no family
    if family is None:
        raise ApiError(422, "invalid_query", "family is express or straight")
    table = (await gw.standings(STANDINGS_FRESH_S)).table
    rows = [r for r in table if r.family == family]
    return Response.json(RatingsAnswer(family=family, ratings=rows))


async def player(gw: Gateway, request: Request) -> Response:
    """GET /players/{key}[?limit=n][&cursor=c]: an identity's results, ratings, their
    history and a page of its latest matches, read from its own index (key: an account id,
    house:<pool> or guest:<name>)."""
    key: str = request.params["key"]
    if not 0 < len(key) <= KEY_CHARS:  # no key is longer: nothing to look up
        raise ApiError(404, "no_player", "no player has a key like that")
    limit = count_of(request, "limit", 1, RECENT, RECENT)
    cursor = cursor_of(request)
    folded = await gw.standings(STANDINGS_FRESH_S)
    line = await Queries(gw.redis, gw.settings).result(key)
    projector = RatingsProjector(gw.store, gw.checkpoints())
    archive = gw.source.archive
    recent, after = await played(gw.redis, projector, archive, key, limit, cursor)
    since = folded.played.get(key, [])
    if line is None and not since and not recent:
        raise ApiError(404, "no_player", f"no player {key!r} has played here")
    if line is not None:
        name = line.name
    else:
        last = recent[0] if recent else since[-1]
        name = shown_name(key, last.players[last.keys().index(key)])
    history = folded.history.get(key, [])[-HISTORY:]
    if archive is not None and len(history) < HISTORY:  # the older points, of the pages
        history = await older_points(archive, key, HISTORY - len(history)) + history
    results = PlayerResults()
    if line is not None:
        results = PlayerResults(**{f: getattr(line, f) for f in PlayerResults.__struct_fields__})
    return Response.json(
        PlayerAnswer(
            key=key,
            name=name,
            kind=kind_of(key),
            results=results,
            ratings=[r for r in folded.table if r.key == key],
            history=history,
            recent=[_recent(r, key) for r in recent],
            next=None if after is None else after.text(),
        )
    )


def _recent(result: MatchResult, key: str) -> RecentMatch:
    """A finished match as an identity's latest matches list it."""
    return RecentMatch(
        match_id=result.match_id,
        ended=result.ended,
        family=result.family,
        players=list(result.players),
        seats=[s for s, k in enumerate(result.keys()) if k == key],
        sides=list(result.sides),
        scores=list(result.scores),
        winner=result.winner,
        reason=result.reason,
    )


OPERATIONS = (
    Operation(
        method="GET",
        path=f"{API}/ratings",
        handler=ratings,
        bulk=True,
        summary="A game family's ratings: accounts and house bot pools, best first",
        description="Folded from every finished match's result in the order the "
        "matches ended (the compacted table, and the results after its checkpoint rated on "
        "top); the gateway answers from one fold for a few seconds.",
        parameters=[spec.FAMILY_FILTER],
        answers={
            "200": spec.answer("the family's table", spec.ref("RatingsAnswer")),
            "422": spec.error("an unknown family", "invalid_query"),
            "429": spec.BULK,
            "503": spec.UNAVAILABLE,
        },
    ),
    Operation(
        method="GET",
        path=f"{API}/players/{{key}}",
        handler=player,
        converters={"key": "path"},
        bulk=True,
        summary="One player: its results, ratings, their history and a page of its "
        f"latest matches ({RECENT} at most)",
        description="`recent` is a page, newest first, read from the player's own "
        "index (its latest matches in Redis, the older ones from the archive's pages); "
        "`next` is the cursor of the page of older matches (pass it as `cursor`), null on "
        f"the last. `history` is its rating after each of its latest {HISTORY} rated "
        "matches at most.",
        parameters=[
            spec.path_param(
                "key",
                "an account id, house:<pool> or guest:<name>, URL-encoded",
            ),
            *spec.page_params(RECENT, "at most this many recent matches", "none: the latest"),
        ],
        answers={
            "200": spec.answer("the player", spec.ref("PlayerAnswer")),
            "422": spec.error(
                f"a limit out of 1 to {RECENT}, or a cursor no page answered",
                "invalid_query",
            ),
            "404": spec.error(
                "nobody of that key has played here (a key with a line break is no path at all)",
                "no_player",
                "not_found",
            ),
            "429": spec.BULK,
            "503": spec.UNAVAILABLE,
        },
    ),
)
