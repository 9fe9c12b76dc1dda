"""The gateway's commands: the send/await of a command on its match's command stream (one
flight per command id, a rejection answered, a lost answer found in the dedupe), a seat's
move as POST /moves and the seat's socket both play it (:meth:`Gateway.play_move`), and the
matches it starts, with the rules and deadlines it allows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import msgspec
import structlog

from engine.rules import Family, NextLeader, Rules, RulesError
from engine.strategy import STRATEGIES
from events.codec import JSON
from events.model import (
    Abort,
    AnyEvent,
    CreateMatch,
    DrawTile,
    MatchEnded,
    Move,
    PassTurn,
    PlayTile,
    Rejection,
    Resign,
    RoundEnded,
    TileDrawn,
    TilePlayed,
    TurnPassed,
)
from services.bots.worker import pool_served
from services.config import Settings
from services.core.commands import new_match_id
from services.gateway.config import GatewaySettings
from services.gateway.core import Core
from services.gateway.http import ApiError, decode_body
from services.gateway.hub import Flight, Outcome
from services.gateway.limits import Charge, LimitExceeded, release_match
from services.gateway.protocol import (
    AbortBody,
    DrawBody,
    MoveBody,
    PassBody,
    PlayBody,
    ResignBody,
    RulesBody,
)
from services.gateway.sender import INFLIGHT
from services.lobby.accounts import Account
from services.lobby.arena import Pairing
from services.lobby.arenas import Arena
from services.lobby.seeks import Group, Kind, Seek
from services.lobby.tables import LobbyMatch
from services.metrics import GATEWAY_MOVES
from services.projections.ratings import RatingsProjector, Standings, read_standings

log = structlog.get_logger()


_MOVE = msgspec.json.Decoder(MoveBody)
FAMILIES: dict[str, Family] = {"express": "express", "straight": "straight"}
_NEXT_LEADERS: dict[str, NextLeader] = {"after_winner": "after_winner", "rotate": "rotate"}
T = TypeVar("T")
RATINGS_FRESH_S = 30.0
"""How long the seek queue uses a ratings table before reading it again."""
_MOVES = {outcome: GATEWAY_MOVES.labels(outcome) for outcome in ("accepted", "rejected", "timeout")}


class Gateway(Core):
    """The gateway: its state (:class:`Core`), and the commands it sends on it — a seat's
    move, a match created or cancelled — and the matches it starts (the lobby's, a
    challenge's, a seek's, an arena's pairing); the handlers of services/gateway/resources/
    take it as their first argument."""

    def __init__(
        self,
        settings: Settings,
        config: GatewaySettings,
        redis_url: str,
        document: Callable[[], dict[str, Any]],
    ) -> None:
        super().__init__(settings, config, redis_url, document)
        self._ratings: dict[tuple[str, str], float] = {}
        self._standings = Standings(table=[], history={}, played={})
        self._standings_at = -RATINGS_FRESH_S
        self._folding = asyncio.Lock()  # one fold of the results at a time

    async def await_command(
        self, match_id: str, command_id: str, command: Any, charge: Charge | None = None
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command and wait for its outcome; (None, versions) if it was applied before,
        (None, None) if no answer came in time. A ``charge`` counts it against its limit as
        it is sent (LimitExceeded: not sent); give it only when no copy is on its way.

        A command whose id is already on its way from here is not sent again: it waits for
        that one's outcome and is its replay (an Outcome with ``replayed``), or shares its
        rejection. Another command under the same id is sent only if that one was not applied.
        """
        flights = self.hub.flights
        while (flight := flights.get((match_id, command_id))) is not None:
            first = await asyncio.shield(flight.outcome)
            if first.version is not None:
                return Outcome(version=first.version, replayed=True), None
            if flight.command == command:
                return (None if first.rejection is None else first), None
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        flights[(match_id, command_id)] = Flight(command, answer)
        try:
            outcome, done = await self._send(match_id, command_id, command, charge)
        except BaseException:
            answer.set_result(Outcome())  # its copies are answered "no answer": they retry
            raise
        finally:
            del flights[(match_id, command_id)]
        if outcome is not None:
            answer.set_result(outcome)
        else:  # applied before (done), or no answer in time (neither)
            answer.set_result(Outcome() if done is None else Outcome(_first(done), replayed=True))
        return outcome, done

    async def _send(
        self, match_id: str, command_id: str, command: Any, charge: Charge | None = None
    ) -> tuple[Outcome | None, bytes | None]:
        """Send a command once and wait for its outcome, as :meth:`await_command` answers.

        A rejection of a command whose id is applied all the same (a copy sent through another
        gateway, or before a lost answer) is no rejection: the move is in the log, and this
        copy is its replay.
        """
        hub = self.hub
        fut = hub.expect(match_id, command_id)
        try:
            done = await self.sender.send(match_id, command_id, command, charge)
            copy = done == INFLIGHT  # another gateway sent it: its outcome, as a replay
            if done is not None and not copy:
                return None, done
            # no answer in time is an empty Outcome: the answer may be lost or late, and the
            # store knows
            outcome = await hub.outcome(fut, self.config.move_timeout_s)
            if outcome.version is not None:
                return (Outcome(outcome.version, replayed=True) if copy else outcome), None
            done = cast(bytes | None, await self.redis.hget(self.topo.dedupe(match_id), command_id))
            if done is not None:
                replayed = copy or outcome.rejection is not None
                return Outcome(version=_first(done), replayed=replayed), None
            if outcome.rejection is not None:  # refused: the id is free for a retry
                await self.redis.delete(self.topo.inflight(match_id, command_id))
            return (None if outcome.rejection is None else outcome), None
        finally:
            hub.forget(match_id, command_id, fut)

    async def start_match(self, match: LobbyMatch) -> None:
        """Every seat is taken: create the match in the log (once, whoever calls it)."""
        await release_match(self.redis, self.topo, match.match_id)  # its holds end as it starts
        command = CreateMatch(
            rules=match.rules,
            players=match.names,
            bots=match.pools,
            deadline_ms=match.deadline_ms,
            accounts=match.accounts if any(match.accounts) else (),
            forfeit_after=match.forfeit_after,
            max_rounds=match.max_rounds,
        )
        outcome, _ = await self.await_command(match.match_id, f"create:{match.match_id}", command)
        if outcome is not None and outcome.rejection is not None:
            log.error(
                "match could not be created",
                match_id=match.match_id,
                reason=outcome.rejection.reason,
                detail=outcome.rejection.message,
            )
            raise ApiError(409, "rejected", outcome.rejection.message, **why(outcome.rejection))
        log.info("lobby match started", match_id=match.match_id, players=match.names)
        for account in dict.fromkeys(a for a in match.accounts if a is not None):
            seats = [s for s, a in enumerate(match.accounts) if a == account]
            await self.feeds.started(
                account,
                match.match_id,
                {
                    "seats": seats,
                    "rules": msgspec.to_builtins(match.rules),
                    "players": list(match.names),
                    "deadline_ms": match.deadline_ms,
                    "links": {
                        **self.links(match.match_id),
                        "seats": {str(s): self.links(match.match_id, s) for s in seats},
                    },
                },
            )

    async def start_for(
        self,
        rules: Rules,
        seats: list[Account | str],
        deadline_ms: int | None = None,
        creator: str = "",
        match_id: str | None = None,
    ) -> LobbyMatch:
        """Start a match now whose seats are held by these accounts and house pools (a str is
        a pool): the lobby record, the match, and each account told on its feed."""
        match_id = match_id or new_match_id()
        await self.check_pools([a for a in seats if isinstance(a, str)])
        accounts = tuple(a.id if isinstance(a, Account) else None for a in seats)
        pools = tuple(None if isinstance(a, Account) else a for a in seats)
        names = tuple(a.name if isinstance(a, Account) else a for a in seats)
        match = await self.lobby.create(
            match_id,
            rules,
            pools,
            names,
            self.config.default_deadline_ms if deadline_ms is None else deadline_ms,
            accounts=accounts,
            creator=creator,
            forfeit_after=self.config.forfeit_after,
            max_rounds=self.config.max_rounds,
        )
        await self.start_match(match)
        return match

    async def start_arena(self, arena: Arena, pairing: Pairing, match_id: str) -> None:
        """The arenas' starter: the match of a pairing, its seats by entrant (an account, or
        house:<pool>)."""
        seats: list[Account | str] = []
        for key in pairing.seats:
            if key.startswith("house:"):
                seats.append(key.removeprefix("house:"))
            elif (account := await self.accounts.get(key)) is not None:
                seats.append(account)
            else:
                raise ValueError(f"arena entrant {key!r} has no account")
        await self.start_for(
            arena.rules, seats, arena.deadline_ms or None, creator="arena", match_id=match_id
        )

    async def start_seek(self, kind: Kind, group: Group) -> str | None:
        """The matchmaker's starter: a match for a group of seeks (house bots fill the rest,
        counted for each seek's account and address: none if one is at its limit)."""
        found = [await self.accounts.get(s.account) for s in group.seeks]
        seats: list[Account | str] = [a for a in found if a is not None and not a.banned]
        seats += [self.config.seek_house_pool] * (kind.players - len(seats))
        match_id = new_match_id()
        counted = []
        if len(group.seeks) < kind.players:
            try:
                counted = await self.lobby_limits.house_match(
                    self.redis,
                    match_id,
                    [s.account for s in group.seeks],
                    [s.client for s in group.seeks],
                    self.match_over,
                )
            except LimitExceeded as e:
                log.info("seek not filled with house bots", kind=kind.name, limit=e.limit)
                return None
        try:
            match = await self.start_for(kind.rules(), seats, match_id=match_id)
        except ApiError as e:
            log.error("seek match could not start", kind=kind.name, error=str(e))
            await self.lobby_limits.house_match_failed(self.redis, counted)
            return None
        return match.match_id

    async def may_fill(self, seek: Seek) -> bool:
        """Whether house bots may fill ``seek``: its account and address are under their
        limits of house matches not over."""
        return await self.lobby_limits.may_fill(
            self.redis, seek.account, seek.client, self.match_over
        )

    async def match_over(self, match_id: str) -> bool:
        """Whether a match is over: its log ends it, or it never started and has left the
        lobby (cancelled, expired)."""
        version = await self.source.version(match_id)
        if version == 0:
            waiting = await self.lobby.get(match_id)
            return waiting is None or waiting.status == "cancelled"
        last = await self.source.read(match_id, version, version)
        return not last or last[0].type == "match_ended"

    def rules_of(self, body: RulesBody, players: int) -> Rules:
        """The rules a create or a challenge asks for, within the service's caps."""
        try:
            rules = Rules.make(
                _option(FAMILIES, "family", body.family),
                players=players,
                partners=body.partners,
                top=body.top,
                target=body.target,
                next_leader=_option(_NEXT_LEADERS, "next_leader", body.next_leader),
                reveal_stock=body.reveal_stock,
            )
        except RulesError as e:
            raise ApiError(422, "rejected", str(e), reason="bad_rules", rule=e.rule) from None
        if rules.target > self.config.max_target:
            raise ApiError(
                422,
                "rejected",
                f"target is at most {self.config.max_target} on this service",
                reason="bad_rules",
                rule="E6" if rules.family == "express" else "S7",  # the target option's rule
            )
        return rules

    def deadline_of(self, asked: int | None, open_seats: bool) -> int:
        """Each turn's limit: what was asked, within bounds; the default when nothing was. A
        match with outside players always has one, so a player who leaves cannot freeze it."""
        if asked is None:
            return self.config.default_deadline_ms if open_seats else 0
        if asked == 0 and not open_seats:
            return 0
        low, high = 200, self.config.max_deadline_ms
        if not low <= asked <= high:
            raise ApiError(
                422,
                "invalid_match",
                f"deadline_ms is {low} to {high}"
                + ("" if open_seats else " (or 0: no limit between house bots)"),
            )
        return asked

    async def check_pools(self, seats: Sequence[str | None]) -> None:
        """Refuse house pools nobody serves: their seats would never move."""
        for pool in dict.fromkeys(p for p in seats if p is not None):
            if pool not in STRATEGIES:
                known = ", ".join(sorted(STRATEGIES))
                raise ApiError(
                    422, "unknown_pool", f"no house bot pool {pool!r}: the pools are {known}"
                )
            if not await pool_served(self.redis, self.topo, pool):
                raise ApiError(
                    409, "pool_unavailable", f"no worker of the house pool {pool!r} is running"
                )

    async def under_cap(self, account: Account) -> None:
        """Refuse (409) an account already playing its most matches at once."""
        live = await self.feeds.live(account.id)
        cap = self.config.matches_per_account
        if len(live) >= cap:
            raise ApiError(
                409,
                "too_many_matches",
                f"{account.name} is playing {len(live)} matches; {cap} at once at most",
            )

    async def rating_of(self, account_id: str, family: str) -> float:
        """The account's rating (ordinal) in a family; 0 for one not rated yet."""
        await self.standings(RATINGS_FRESH_S)
        return self._ratings.get((family, account_id), 0.0)

    async def standings(self, fresh_s: float) -> Standings:
        """The ratings (the compacted table, and the results after it rated on top), no older
        than ``fresh_s`` seconds: one fold at a time, shared by every caller, made off the
        event loop."""
        if time.monotonic() - self._standings_at > fresh_s:
            async with self._folding:
                if time.monotonic() - self._standings_at > fresh_s:  # nobody did it meanwhile
                    started = time.monotonic()
                    projector = RatingsProjector(self.store, self.checkpoints())
                    folded = await read_standings(self.redis, projector)
                    self._ratings = {(r.family, _rated_key(r)): r.ordinal for r in folded.table}
                    self._standings, self._standings_at = folded, started
        return self._standings

    def move_charge(self, match_id: str, seat: int) -> Charge:
        """How a move of the seat is counted: every request counts, per seat, and none is sent
        while the seat has had too many moves rejected lately. Both are the seat's own: a match
        sending bad moves never holds up a legal one its account makes in another."""
        limited = f"{match_id}:{seat}"
        return Charge(self.moves, limited, [(self.rejected_moves, limited)])

    async def play_move(
        self, match_id: str, seat: int, key: str, raw: bytes, charge: Charge
    ) -> Outcome:
        """Play the move ``raw`` (a ``Move`` body, JSON) for an authorised seat under the
        Idempotency-Key ``key``, as POST /moves and the seat's socket both do: accepted at a
        version (``replayed`` when this key was applied before), rejected, or no answer in time
        (neither). Raises ApiError when ``raw`` is no move of the seat or ``key`` was used for
        another move, LimitExceeded over a limit. A move is counted by ``charge`` in the call
        that sends it; one that is no move, or a copy of one on its way, on its own first."""
        try:
            body = decode_body(raw, _MOVE, "move")
            if body.seat is not None and body.seat != seat:
                raise ApiError(
                    403, "wrong_seat", f"this token plays seat {seat}, not seat {body.seat}"
                )
        except ApiError:
            await charge.hit(self.redis)
            raise
        command = _command(body, seat)
        command_id = f"gw:{seat}:{key}"
        if (match_id, command_id) in self.hub.flights:
            await charge.hit(self.redis)
            outcome, done = await self.await_command(match_id, command_id, command)
        else:
            outcome, done = await self.await_command(match_id, command_id, command, charge)
        if outcome is not None and outcome.rejection is not None:
            _MOVES["rejected"].inc()
            log.debug(
                "move rejected", match_id=match_id, seat=seat, reason=outcome.rejection.reason
            )
            await self.rejected_moves.count(self.redis, f"{match_id}:{seat}")
            return outcome
        if outcome is None and done is not None:
            outcome = Outcome(version=_first(done), replayed=True)
        if outcome is None or outcome.version is None:
            _MOVES["timeout"].inc()
            return Outcome()
        version = outcome.version
        if outcome.replayed:  # what was applied under this key must be this very move
            records = await self.source.read(match_id, version, version)
            if records and not _same_move(JSON.decode_envelope(records[0].data).event, command):
                raise ApiError(
                    409,
                    "idempotency_key_reused",
                    f"Idempotency-Key {key!r} was already used for a different move",
                )
        _MOVES["accepted"].inc()
        return outcome


def _command(
    body: PlayBody | DrawBody | PassBody | ResignBody | AbortBody, seat: int
) -> Move | Resign | Abort:
    if isinstance(body, PlayBody):
        return PlayTile(seat=seat, tile=body.tile, end=body.end)
    if isinstance(body, DrawBody):
        return DrawTile(seat=seat)
    if isinstance(body, ResignBody):
        return Resign(seat=seat)
    if isinstance(body, AbortBody):
        return Abort(seat=seat)
    return PassTurn(seat=seat)


def _rated_key(rating: Any) -> str:
    """The identity a ratings row is for (its account id, or house:<pool>)."""
    return str(getattr(rating, "key", rating.name))


def _same_move(event: AnyEvent, command: Move | Resign | Abort) -> bool:
    """Whether the event an earlier command made is what ``command`` asks for."""
    if isinstance(command, Resign | Abort):
        return isinstance(event, MatchEnded | RoundEnded)
    if isinstance(command, PlayTile):
        return (
            isinstance(event, TilePlayed)
            and tuple(sorted(event.tile)) == tuple(sorted(command.tile))
            and (command.end is None or command.end == event.end)
        )
    if isinstance(command, DrawTile):
        return isinstance(event, TileDrawn)
    return isinstance(event, TurnPassed)


def _option(choices: Mapping[str, T], name: str, value: str) -> T:
    """The rule option ``value`` names; raises RulesError naming the choices if it is none."""
    choice = choices.get(value)
    if choice is None:
        raise RulesError(f"{name} must be {' or '.join(choices)}, not {value!r}")
    return choice


def _first(done: bytes) -> int:
    """The first version an applied command made, from its dedupe entry ``first:last``."""
    return int(done.split(b":")[0])


def why(r: Rejection) -> dict[str, str]:
    """The engine's reason and rule, for an error body."""
    return {"reason": r.reason, "rule": r.rule}
