"""Arenas on Redis: the operator's events for outside bots (and house pools), their entrants,
their schedule, their results, and a stream of what happens in them.

The schedule and the standings are the pure engine's (:mod:`services.lobby.arena`); this module
keeps its state and says what is due. An arena is ``open`` (taking entrants), then ``running``
(from :meth:`Arenas.start`), then ``finished`` (every match it will have has been played). The
caller that creates matches asks :meth:`Arenas.due` what to start now, reports each match it
made with :meth:`Arenas.started` and each end with :meth:`Arenas.finished`.

Keys, all with the arena id's hash tag, so every change is one script on one slot:

    arena:<id>            hash: name, rules, spec, deadline_ms, status, created, started,
                          ended, roster (entrants at the start), version, n (feed counter)
    arena:<id>:entrants   hash: entrant key -> {"name", "joined", "left"}
    arena:<id>:rounds     hash: round number -> the round (pairings and byes)
    arena:<id>:games      hash: pairing id -> {"match_id", "claimed_until", "started",
                          "finished", "result"}
    arena:<id>:matches    hash: match id -> pairing id
    arena:<id>:feed       stream: what happened, entry ids ``<n>-0`` (n = 1, 2, 3 ...), trimmed
                          to the latest ``kept``
    <prefix>:arenas       sorted set: every arena id, by creation time

Every change reads the arena, decides with the pure engine, and commits its writes and feed
lines in one script that first checks the arena's ``version`` is still the one it read (and
bumps it); a change that lost the race reads again and decides again. So two gateways asking
what is due never both get the same pairing: :meth:`Arenas.due` claims what it returns for
``claim_s`` seconds, after which a pairing never reported started is handed out again.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any, Literal, cast

import msgspec

from engine.rules import Rules
from events.model import MatchEnded
from services.lobby.arena import (
    ArenaError,
    Format,
    Pairing,
    Progress,
    Result,
    Round,
    Spec,
    Standing,
    Table,
    ends_at,
    next_round,
    over,
)
from services.redis.connection import Client
from services.redis.lua import LuaScript
from services.store.keys import Keys, partition_of

FEED_KEPT = 1000
"""The most lines an arena's feed keeps; older ones are trimmed (a stream resumed from before
them is told so, with a ``gap`` line)."""
CLAIM_S = 30.0
"""How long a pairing handed out by :meth:`Arenas.due` waits to be reported started before it
is handed out again."""
MAX_ENTRANTS = 1000
_RETRIES = 50
_ENTRANT_KEY_LENGTH = 100
_NAME_LENGTH = 64

Status = Literal["open", "running", "finished"]

LOAD = LuaScript(
    """
-- KEYS: the arena's hash, its entrants, rounds and games
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),
        redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
"""
)
COMMIT = LuaScript(
    """
-- KEYS: the arena's hash, its feed, then every key a write names (by its index in KEYS)
-- ARGV: the version read ('0': none yet), the writes as JSON [[command, key index, args...]],
--       how many feed lines to keep, then the feed lines
if (redis.call('HGET', KEYS[1], 'version') or '0') ~= ARGV[1] then
  return 0
end
for _, op in ipairs(cjson.decode(ARGV[2])) do
  local args = {op[1], KEYS[op[2]]}
  for i = 3, #op do
    args[#args + 1] = op[i]
  end
  redis.call(unpack(args))
end
for i = 4, #ARGV do
  local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], n .. '-0', 'd', ARGV[i])
