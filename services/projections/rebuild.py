"""Rebuilding projections from the match logs, live and archived.

The notification log is trimmed behind the projections (services/projections/archiver.py), so
a rebuild cannot fold it from its start. It folds every match's own log instead — the matches
still in Redis and those in the archive — and then the notification log from where it stood
when the rebuild began, skipping the events the match logs already gave:

1. For each partition, note the log's latest position ``end``, then reset the projections.
2. Fold every match of the partition, one whole log at a time, in the order the matches last
   moved (the order their events reached the log, as far as the projections can tell: only
   the latest name an account played as depends on it). An archived match feeds only the
   projections that keep archived matches (results, ratings, accounts' feeds), not those the
   archiver removes it from (its summary, the archive queue).
3. Commit ``end`` as every projection's position, and catch up from there as the projector
   would, leaving out each match's events up to the version its log gave in step 2: a match
   still being played while the rebuild runs is counted once.

Meant for projections whose projector (and archiver) is stopped, like any reset. The compacted
ratings table (services/projections/compaction.py) is no partition's data and is left as it is:
the ratings read passes over the results it holds, and the next compaction drops them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from events.codec import JSON
from services.store.archive import Archive
from services.store.base import START, EventStore, Recorded
from services.store.projection import Checkpoints, Handler, WriteOp, catch_up_together

CHUNK = 2000
"""Records folded per commit."""

Members = Callable[[int], Sequence[tuple[str, Handler]]]
"""The projections of a partition, each with its handler of log entries."""


async def rebuild_from_matches(
    store: EventStore,
    checkpoints: Checkpoints,
    members_of: Members,
    *,
    archive: Archive | None = None,
    not_archived: frozenset[str] = frozenset(),
) -> int:
    """Reset and refold every projection of ``members_of`` from the match logs (see the
    module); ``not_archived`` names the projections an archived match is not folded into.
    Return how many events were folded."""
    keys = store.keys
    everything: list[str] = [] if archive is None else await archive.ids()
    archived: dict[int, set[str]] = {}
    for match_id in everything:
        archived.setdefault(keys.partition_of(match_id), set()).add(match_id)
    folded = 0
    for p in range(keys.partitions):
        members = list(members_of(p))
        end = await store.last_position(p)
        for name, _ in members:
            await checkpoints.reset(name, p)
        live = set(await store.match_ids(p))
        gone = archived.get(p, set()) - live  # a match in both is still live here
        order: list[tuple[float, str]] = []
        for match_id in live:
            version = await store.version(match_id)
            order.append((_ts(await store.read(match_id, version, version)), match_id))
        if archive is not None:
            for match_id in gone:
                order.append((_ts((await archive.read(match_id))[-1:]), match_id))
        order.sort()
        versions: dict[str, int] = {}
        batch: list[tuple[str, Recorded]] = []
        for _, match_id in order:
            if match_id in gone and archive is not None:
                records = await archive.read(match_id)
            else:
                records = await store.read(match_id)
                versions[match_id] = len(records)
            batch += [(START, r) for r in records]
            if len(batch) >= CHUNK:
                folded += await _fold(checkpoints, p, members, batch, gone, not_archived)
                batch = []
        folded += await _fold(checkpoints, p, members, batch, gone, not_archived)
        if end == START:
            continue
        for name, _ in members:
            await checkpoints.commit(name, p, START, end)
        skipping = [(name, _skip(handle, versions)) for name, handle in members]
        folded += await catch_up_together(store, checkpoints, p, skipping, batch=CHUNK)
    return folded


async def _fold(
    checkpoints: Checkpoints,
    partition: int,
    members: Sequence[tuple[str, Handler]],
    entries: list[tuple[str, Recorded]],
    archived: set[str],
    not_archived: frozenset[str],
) -> int:
    """Fold whole match logs into each projection, its position left at the start."""
    for name, handle in members:
        mine = entries
        if name in not_archived and archived:
            mine = [e for e in entries if e[1].match_id not in archived]
        if mine:
            await checkpoints.commit(name, partition, START, START, await handle(mine))
    return len(entries)


def _skip(handle: Handler, versions: dict[str, int]) -> Handler:
    """``handle`` without the events a match's log already gave."""

    async def skipping(entries: Sequence[tuple[str, Recorded]]) -> Sequence[WriteOp]:
        fresh = [(pos, r) for pos, r in entries if r.version > versions.get(r.match_id, 0)]
        return await handle(fresh) if fresh else []

    return skipping


def _ts(records: Sequence[Recorded]) -> float:
    return JSON.decode_envelope(records[-1].data).ts if records else 0.0
