"""Lua scripts run by SHA (EVALSHA), loaded on demand, one call or pipelined many at a time."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeAlias

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
        results = await self._pipelined(client, calls)
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:
            await client.script_load(self.source)
            retried = await self._pipelined(client, [calls[i] for i in missing])
            for i, result in zip(missing, retried, strict=True):
                results[i] = result
        return results

    async def _pipelined(self, client: Client, calls: Sequence[Call]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            # Not pipe.evalsha(): redis-py blocks that name on cluster pipelines, though a
            # script whose keys share one slot is routed like any keyed command.
            pipe.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))
