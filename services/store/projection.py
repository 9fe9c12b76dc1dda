"""Projection checkpoints: a projection's position and its data change in one atomic write.

A projection (name, partition) follows one partition's notification log. Each batch it reads
becomes a list of write operations on the projection's own keys; `commit` applies them and
moves the saved position in one Lua call, and refuses when the saved position is not the one
the writer started from. A restart reads the saved position and goes on from there, so an
event is neither skipped nor applied twice; `reset` deletes everything so the projection can
be rebuilt from the log.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from services.redis.lane import lane_of
from services.redis.lua import Arg, Client, LuaScript
from services.store.base import START, EventStore, Recorded, StoreError
from services.store.keys import DEFAULT_PARTITIONS, DEFAULT_PREFIX, Keys

# Each allowed command with its argument count after the key: (minimum, maximum, step).
# Checked before a commit is sent, so a malformed op cannot fail halfway through a commit.
_ARITY: dict[str, tuple[int, int | None, int]] = {
    "SET": (1, 1, 1),
    "DEL": (0, 0, 1),
    "INCRBY": (1, 1, 1),
    "HSET": (2, None, 2),
    "HDEL": (1, None, 1),
    "HINCRBY": (2, 2, 1),
    "SADD": (1, None, 1),
    "SREM": (1, None, 1),
    "ZADD": (2, None, 2),
    "ZINCRBY": (2, 2, 1),
    "ZREM": (1, None, 1),
    "RPUSH": (1, None, 1),
}
_MAX_OP_ARGS = 1000
# Arguments that must be numbers (a slice of the op's args), so both backends agree.
_NUMBERS = {
    "INCRBY": slice(0, 1),
    "HINCRBY": slice(1, 2),
    "ZADD": slice(0, None, 2),
    "ZINCRBY": slice(0, 1),
}

WRITE_COMMANDS = frozenset(_ARITY)
"""Commands a commit may run, in their plain forms (no NX/XX/GET options); both backends
implement exactly these."""

_REGISTRY = "_keys"


@dataclass(frozen=True, slots=True)
class WriteOp:
    """One Redis write on a projection key, e.g. `WriteOp("HINCRBY", key, ("wins", 1))`."""

    command: str
    key: str
    args: tuple[Arg, ...] = ()


def op(command: str, key: str, *args: Arg) -> WriteOp:
    """Shorthand: `op("HINCRBY", key, "wins", 1)`."""
    return WriteOp(command.upper(), key, args)


class ProjectionConflict(StoreError):
    """Raised by `commit` when the saved position is not the one the writer started from:
    another writer moved it. Nothing is written."""

    def __init__(self, name: str, partition: int, expected: str, actual: str) -> None:
        super().__init__(
            f"projection {name!r} of partition {partition} is at {actual!r}, not {expected!r}"
        )
        self.name = name
        self.partition = partition
        self.expected = expected
        self.actual = actual


class Checkpoints(abc.ABC):
    """Saved positions and data of projections, one state per (name, partition)."""

    keys: Keys

    def key(self, name: str, partition: int, *parts: str) -> str:
        """A data key of the projection: `<prefix>:{p<n>}:proj:<name>:<parts...>`."""
        if not parts or any(not part for part in parts) or parts == (_REGISTRY,):
            raise ValueError(f"invalid projection key parts {parts!r}")
        return ":".join((self.keys.projection(name, partition), *parts))

    @abc.abstractmethod
    async def position(self, name: str, partition: int) -> str:
        """The log position the projection has applied up to; `START` when never committed."""

    @abc.abstractmethod
    async def commit(
        self,
        name: str,
        partition: int,
        expected: str,
        position: str,
        ops: Sequence[WriteOp] = (),
    ) -> None:
        """Apply `ops` and save `position` atomically if the saved position is `expected`.

        Raises ProjectionConflict (nothing written) when it is not, ValueError for an op
        that is not an allowed write on this projection's keys. An op failing inside Redis
        (e.g. WRONGTYPE) leaves earlier ops applied and the position unchanged.
        """

    @abc.abstractmethod
    async def reset(self, name: str, partition: int) -> None:
        """Delete the projection's position and data keys, so it rebuilds from the log start.

        Meant for a projection whose writers are stopped.
        """

    def _check(self, name: str, partition: int, ops: Sequence[WriteOp]) -> str:
        self.keys.check_partition(partition)
        checkpoint = self.keys.projection(name, partition)
        namespace = checkpoint + ":"
        registry = namespace + _REGISTRY
        for write in ops:
            arity = _ARITY.get(write.command)
            if arity is None:
                raise ValueError(f"{write.command} is not an allowed projection write")
            low, high, step = arity
            count = len(write.args)
            if count < low or (high is not None and count > high) or count % step:
                raise ValueError(f"wrong number of arguments for {write.command}: {write}")
            if count > _MAX_OP_ARGS:
                raise ValueError(f"more than {_MAX_OP_ARGS} arguments in one op: split it")
            if not write.key.startswith(namespace) or write.key == registry:
                raise ValueError(f"{write.key!r} is not a data key of projection {name!r}")
            numbers = _NUMBERS.get(write.command)
            if numbers is not None and not all(
                isinstance(a, int | float) and not isinstance(a, bool) for a in write.args[numbers]
            ):
                raise ValueError(f"{write.command} needs numbers where it has {write}")
        return checkpoint


Handler = Callable[[Sequence[tuple[str, Recorded]]], Awaitable[Sequence[WriteOp]]]


async def catch_up(
    store: EventStore,
    checkpoints: Checkpoints,
    name: str,
    partition: int,
    handle: Handler,
    *,
    batch: int = 500,
) -> int:
    """Apply every log entry after the saved position, committing once per batch read.

    Returns the number of entries applied. Raises ProjectionConflict if another writer
    commits meanwhile; calling again then resumes from its position.
    """
    position = await checkpoints.position(name, partition)
    applied = 0
    while entries := await store.read_log(partition, position, batch):
        ops = await handle(entries)
        new_position = entries[-1][0]
        await checkpoints.commit(name, partition, position, new_position, ops)
        position = new_position
        applied += len(entries)
    return applied


def _order(position: str) -> tuple[int, ...]:
    """Sort key of a log position (`"0"`, `"17"` or `"1712345-3"`)."""
    return tuple(int(part) for part in position.split("-"))


async def catch_up_together(
    store: EventStore,
    checkpoints: Checkpoints,
    partition: int,
    members: Sequence[tuple[str, Handler]],
    *,
    batch: int = 500,
    limit: int | None = None,
) -> int:
    """Like `catch_up` for several projections of one partition, reading the log once: each
    batch goes to every projection that has not applied it, each committing its own position;
    with ``limit``, no further batch is read once that many entries have been (a caller that
    holds the partition by a lease comes back for the rest after renewing it).

    Returns the number of log entries read. Raises ProjectionConflict if another writer moved
    one of them; calling again resumes every projection from its own position.
    """
    positions = {name: await checkpoints.position(name, partition) for name, _ in members}
    start = min(positions.values(), key=_order)
    read = 0
    while (limit is None or read < limit) and (
        entries := await store.read_log(partition, start, batch)
    ):
        keys: list[tuple[int, ...]] | None = None
        for name, handle in members:
            if positions[name] == start:  # the usual case: every projection in step
                mine = entries
            else:
                keys = keys or [_order(position) for position, _ in entries]
                after = _order(positions[name])
                mine = [entry for entry, key in zip(entries, keys, strict=True) if key > after]
            if not mine:
                continue
            ops = await handle(mine)
            await checkpoints.commit(name, partition, positions[name], mine[-1][0], ops)
            positions[name] = mine[-1][0]
        start = entries[-1][0]
        read += len(entries)
    return read


_COMMIT = LuaScript(
    """
