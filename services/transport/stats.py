"""What the streams hold back, read from Redis: each consumer group's lag and pending entries,
the dead letters, the live matches of each partition.

For the metrics the services refresh every few seconds and for ``domino status``. Every
command names one key, and the commands go pipelined without a transaction, so the same reads
run on one node and on a Redis Cluster (where the pipeline is split by slot).

Lag — entries a group has not been given yet — is the ``lag`` Redis 7 reports for each group.
Redis 6.2 (the embedded server) does not count it: there, and when Redis 7 cannot count it
either (entries deleted from the middle of the stream), the lag is 0 when the group has been
given the stream's last entry, else -1, "behind by an unknown number of entries". Counting
them would mean reading them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import Gauge

from services.metrics import CONSUMER_LAG, CONSUMER_PENDING
from services.redis.connection import Client
from services.store.keys import Keys

UNKNOWN_LAG = -1
"""The lag of a group Redis cannot count (before 7.0): behind, by how much unknown."""


@dataclass(frozen=True, slots=True)
class GroupState:
    """One consumer group of one stream: how many entries it holds back."""

    stream: str
    group: str
    consumers: int
    pending: int
    """Delivered to a consumer and not acknowledged yet."""
    lag: int
    """Not delivered yet; UNKNOWN_LAG when Redis cannot say."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


async def group_states(redis: Client, streams: Sequence[str]) -> list[GroupState]:
    """Every consumer group of each of ``streams``, in order (a stream that does not exist
    has none): one XINFO GROUPS per stream, and one XINFO STREAM per stream whose lag Redis
    does not report."""
    if not streams:
        return []
    pipe = redis.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_groups(stream)
    replies = await pipe.execute(raise_on_error=False)
    found: list[tuple[str, dict[str, Any]]] = []
    for stream, groups in zip(streams, replies, strict=True):
        if isinstance(groups, Exception):  # no such stream (yet)
            continue
        found.extend((stream, group) for group in groups)
    uncounted = sorted({stream for stream, group in found if group.get("lag") is None})
    last: dict[str, str] = {}
    if uncounted:
        pipe = redis.pipeline(transaction=False)
        for stream in uncounted:
            pipe.xinfo_stream(stream)
        for stream, info in zip(uncounted, await pipe.execute(raise_on_error=False), strict=True):
            if not isinstance(info, Exception):
                last[stream] = _text(info.get("last-generated-id"))
    return [
        GroupState(
            stream=stream,
            group=_text(group["name"]),
            consumers=int(group["consumers"]),
            pending=int(group["pending"]),
            lag=_lag(group, last.get(stream)),
        )
        for stream, group in found
    ]


def _lag(group: dict[str, Any], last_id: str | None) -> int:
    lag = group.get("lag")
    if lag is not None:
        return int(lag)
    if last_id is not None and _text(group.get("last-delivered-id")) == last_id:
        return 0
    return UNKNOWN_LAG


async def watched(redis: Client, keys: Keys, partitions: Sequence[int]) -> list[int]:
    """The number of live matches on each partition's watch list, in order."""
    if not partitions:
        return []
    pipe = redis.pipeline(transaction=False)
    for p in partitions:
        pipe.zcard(keys.watch(p))
    return [int(n) for n in await pipe.execute()]


async def dead_letters(redis: Client, keys: Keys) -> int:
    """The number of entries on the dead-letter stream."""
    return int(await redis.xlen(keys.dead_letters))


class GroupGauges:
    """Sets ``domino_consumer_lag`` and ``domino_consumer_pending`` for one group over the
    streams a process reads, and drops the series of a stream it no longer reads (a referee's
    partition taken over by another), so that summing over processes counts each stream
    once."""

    def __init__(
        self, group: str, lag: Gauge = CONSUMER_LAG, pending: Gauge = CONSUMER_PENDING
    ) -> None:
        self.group = group
        self.lag = lag
        self.pending = pending
        self._shown: set[str] = set()

    async def refresh(self, redis: Client, streams: Sequence[str]) -> list[GroupState]:
        """Read the group's state on ``streams`` and show it; return it."""
        states = [s for s in await group_states(redis, streams) if s.group == self.group]
        shown = set()
        for state in states:
            self.lag.labels(self.group, state.stream).set(state.lag)
            self.pending.labels(self.group, state.stream).set(state.pending)
            shown.add(state.stream)
        for stream in self._shown - shown:
            self.lag.remove(self.group, stream)
            self.pending.remove(self.group, stream)
        self._shown = shown
        return states
