"""The one way the services open Redis: redis-py's asyncio client, hiredis packing commands.

redis-py's asyncio connection packs every command in Python; hiredis packs it in C. With the
referee's pipelined EVALSHA calls of a dozen arguments each, packing was a tenth of the
referee's time (measured with py-spy during ``make bench BENCH=service``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import hiredis
from redis.asyncio import BlockingConnectionPool, Connection, Redis
from redis.asyncio.cluster import RedisCluster
from redis.cluster import LoadBalancingStrategy

Client = Redis | RedisCluster
"""A client for a Redis node or a Redis Cluster."""


class PackedConnection(Connection):
    """An asyncio connection whose commands are packed by hiredis."""

    def pack_command(self, *args: Any) -> list[bytes]:
        """One command in the Redis protocol, packed in C."""
        first = args[0]
        if isinstance(first, str):
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        return [hiredis.pack_command(args)]

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        """Many commands in one buffer, for a pipeline."""
        return [b"".join(self.pack_command(*command)[0] for command in commands)]


def node_client(
    url: str, *, max_connections: int | None = None, wait_s: float | None = None
) -> Redis:
    """A bytes-returning client for the Redis node at ``url``, not connected until first used.

    With ``max_connections`` a request waits (up to ``wait_s``) for a free connection rather
    than failing.
    """
    if max_connections is None:
        return Redis.from_url(url, decode_responses=False, connection_class=PackedConnection)
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=wait_s,
        decode_responses=False,
        connection_class=PackedConnection,
    )
    return Redis(connection_pool=pool)


def cluster_client(url: str, *, max_connections: int = 100) -> RedisCluster:
    """A bytes-returning client for the Redis Cluster one of whose nodes is at ``url``, not
    connected until first used; it follows MOVED and ASK, and learns the new layout when a
    replica takes over a master's slots."""
    return RedisCluster.from_url(url, decode_responses=False, max_connections=max_connections)


def replica_reader(url: str, *, max_connections: int = 100) -> RedisCluster:
    """A cluster client whose reads (XREAD, XRANGE, ...) go to a replica of the key's master
    (its master itself when it has none): what it reads, a failover cannot take back."""
    return RedisCluster.from_url(
        url,
        decode_responses=False,
        max_connections=max_connections,
        load_balancing_strategy=LoadBalancingStrategy.RANDOM_REPLICA,
    )


READS_SPARE = 32
"""Connections per node a cluster client has beyond one per partition it may read: its
appends, acknowledgements, claims and lease renewals."""


def pool_for_reads(partitions: int) -> int:
    """Connections per node for a cluster client that keeps a blocking read per partition it
    holds, each on a connection of its own: one for every partition (a process alone holds
    them all, and on a small cluster most sit on one node), and :data:`READS_SPARE` more."""
    return partitions + READS_SPARE


def open_client(
    url: str,
    *,
    cluster: bool,
    max_connections: int | None = None,
    wait_s: float | None = None,
) -> Client:
    """A client for ``url``: a cluster client when ``cluster``, else a node client (see
    :func:`node_client` for ``max_connections`` and ``wait_s``). Not connected until used."""
    if cluster:
        return cluster_client(url, max_connections=max_connections or 100)
    return node_client(url, max_connections=max_connections, wait_s=wait_s)


def is_cluster(client: Client) -> bool:
    """Whether ``client`` speaks to a Redis Cluster: a multi-key command must then keep to
    one hash slot, and a blocking read cover one slot."""
    return isinstance(client, RedisCluster)


async def detect_cluster(url: str) -> bool:
    """Whether the server at ``url`` is a Redis Cluster node (it says so in INFO)."""
    probe = Redis.from_url(url)
    try:
        info = await probe.info("cluster")
    finally:
        await probe.aclose()
    return bool(info.get("cluster_enabled"))


async def connect(url: str, *, cluster: bool | Literal["auto"] = "auto") -> Client:
    """A connected bytes-returning client for ``url``; ``cluster="auto"`` asks the server
    which kind it is. Raises redis.ConnectionError when the server does not answer."""
    if cluster == "auto":
        cluster = await detect_cluster(url)
    if cluster:
        client = cluster_client(url)
        await client.initialize()
        return client
    node = node_client(url)
    await node.ping()
    return node


def without_password(url: str) -> str:
    """``url`` fit to print: its password, if any, replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