-- KEYS: checkpoint, registry of data keys, then one key per op
-- ARGV: expected position, new position, then per op: command, arg count, args
local saved = redis.call('GET', KEYS[1]) or '0'
if saved ~= ARGV[1] then
  return {0, saved}
end
local a = 3
local registered = {}
for k = 3, #KEYS do
  local n = tonumber(ARGV[a + 1])
  redis.call(ARGV[a], KEYS[k], unpack(ARGV, a + 2, a + 1 + n))
  a = a + 2 + n
  if not registered[KEYS[k]] then
    registered[KEYS[k]] = true
    redis.call('SADD', KEYS[2], KEYS[k])
  end
end
redis.call('SET', KEYS[1], ARGV[2])
return {1}
"""
)

_RESET = LuaScript(
    """
-- KEYS: checkpoint, registry, then the registry's members as read by the caller
if redis.call('SCARD', KEYS[2]) ~= #KEYS - 2 then
  return 0
end
for k = 1, #KEYS do
  redis.call('DEL', KEYS[k])
end
return 1
"""
)


class RedisCheckpoints(Checkpoints):
    """Checkpoints in Redis next to the partition's other keys (same hash tag)."""

    def __init__(
        self,
        client: Client,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        self.client = client
        self.keys = Keys(prefix, partitions)

    async def position(self, name: str, partition: int) -> str:
        """The log position the projection has applied up to; `START` when never committed."""
        self.keys.check_partition(partition)
        saved = await lane_of(self.client).call("GET", self.keys.projection(name, partition))
        return START if saved is None else cast(bytes, saved).decode()

    async def commit(
        self,
        name: str,
        partition: int,
        expected: str,
        position: str,
        ops: Sequence[WriteOp] = (),
    ) -> None:
        """Apply `ops` and save `position` atomically if the saved position is `expected`."""
        checkpoint = self._check(name, partition, ops)
        keys = [checkpoint, f"{checkpoint}:{_REGISTRY}"]
        args: list[Arg] = [expected, position]
        for write in ops:
            keys.append(write.key)
            args.append(write.command)
            args.append(len(write.args))
            args.extend(write.args)
        (reply,) = await lane_of(self.client).run(_COMMIT, [(keys, args)])
        if isinstance(reply, Exception):
            raise reply
        if reply[0] == 0:
            raise ProjectionConflict(name, partition, expected, bytes(reply[1]).decode())

    async def reset(self, name: str, partition: int) -> None:
        """Delete the projection's position and data keys in one atomic call."""
        self.keys.check_partition(partition)
        checkpoint = self.keys.projection(name, partition)
        registry = f"{checkpoint}:{_REGISTRY}"
        # Retried only if a commit slipped in between reading the registry and deleting.
        while True:
            members = [cast(bytes, m).decode() for m in await self.client.smembers(registry)]
            if await _RESET(self.client, [checkpoint, registry, *members], []):
                return


class MemoryCheckpoints(Checkpoints):
    """Checkpoints and projection data in this process, shaped like redis-py's replies."""

    def __init__(
        self, *, partitions: int = DEFAULT_PARTITIONS, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.keys = Keys(prefix, partitions)
        self._positions: dict[str, str] = {}
        self.data: dict[str, Any] = {}
        """Projection keys: bytes (SET, INCRBY), dict (HSET), set (SADD), dict of float
        scores (ZADD) or list (RPUSH), like the replies of GET, HGETALL, SMEMBERS,
        ZRANGE WITHSCORES and LRANGE."""

    async def position(self, name: str, partition: int) -> str:
        """The log position the projection has applied up to; `START` when never committed."""
        self.keys.check_partition(partition)
        return self._positions.get(self.keys.projection(name, partition), START)

    async def commit(
        self,
        name: str,
        partition: int,
        expected: str,
        position: str,
        ops: Sequence[WriteOp] = (),
    ) -> None:
        """Apply `ops` and save `position` if the saved position is `expected`."""
        checkpoint = self._check(name, partition, ops)
        saved = self._positions.get(checkpoint, START)
        if saved != expected:
            raise ProjectionConflict(name, partition, expected, saved)
        for write in ops:
            _apply(self.data, write)
        self._positions[checkpoint] = position

    async def reset(self, name: str, partition: int) -> None:
        """Delete the projection's position and data keys."""
        self.keys.check_partition(partition)
        checkpoint = self.keys.projection(name, partition)
        self._positions.pop(checkpoint, None)
        for key in [key for key in self.data if key.startswith(checkpoint + ":")]:
            del self.data[key]


def _encode(value: Arg) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return repr(value).encode()


def _apply(data: dict[str, Any], write: WriteOp) -> None:
    """Run one allowed write on the memory data, as Redis would."""
    key, args = write.key, [_encode(a) for a in write.args]
    command = write.command
    if command == "SET":
        data[key] = args[0]
    elif command == "DEL":
        data.pop(key, None)
    elif command == "INCRBY":
        data[key] = str(int(data.get(key, b"0")) + int(args[0])).encode()
    elif command in ("HSET", "HDEL", "HINCRBY"):
        fields: dict[bytes, bytes] = data.setdefault(key, {})
        if command == "HSET":
            fields.update(zip(args[::2], args[1::2], strict=True))
        elif command == "HDEL":
            for field in args:
                fields.pop(field, None)
        else:
            fields[args[0]] = str(int(fields.get(args[0], b"0")) + int(args[1])).encode()
        if not fields:
            del data[key]
    elif command in ("SADD", "SREM"):
        members: set[bytes] = data.setdefault(key, set())
        if command == "SADD":
            members.update(args)
        else:
            members.difference_update(args)
        if not members:
            del data[key]
    elif command in ("ZADD", "ZINCRBY", "ZREM"):
        scores: dict[bytes, float] = data.setdefault(key, {})
        if command == "ZADD":
            for score, member in zip(args[::2], args[1::2], strict=True):
                scores[member] = float(score)
        elif command == "ZINCRBY":
            scores[args[1]] = scores.get(args[1], 0.0) + float(args[0])
        else:
            for member in args:
                scores.pop(member, None)
        if not scores:
            del data[key]
    elif command == "RPUSH":
        data.setdefault(key, []).extend(args)
