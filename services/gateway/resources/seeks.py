"""The seek queue: an account waits for a game of a kind (POST /seeks), lists its seeks
(GET /seeks) or withdraws one (DELETE /seeks/{seek_id}); the matchmaker pairs them and the match
comes on the account's stream.
"""

from __future__ import annotations

import msgspec

from services.gateway import spec
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.limits import LimitExceeded, Quota
from services.gateway.lobby_protocol import SeekBody
from services.gateway.protocol import API
from services.lobby.seeks import KINDS, SeekError

SEEK_RETRY_S = 10.0
"""When an account waiting for its most kinds of game may seek again: once one is matched."""
_SEEK = msgspec.json.Decoder(SeekBody)


async def seek(gw: Gateway, request: Request) -> Response:
    """POST /seeks: wait for a game of a kind; the match comes on the account stream."""
    account = await gw.account(request)
    body = decode_body(await request.json_body(gw.config.max_body_bytes), _SEEK, "seek")
    kind = KINDS.get(body.kind)
    if kind is None:
        raise ApiError(422, "unknown_kind", f"kind is one of {', '.join(KINDS)}, not {body.kind!r}")
    await gw.under_cap(account)
    rating = await gw.rating_of(account.id, kind.family)
    most = gw.config.seeks_per_account
    try:
        made, new = await gw.seeks.add(account, kind.name, rating, client=request.client, most=most)
    except SeekError as e:
        if e.code == "seeks_per_account":  # a seek withdrawn or matched frees its place
            quota = Quota(most, 0, SEEK_RETRY_S, SEEK_RETRY_S)
            raise LimitExceeded(e.code, quota, str(e)) from None
        raise ApiError(e.status, e.code, str(e)) from None
    return Response.json({"seek": made.public()}, status=201 if new else 200)


async def seeks(gw: Gateway, request: Request) -> Response:
    """GET /seeks: the account's waiting seeks."""
    account = await gw.account(request)
    return Response.json({"seeks": [s.public() for s in await gw.seeks.mine(account)]})


async def withdraw(gw: Gateway, request: Request) -> Response:
    """DELETE /seeks/{id}."""
    account = await gw.account(request)
    try:
        gone = await gw.seeks.withdraw(account, request.params["seek_id"])
    except SeekError as e:
        raise ApiError(e.status, e.code, str(e)) from None
    return Response.json({"seek": gone.public(), "status": "withdrawn"})


OPERATIONS = (
    Operation(
        method="POST",
        path=f"{API}/seeks",
        handler=seek,
        summary="Wait for a game of a kind; the match comes as `match_started` on "
        "the account stream (house bots fill the seats left after a while)",
        security=spec.ACCOUNT,
        body=SeekBody,
        answers=spec.as_account(
            {
                "200": spec.answer(
                    "the account's seek of that kind, already waiting", spec.ref("SeekAnswer")
                ),
                "201": spec.answer("queued", spec.ref("SeekAnswer")),
                **spec.BODY_ERRORS,
                "422": spec.error(
                    "JSON of the wrong shape, or a kind there is none of",
                    "invalid_seek",
                    "unknown_kind",
                ),
                "409": spec.error("the account plays its most matches at once", "too_many_matches"),
                "429": spec.limited("seeks_per_account", 10.0, "auth_failures"),
            }
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/seeks",
        handler=seeks,
        summary="The account's waiting seeks",
        security=spec.ACCOUNT,
        answers=spec.as_account({"200": spec.answer("the seeks", spec.ref("SeekList"))}),
    ),
    Operation(
        method="DELETE",
        path=f"{API}/seeks/{{seek_id}}",
        handler=withdraw,
        summary="Withdraw a waiting seek",
        security=spec.ACCOUNT,
        parameters=[spec.SEEK],
        answers=spec.as_account(
            {
                "200": spec.answer("withdrawn", spec.ref("Withdrawn")),
                "404": spec.error("no waiting seek of the account by that id", "no_seek"),
            }
        ),
    ),
)