end
return redis.call('HINCRBY', KEYS[1], 'version', 1)
"""
)
# the index in COMMIT's KEYS of each of an arena's keys
_MAIN, _FEED, _ENTRANTS, _ROUNDS, _GAMES, _MATCHES = range(1, 7)

_ENCODE = msgspec.json.Encoder()


class ArenaRefused(Exception):
    """Raised when an arena action cannot be done; ``code`` says why (no_arena, bad_arena,
    bad_entrant, arena_started, arena_over, arena_full, not_entered, too_few_entrants,
    not_open, no_pairing) and ``status`` the HTTP status it maps to."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Entrant(msgspec.Struct, frozen=True, kw_only=True):
    """Someone in an arena: an account id or ``house:<pool>``, a name to show, when they
    joined and (if so) left, and their place in the order of joining (``seq``: two who joined
    in the same millisecond keep the order they came in)."""

    key: str
    name: str
    joined: float
    left: float | None = None
    seq: int = 0


class Game(msgspec.Struct, frozen=True, kw_only=True):
    """What became of a pairing: handed out to a caller until ``claimed_until``, its match, its
    result."""

    match_id: str | None = None
    claimed_until: float = 0.0
    started: float | None = None
    finished: float | None = None
    result: Result | None = None


class Arena(msgspec.Struct, frozen=True, kw_only=True):
    """An arena as read at one moment."""

    id: str
    name: str
    rules: Rules
    spec: Spec
    deadline_ms: int
    status: Status
    created: float
    started: float | None = None
    ended: float | None = None
    roster: tuple[str, ...] = ()
    entrants: tuple[Entrant, ...] = ()  # in the order they joined
    rounds: tuple[Round, ...] = ()
    games: dict[str, Game] = {}
    version: str = "0"

    def present(self) -> tuple[str, ...]:
        """The keys of the entrants still in, in the order they joined."""
        return tuple(e.key for e in self.entrants if e.left is None)

    def progress(self) -> Progress:
        """The event so far, for the engine: results in the order the matches finished."""
        finished = sorted(
            ((pid, g) for pid, g in self.games.items() if g.result is not None),
            key=lambda item: (item[1].finished or 0.0, item[0]),
        )
        return Progress(
            roster=self.roster,
            present=self.present(),
            rounds=self.rounds,
            results={pid: g.result for pid, g in finished if g.result is not None},
            started=self.started or 0.0,
        )

    def standings(self) -> list[Standing]:
        """The standings so far (byes counted), best first."""
        return self.progress().standings()

    def pairing(self, pairing_id: str) -> Pairing | None:
        """A scheduled pairing by its id."""
        return next((p for r in self.rounds for p in r.pairings if p.id == pairing_id), None)

    def names(self) -> dict[str, str]:
        """Each entrant's name to show, by key."""
        return {e.key: e.name for e in self.entrants}

    def summary(self) -> dict[str, Any]:
        """The arena as a line of a list: how many entrants are in, not who; no standings."""
        return {
            "id": self.id,
            "name": self.name,
            "rules": msgspec.to_builtins(self.rules),
            "format": self.spec.format,
            "rounds": self.spec.rounds,
            "games_per_pairing": self.spec.games_per_pairing,
            "duration_s": self.spec.duration_s,
            "deadline_ms": self.deadline_ms,
            "status": self.status,
            "created": self.created,
            "started": self.started,
            "ends_at": ends_at(self.spec, self.progress()) if self.started else None,
            "ended": self.ended,
            "entered": len(self.present()),
            "round": len(self.rounds),
        }

    def public(self) -> dict[str, Any]:
        """The arena as JSON: its summary, entrants, the matches in play and the standings."""
        names = self.names()
        in_play = self.progress().unfinished()
        return {
            **self.summary(),
            "entrants": [
                {"key": e.key, "name": e.name, "present": e.left is None} for e in self.entrants
            ],
            "playing": [
                {**_pairing(p, names), "match_id": self.games[p.id].match_id}
                for p in in_play
                if p.id in self.games and self.games[p.id].match_id
            ],
            "standings": _table(self.standings(), names),
        }


def _pairing(pairing: Pairing, names: dict[str, str]) -> dict[str, Any]:
    return {
        "id": pairing.id,
        "round": pairing.round,
        "board": pairing.board,
        "seats": [{"key": k, "name": names.get(k, k)} for k in pairing.seats],
    }


