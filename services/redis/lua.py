"""Lua scripts run by SHA (EVALSHA), loaded on demand, one call or pipelined many at a time."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeAlias

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from services.redis.connection import Client

__all__ = ["Arg", "Call", "Client", "LuaScript"]
Arg: TypeAlias = bytes | str | int | float
Call: TypeAlias = tuple[Sequence[str], Sequence[Arg]]


class LuaScript:
    """A script sent once with SCRIPT LOAD and then called by its SHA.

    A server that lost its script cache (restart, failover, SCRIPT FLUSH) answers NOSCRIPT,
    which means the call did not run: loading and calling again is safe.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, client: Client, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run the script once; loads it first if the server does not know it."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)

    async def many(self, client: Client, calls: Sequence[Call]) -> list[Any]:
        """Run the script once per call in one non-transactional pipeline.

        Results come in call order; a call that failed has its exception in its slot. A
        cluster client sends each call to the node owning its keys.
        """
        results, _ = await self._run(client, calls, None)
        return results

    async def replicated(
        self, client: Client, calls: Sequence[Call], replicas: int, wait_ms: int
    ) -> tuple[list[Any], int]:
        """:meth:`many`, each node's calls followed on their own connection by ``WAIT
        replicas wait_ms``; return the results and the fewest replicas any node confirmed
        (``replicas`` or more: every write of the batch is on that many replicas)."""
        return await self._run(client, calls, (replicas, wait_ms))

    async def _run(
        self, client: Client, calls: Sequence[Call], wait: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        """The calls pipelined (then WAIT, with ``wait``); those the server answered
        NOSCRIPT run again once the script is loaded. The results, and the replicas
        confirmed (0 without ``wait``)."""
        results, confirmed = await self._pipelined(client, calls, wait)
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:
            await client.script_load(self.source)
            retried, again = await self._pipelined(client, [calls[i] for i in missing], wait)
            for i, result in zip(missing, retried, strict=True):
                results[i] = result
            confirmed = min(confirmed, again)
        return results, confirmed

    async def _pipelined(
        self, client: Client, calls: Sequence[Call], wait: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            # Not pipe.evalsha(): redis-py blocks that name on cluster pipelines, though a
            # script whose keys share one slot is routed like any keyed command.
            pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        if wait is None:
            return list(await pipe.execute(raise_on_error=False)), 0
        # WAIT counts the replicas that have this connection's writes: on a cluster, one per
        # node written to, sent on that node's connection of the pipeline, after its calls.
        nodes, unreplicated = _masters_to_wait_for(client, calls)
        for node in nodes:
            pipe.execute_command("WAIT", *wait, target_nodes=node)
        if not isinstance(client, RedisCluster):
            pipe.execute_command("WAIT", *wait)
        replies = list(await pipe.execute(raise_on_error=False))
        results, acks = replies[: len(calls)], replies[len(calls) :]
        confirmed = min((a for a in acks if isinstance(a, int)), default=wait[0])
        if unreplicated or any(not isinstance(a, int) for a in acks):
            confirmed = 0
        return results, confirmed


def _masters_to_wait_for(client: Client, calls: Sequence[Call]) -> tuple[list[Any], bool]:
    """On a cluster, the masters the calls write to that have a replica, and whether any
    call writes to a master that has none (its own died and it took over: it is not waited
    for, and counts as confirmed by none). On one node, none and False."""
    if not isinstance(client, RedisCluster):
        return [], False
    nodes: dict[str, Any] = {}
    unreplicated = False
    for keys, _ in calls:
        serving = client.nodes_manager.slots_cache.get(client.keyslot(keys[0]), [])
        if len(serving) > 1:
            nodes[serving[0].name] = serving[0]
        else:
            unreplicated = True
    return list(nodes.values()), unreplicated
