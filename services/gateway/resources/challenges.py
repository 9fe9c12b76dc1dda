"""Challenges: an account challenges named accounts (or house bot pools) to a
match (POST /challenges), lists its own (GET /challenges), and those challenged accept,
decline, or the challenger withdraws it (POST /challenges/{challenge_id}/accept, /decline,
/cancel). The last acceptance starts the match.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import msgspec
import structlog

from engine.rules import Rules
from engine.strategy import STRATEGIES
from services.core.commands import new_match_id
from services.gateway import spec
from services.gateway.commands import Gateway
from services.gateway.declare import Operation
from services.gateway.http import ApiError, Request, Response, decode_body
from services.gateway.lobby_protocol import ChallengeBody
from services.gateway.protocol import API
from services.lobby.accounts import Account
from services.lobby.challenges import Challenge, ChallengeError, check_seats

log = structlog.get_logger()

_CHALLENGE = msgspec.json.Decoder(ChallengeBody)
_NO_CHALLENGE = spec.error("no such challenge that names this account", "no_challenge")
_CLOSED = spec.error("the challenge is no longer open", "challenge_closed")


async def challenge(gw: Gateway, request: Request) -> Response:
    """POST /challenges: challenge named accounts to a match, or house bot pools (named as
    pools: the match starts at once)."""
    await gw.lobby_write(request)
    account = await gw.account(request)
    body = decode_body(await request.json_body(gw.config.max_body_bytes), _CHALLENGE, "challenge")
    players = body.rules.players or len(body.opponents) + 1
    rules = gw.rules_of(body.rules, players)
    deadline = gw.deadline_of(body.deadline_ms, open_seats=True)
    await gw.under_cap(account)
    if body.opponents and all(name in STRATEGIES for name in body.opponents):
        return await _against_house(gw, request, account, body.opponents, rules, deadline)
    challenges, limits, redis = gw.challenges, gw.lobby_limits, gw.redis
    try:
        made = await challenges.prepare(account, body.opponents, rules, deadline)
    except ChallengeError as e:
        raise ApiError(e.status, e.code, str(e)) from None
    await limits.challenge(redis, made)  # LimitExceeded: 429, nothing made
    try:
        await challenges.open(made)
    except BaseException:
        await limits.challenge_closed(redis, made.id)
        raise
    log.info("challenge made", challenge=made.id, account=account.id)
    return Response.json({"challenge": made.public()}, status=201)


async def _against_house(
    gw: Gateway, request: Request, account: Account, pools: list[str], rules: Rules, deadline: int
) -> Response:
    """A challenge of house bot pools only: the house always accepts, so the match starts
    at once, counted against the account's and the address's house matches. Answered as
    a challenge already started (it is kept nowhere: there is nothing left to answer)."""
    try:
        check_seats(pools, rules)
    except ChallengeError as e:
        raise ApiError(e.status, e.code, str(e)) from None
    await gw.check_pools(pools)
    limits, redis = gw.lobby_limits, gw.redis
    match_id = new_match_id()
    counted = await limits.house_match(  # LimitExceeded: 429, nothing made
        redis, match_id, [account.id], [request.client], gw.match_over
    )
    try:
        seats: list[Account | str] = [account, *pools]
        await gw.start_for(rules, seats, deadline, creator=account.id, match_id=match_id)
    except BaseException:
        await limits.house_match_failed(redis, counted)
        raise
    started = Challenge.against_house(account, pools, rules, deadline, match_id)
    log.info("house challenge started", challenge=started.id, match_id=match_id)
    return Response.json({"challenge": started.public()}, status=201)


async def challenges(gw: Gateway, request: Request) -> Response:
    """GET /challenges: the account's challenges, made and received."""
    account = await gw.account(request)
    return Response.json({"challenges": [c.public() for c in await gw.challenges.mine(account)]})


async def accept(gw: Gateway, request: Request) -> Response:
    """POST /challenges/{id}/accept: when the last one named accepts, the match starts."""
    account = await gw.account(request)
    await gw.under_cap(account)
    challenge_id = request.params["challenge_id"]
    try:
        challenge, ready = await gw.challenges.accept(account, challenge_id)
    except ChallengeError as e:
        raise ApiError(e.status, e.code, str(e)) from None
    if ready:
        found = [await gw.accounts.get(a) for a in challenge.seats]
        seats: list[Account | str] = [a for a in found if a is not None]
        match_id = None
        try:
            if len(seats) == len(challenge.seats):
                match = await gw.start_for(
                    challenge.rules, seats, challenge.deadline_ms, creator=challenge.challenger
                )
                match_id = match.match_id
        finally:
            await gw.challenges.started(challenge.id, match_id)
            await gw.lobby_limits.challenge_closed(gw.redis, challenge.id)
        if match_id is None:
            raise ApiError(409, "challenge_failed", "an account of the challenge is gone")
        challenge = msgspec.structs.replace(challenge, status="started", match_id=match_id)
        log.info("challenge started", challenge=challenge.id, match_id=match_id)
    return Response.json({"challenge": challenge.public()})