def _table(rows: Sequence[Standing], names: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for rank, row in enumerate(rows, 1):
        line = row.public()
        key = line.pop("entrant")
        out.append({"rank": rank, "key": key, "name": names.get(key, key), **line})
    return out


def match_id_for(arena_id: str, pairing: Pairing) -> str:
    """A match id for a pairing that is the same every time it is asked for, so a pairing
    handed out twice (a caller that died after creating its match) makes one match."""
    return f"{arena_id}-r{pairing.round}b{pairing.board}"


class _Commit:
    """The writes and feed lines of one change, committed together."""

    def __init__(self) -> None:
        self.ops: list[list[str | int]] = []
        self.lines: list[bytes] = []

    def hset(self, key: int, field: str, value: str | bytes | float) -> None:
        text = value.decode() if isinstance(value, bytes) else str(value)
        self.ops.append(["HSET", key, field, text])

    def line(self, kind: str, **body: Any) -> None:
        self.lines.append(_ENCODE.encode({"type": kind, "ts": round(time.time(), 3), **body}))


class Arenas:
    """Creates arenas, takes entrants, says what is due, records results, streams updates."""

    def __init__(
        self, redis: Client, keys: Keys, *, kept: int = FEED_KEPT, claim_s: float = CLAIM_S
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.kept = kept
        self.claim_s = claim_s

    # -- keys --------------------------------------------------------------------------------

    def key(self, arena_id: str, part: str = "") -> str:
        """The arena's hash, or one of its other keys (``entrants``, ``rounds``, ``games``,
        ``matches``, ``feed``)."""
        tag = self.keys.tag(partition_of(arena_id, self.keys.partitions))
        return f"{self.keys.prefix}:{tag}:arena:{arena_id}" + (f":{part}" if part else "")

    @property
    def index(self) -> str:
        """Every arena id, by creation time."""
        return f"{self.keys.prefix}:arenas"

    def _keys(self, arena_id: str) -> list[str]:
        parts = ("", "feed", "entrants", "rounds", "games", "matches")
        return [self.key(arena_id, part) for part in parts]

    # -- reading -----------------------------------------------------------------------------

    async def get(self, arena_id: str) -> Arena | None:
        """The arena, or None."""
        if not _valid_arena_id(arena_id):
            return None
        keys = self._keys(arena_id)
        raw = await LOAD(self.redis, [keys[0], keys[2], keys[3], keys[4]], [])
        main, entrants, rounds, games = (_fields(r) for r in raw)
        if not main:
            return None
        joined = sorted(
            (msgspec.json.decode(v, type=Entrant) for v in entrants.values()),
            key=lambda e: (e.joined, e.seq, e.key),
        )
        return Arena(
            id=arena_id,
            name=main["name"].decode(),
            rules=msgspec.json.decode(main["rules"], type=Rules),
            spec=msgspec.json.decode(main["spec"], type=Spec),
            deadline_ms=int(main["deadline_ms"]),
            status=cast(Status, main["status"].decode()),
            created=float(main["created"]),
            started=float(main["started"]) if main.get("started") else None,
            ended=float(main["ended"]) if main.get("ended") else None,
            roster=tuple(msgspec.json.decode(main.get("roster", b"[]"), type=list[str])),
            entrants=tuple(joined),
            rounds=tuple(
                sorted(
                    (msgspec.json.decode(v, type=Round) for v in rounds.values()),
                    key=lambda r: r.number,
                )
            ),
            games={k: msgspec.json.decode(v, type=Game) for k, v in games.items()},
            version=main.get("version", b"0").decode(),
        )

    async def _existing(self, arena_id: str) -> Arena:
        arena = await self.get(arena_id)
        if arena is None:
            raise ArenaRefused(404, "no_arena", f"no arena {arena_id!r}")
        return arena

    async def latest(self, limit: int = 100) -> list[Arena]:
        """The latest arenas, newest first."""
        ids = cast(list[bytes], await self.redis.zrevrange(self.index, 0, limit - 1))
        return [a for i in ids if (a := await self.get(i.decode())) is not None]

    @property
    def running_index(self) -> str:
        """The ids of the arenas started and not seen finished yet."""
        return f"{self.keys.prefix}:arenas:running"

    async def running(self) -> list[Arena]:
        """Every running arena (one seen finished leaves the index here)."""
        ids = cast(set[bytes], await self.redis.smembers(self.running_index))
        out = []
        for raw in sorted(ids):
            arena = await self.get(raw.decode())
            if arena is not None and arena.status == "running":
                out.append(arena)
            else:
                await self.redis.srem(self.running_index, raw)
        return out

    async def standings(self, arena_id: str) -> list[dict[str, Any]]:
        """The arena's standings as JSON lines, best first: rank, key, name, points, games,
        wins, byes, scores for and against, win rate and its 95% interval."""
        arena = await self._existing(arena_id)
        return _table(arena.standings(), arena.names())

    async def read(
        self, arena_id: str, after: int = 0, count: int = 100
    ) -> list[tuple[int, bytes]]:
        """The feed's lines after id ``after`` (at most ``count``), each as (id, JSON with its
        ``id`` set). Line types: ``created``, ``joined``, ``left``, ``started``, ``round``,
        ``match_started``, ``match_finished`` and ``standings`` (after every result, and with
        ``"final": true`` when the arena is over), then ``finished``."""
        entries = await self.redis.xrange(
            self.key(arena_id, "feed"), f"({after}-0", "+", count=count
        )
        return _feed_lines(entries)

    async def since(
        self, arena_id: str, after: int = 0, count: int = 100
    ) -> tuple[int, list[tuple[int, bytes]]]:
        """The id of the oldest line the feed still holds (the next id to come when it holds
        none), and its lines after ``after`` as :meth:`read` gives them, read at one instant:
        an ``after`` below that id minus one is a resume from lines already trimmed."""
        feed = self.key(arena_id, "feed")
        pipe = self.redis.pipeline(transaction=True)
        pipe.xrange(feed, "-", "+", count=1)
        pipe.hget(self.key(arena_id), "n")
        pipe.xrange(feed, f"({after}-0", "+", count=count)
        first, last, entries = await pipe.execute()
        oldest = int(first[0][0].split(b"-")[0]) if first else int(last or 0) + 1
        return oldest, _feed_lines(entries)

    async def last(self, arena_id: str) -> int:
        """The id of the feed's latest line (0: none yet)."""
        return int(await self.redis.hget(self.key(arena_id), "n") or 0)

    # -- changing ----------------------------------------------------------------------------

    async def _commit(self, arena_id: str, version: str, change: _Commit) -> bool:
        if not change.ops and not change.lines:
            return True
        args: list[str | bytes | int] = [version, _ENCODE.encode(change.ops), self.kept]
        return bool(await COMMIT(self.redis, self._keys(arena_id), [*args, *change.lines]))

    async def create(
        self,
        name: str,
        rules: Rules,
        format: Format,
        *,
        rounds: int = 0,
        games_per_pairing: int = 1,
        duration_s: float = 0.0,
        deadline_ms: int = 0,
        seed: int | None = None,
        now: float | None = None,
    ) -> Arena:
        """A new open arena (the operator's); raises ArenaRefused (bad_arena) for a name, a
        format or settings out of range. The seed of its seeding order is drawn now unless
        given."""
        if not isinstance(name, str) or not 0 < len(name) <= _NAME_LENGTH or not name.isprintable():
            raise ArenaRefused(422, "bad_arena", f"an arena's name is 1-{_NAME_LENGTH} characters")
        if not 0 <= deadline_ms <= 3_600_000:
            raise ArenaRefused(422, "bad_arena", "deadline_ms must be 0 to 3600000")
        try:
            spec = Spec(
                format=format,
                table=Table.of(rules),
                rounds=rounds,
                games_per_pairing=games_per_pairing,
                duration_s=duration_s,
                seed=secrets.randbits(31) if seed is None else seed,
            )
        except ArenaError as e:
            raise ArenaRefused(422, "bad_arena", str(e)) from None
        created = round(time.time() if now is None else now, 3)
        arena = Arena(
            id="a-" + secrets.token_hex(5),
            name=name,
            rules=rules,
            spec=spec,
            deadline_ms=deadline_ms,
            status="open",
            created=created,
        )
        change = _Commit()
        for field, value in (
            ("name", name),
            ("rules", _ENCODE.encode(rules)),
            ("spec", _ENCODE.encode(spec)),
            ("deadline_ms", deadline_ms),
            ("status", "open"),
            ("created", repr(created)),
        ):
            change.hset(_MAIN, field, value)
        change.line("created", arena=arena.summary())
        if not await self._commit(arena.id, "0", change):
            raise ArenaRefused(409, "bad_arena", "an arena with this id exists; try again")
        await self.redis.zadd(self.index, {arena.id: created})
        return arena

    async def join(
        self, arena_id: str, entrant: str, name: str, *, now: float | None = None
    ) -> Arena:
        """Put ``entrant`` (an account id or ``house:<pool>``) in the arena, shown as ``name``;
        joining again is harmless, and one who left comes back. Raises ArenaRefused: no_arena,
        bad_entrant, arena_over, arena_started (a round robin's entrants are those at its
        start), arena_full."""
        if not _valid_entrant(entrant):
            raise ArenaRefused(422, "bad_entrant", f"{entrant!r} cannot be an entrant")
        if not isinstance(name, str) or not 0 < len(name) <= _NAME_LENGTH:
            raise ArenaRefused(422, "bad_entrant", f"a name is 1-{_NAME_LENGTH} characters")
        for _ in range(_RETRIES):
            arena = await self._existing(arena_id)
            if arena.status == "finished":
                raise ArenaRefused(409, "arena_over", "the arena is over")
            fixed = arena.status == "running" and arena.spec.format == "round_robin"
            if fixed and entrant not in arena.roster:
                raise ArenaRefused(
                    409, "arena_started", "a round robin takes no entrants once it starts"
                )
            known = {e.key: e for e in arena.entrants}
            if entrant in known and known[entrant].left is None:
                return arena
            if entrant not in known and len(known) >= MAX_ENTRANTS:
                raise ArenaRefused(409, "arena_full", f"an arena holds {MAX_ENTRANTS} entrants")
            at = round(time.time() if now is None else now, 3)
            joined = known[entrant].joined if entrant in known else at
            seq = known[entrant].seq if entrant in known else len(known) + 1
            change = _Commit()
            change.hset(
                _ENTRANTS,
                entrant,
                _ENCODE.encode(Entrant(key=entrant, name=name, joined=joined, seq=seq)),
            )
            change.line("joined", entrant={"key": entrant, "name": name})
            if await self._commit(arena_id, arena.version, change):
                return await self._existing(arena_id)
        raise _busy()

    async def leave(self, arena_id: str, entrant: str, *, now: float | None = None) -> Arena:
        """Take ``entrant`` out of the arena: no more matches are scheduled for it (a match in
        play goes on). Raises ArenaRefused: no_arena, not_entered."""
        for _ in range(_RETRIES):
            arena = await self._existing(arena_id)
            found = next((e for e in arena.entrants if e.key == entrant), None)
            if found is None or found.left is not None:
                raise ArenaRefused(409, "not_entered", f"{entrant!r} is not in the arena")
            left = msgspec.structs.replace(
                found, left=round(time.time() if now is None else now, 3)
            )
            change = _Commit()
            change.hset(_ENTRANTS, entrant, _ENCODE.encode(left))
            change.line("left", entrant={"key": entrant, "name": found.name})
            entrants = tuple(left if e.key == entrant else e for e in arena.entrants)
            after = msgspec.structs.replace(arena, entrants=entrants)
            self._end_if_over(arena, after, change, left.left or 0.0)
            if await self._commit(arena_id, arena.version, change):
                return await self._existing(arena_id)
        raise _busy()

    async def start(self, arena_id: str, *, now: float | None = None) -> Arena:
        """Start the arena (the operator's): its entrants now are its roster, and from now on
        :meth:`due` has pairings. Raises ArenaRefused: no_arena, not_open, too_few_entrants."""
        for _ in range(_RETRIES):
            arena = await self._existing(arena_id)
            if arena.status != "open":
                raise ArenaRefused(409, "not_open", f"the arena is {arena.status}, not open")
            present = arena.present()
            sides = arena.spec.table.sides
            if len(present) < sides:
                raise ArenaRefused(
                    409,
                    "too_few_entrants",
                    f"{len(present)} entrants cannot fill a table of {sides}",
                )
            at = round(time.time() if now is None else now, 3)
            change = _Commit()
            change.hset(_MAIN, "status", "running")
            change.hset(_MAIN, "started", repr(at))
            change.hset(_MAIN, "roster", _ENCODE.encode(list(present)))
            running = msgspec.structs.replace(arena, status="running", started=at, roster=present)
            change.line("started", arena=running.summary())
            if await self._commit(arena_id, arena.version, change):
                await self.redis.sadd(self.running_index, arena_id)
                return running
        raise _busy()

    async def due(self, arena_id: str, now: float) -> list[Pairing]:
        """The pairings to start now: the next round when it is due (scheduled here), and any
        pairing handed out before but not reported started within ``claim_s``. What is
        returned is claimed for ``claim_s`` seconds: start each match (see
        :func:`match_id_for`) and call :meth:`started`. Ends the arena when it is over. An
        unknown arena, or one not running, has nothing due."""
        for _ in range(_RETRIES):
            arena = await self.get(arena_id)
            if arena is None or arena.status != "running":
                return []
            progress = arena.progress()
            change = _Commit()
            names = arena.names()
            while (drawn := next_round(arena.spec, progress, now)) is not None:
                change.hset(_ROUNDS, str(drawn.number), _ENCODE.encode(drawn))
                change.line(
                    "round",
                    round=drawn.number,
                    pairings=[_pairing(p, names) for p in drawn.pairings],
                    byes=[{"key": k, "name": names.get(k, k)} for k in drawn.byes],
                )
                progress = msgspec.structs.replace(progress, rounds=(*progress.rounds, drawn))
                if drawn.pairings:
                    break  # a round robin's round emptied by leavers is skipped at once
            handed = []
            for pairing in progress.unfinished():
                game = arena.games.get(pairing.id, Game())
                if game.match_id is None and game.claimed_until <= now:
                    handed.append(pairing)
                    claimed = msgspec.structs.replace(game, claimed_until=now + self.claim_s)
                    change.hset(_GAMES, pairing.id, _ENCODE.encode(claimed))
            scheduled = msgspec.structs.replace(arena, rounds=progress.rounds)
            self._end_if_over(arena, scheduled, change, now)
            if await self._commit(arena_id, arena.version, change):
                return handed
        raise _busy()

    async def started(
        self, arena_id: str, pairing: Pairing, match_id: str, *, now: float | None = None
    ) -> bool:
        """The match of ``pairing`` was created as ``match_id``: True when recorded (or already
        recorded with this id), False when the pairing already has another match (cancel this
        one). Raises ArenaRefused: no_arena, no_pairing."""
        for _ in range(_RETRIES):
            arena = await self._existing(arena_id)
            if arena.pairing(pairing.id) != pairing:
                raise ArenaRefused(404, "no_pairing", f"no pairing {pairing.id} in {arena_id}")
            game = arena.games.get(pairing.id, Game())
            if game.match_id is not None:
                return game.match_id == match_id
            at = round(time.time() if now is None else now, 3)
            change = _Commit()
            played = msgspec.structs.replace(game, match_id=match_id, started=at)
            change.hset(_GAMES, pairing.id, _ENCODE.encode(played))
            change.hset(_MATCHES, match_id, pairing.id)
            change.line(
                "match_started", match_id=match_id, pairing=_pairing(pairing, arena.names())
            )
            if await self._commit(arena_id, arena.version, change):
                return True
        raise _busy()

    async def finished(
        self, arena_id: str, match_id: str, ended: MatchEnded, *, now: float | None = None
    ) -> bool:
        """The arena's match ``match_id`` ended: its result counts (none if called off), the
        standings are streamed, and the arena ends if that was its last match. False when the
        match is not the arena's or its end was recorded already."""
        raw = cast(bytes | None, await self.redis.hget(self.key(arena_id, "matches"), match_id))
        if raw is None:
            return False
        pairing_id = raw.decode()
        for _ in range(_RETRIES):
            arena = await self._existing(arena_id)
            pairing = arena.pairing(pairing_id)
            game = arena.games.get(pairing_id)
            if pairing is None or game is None or game.result is not None:
                return False
            at = round(time.time() if now is None else now, 3)
            result = Result.of(pairing, arena.spec.table, ended.winner, ended.scores)
            done = msgspec.structs.replace(game, finished=at, result=result)
            change = _Commit()
            change.hset(_GAMES, pairing_id, _ENCODE.encode(done))
            names = arena.names()
            change.line(
                "match_finished",
                match_id=match_id,
                pairing=_pairing(pairing, names),
                winner=ended.winner,
                scores=list(ended.scores),
                reason=ended.reason,
            )
            after = msgspec.structs.replace(arena, games={**arena.games, pairing_id: done})
            if not self._end_if_over(arena, after, change, at):
                change.line("standings", final=False, standings=_table(after.standings(), names))
            if await self._commit(arena_id, arena.version, change):
                return True
        raise _busy()

    def _end_if_over(self, before: Arena, after: Arena, change: _Commit, now: float) -> bool:
        """Add the writes and lines that end a running arena if ``after`` (``before`` with this
        change) is over; say whether it is."""
        if before.status != "running" or not over(after.spec, after.progress(), now):
            return False
        change.hset(_MAIN, "status", "finished")
        change.hset(_MAIN, "ended", repr(round(now, 3)))
        change.line("standings", final=True, standings=_table(after.standings(), after.names()))
        ended = msgspec.structs.replace(after, status="finished", ended=round(now, 3))
        change.line("finished", arena=ended.summary())
        return True


def _feed_lines(raw: Any) -> list[tuple[int, bytes]]:
    """Feed entries as (id, JSON with its ``id`` set)."""
    out = []
    for entry_id, fields in cast(list[tuple[bytes, dict[bytes, bytes]]], raw):
        n = int(entry_id.split(b"-")[0])
        out.append((n, b'{"id":%d,%s' % (n, fields[b"d"][1:])))
    return out


def _fields(raw: Any) -> dict[str, bytes]:
    """A flat HGETALL reply from a script ([field, value, ...]) as a dict."""
    items = list(raw)
    return {items[i].decode(): items[i + 1] for i in range(0, len(items), 2)}


def _valid_arena_id(arena_id: str) -> bool:
    return (
        isinstance(arena_id, str)
        and arena_id.startswith("a-")
        and 2 < len(arena_id) <= 40
        and all(c.isalnum() or c in "-_" for c in arena_id)
    )


def _valid_entrant(key: str) -> bool:
    return (
        isinstance(key, str)
        and 0 < len(key) <= _ENTRANT_KEY_LENGTH
        and all(c.isascii() and (c.isalnum() or c in "-_.:") for c in key)
    )


def _busy() -> ArenaRefused:
    return ArenaRefused(503, "arena_busy", "the arena changed too often to update; try again")