async def decline(gw: Gateway, request: Request) -> Response:
    """POST /challenges/{id}/decline."""
    account = await gw.account(request)
    return await _answer(gw, gw.challenges.decline(account, request.params["challenge_id"]))


async def cancel(gw: Gateway, request: Request) -> Response:
    """POST /challenges/{id}/cancel (the challenger)."""
    account = await gw.account(request)
    return await _answer(gw, gw.challenges.cancel(account, request.params["challenge_id"]))


async def _answer(gw: Gateway, answer: Awaitable[Any]) -> Response:
    try:
        challenge = await answer
    except ChallengeError as e:
        raise ApiError(e.status, e.code, str(e)) from None
    await gw.lobby_limits.challenge_closed(gw.redis, challenge.id)
    return Response.json({"challenge": challenge.public()})


OPERATIONS = (
    Operation(
        method="POST",
        path=f"{API}/challenges",
        handler=challenge,
        summary="Challenge named accounts: the challenger sits at seat 0, the "
        "challenged in the order named; the match starts when the last one accepts. "
        "Opponents that are all house bot pools (`greedy`, `random`, ...) always accept: "
        "the match starts at once, and the answer is the challenge started",
        security=spec.ACCOUNT,
        body=ChallengeBody,
        answers=spec.as_account(
            {
                "201": spec.answer(
                    "made; those named get a `challenge` event (house pools: started, "
                    "with its `match_id`)",
                    spec.ref("ChallengeAnswer"),
                ),
                **spec.BODY_ERRORS,
                "404": spec.error("no account of a name given", "no_account"),
                "409": spec.error(
                    "an account named is banned, the challenger plays its most "
                    "matches at once, or no worker of a house pool named is running",
                    "account_banned",
                    "too_many_matches",
                    "pool_unavailable",
                ),
                "422": spec.refused(
                    "JSON of the wrong shape, a bad deadline_ms, or opponents that do not "
                    "fill the rules' seats or repeat (`Error`), or rules the engine will "
                    "not play (`RejectedError`: bad_rules, with the rule)",
                    "invalid_challenge",
                    "invalid_match",
                    "bad_players",
                ),
                "429": spec.limited(
                    "lobby_per_second",
                    0.2,
                    "challenges_per_minute",
                    "challenges_received_per_minute",
                    "open_challenges_per_account",
                    "open_challenges_to_account",
                    "open_challenges_per_pair",
                    "house_matches_per_account",
                    "house_matches_per_client",
                    "auth_failures",
                ),
            }
        ),
    ),
    Operation(
        method="GET",
        path=f"{API}/challenges",
        handler=challenges,
        summary="The account's challenges, made and received, newest first: every "
        "open one, and the latest closed within the hour",
        security=spec.ACCOUNT,
        answers=spec.as_account({"200": spec.answer("the challenges", spec.ref("ChallengeList"))}),
    ),
    Operation(
        method="POST",
        path=f"{API}/challenges/{{challenge_id}}/accept",
        handler=accept,
        summary="Accept a challenge made to the account; the last acceptance starts "
        "the match (`match_id` in the answer, `match_started` on every account's stream)",
        security=spec.ACCOUNT,
        parameters=[spec.CHALLENGE],
        answers=spec.as_account(
            {
                "200": spec.answer("accepted", spec.ref("ChallengeAnswer")),
                "403": spec.error(
                    "the challenge was not made to this account, or the account is banned",
                    "not_challenged",
                    "account_banned",
                ),
                "404": _NO_CHALLENGE,
                "409": spec.refused(
                    "closed (answered, withdrawn, expired), the account plays its most "
                    "matches at once, an account of it is gone, or the referee refused to "
                    "create the match",
                    "challenge_closed",
                    "too_many_matches",
                    "challenge_failed",
                ),
            }
        ),
    ),
    Operation(
        method="POST",
        path=f"{API}/challenges/{{challenge_id}}/decline",
        handler=decline,
        summary="Decline a challenge made to the account: it is closed",
        security=spec.ACCOUNT,
        parameters=[spec.CHALLENGE],
        answers=spec.as_account(
            {
                "200": spec.answer("declined", spec.ref("ChallengeAnswer")),
                "403": spec.error(
                    "the challenge was not made to this account, or the account is banned",
                    "not_yours",
                    "account_banned",
                ),
                "404": _NO_CHALLENGE,
                "409": _CLOSED,
            }
        ),
    ),
    Operation(
        method="POST",
        path=f"{API}/challenges/{{challenge_id}}/cancel",
        handler=cancel,
        summary="Withdraw a challenge the account made",
        security=spec.ACCOUNT,
        parameters=[spec.CHALLENGE],
        answers=spec.as_account(
            {
                "200": spec.answer("withdrawn", spec.ref("ChallengeAnswer")),
                "403": spec.error(
                    "the challenge is another account's, or the account is banned",
                    "not_yours",
                    "account_banned",
                ),
                "404": _NO_CHALLENGE,
                "409": _CLOSED,
            }
        ),
    ),
)
