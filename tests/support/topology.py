"""The two Redis topologies the service suites run on, and clients that fit either.

The session starts a private Redis node and a private Redis Cluster (3 masters, a replica
each); a suite parametrised over ``TOPOLOGIES`` gets one URL or the other, and the services
it starts find out which it is by asking the server. A test's own clients come from here, so
that on the cluster each command goes to the node that owns its key.
"""

from __future__ import annotations

import redis
from redis.asyncio import Redis, RedisCluster

from services.redis.connection import Client

TOPOLOGIES = ("node", "cluster")
"""One Redis node; a Redis Cluster of 3 masters with a replica each."""

_CLUSTER_URLS: set[str] = set()


def mark_cluster(urls: list[str]) -> None:
    """Remember that ``urls`` are a cluster's nodes (the session fixture says so)."""
    _CLUSTER_URLS.update(urls)


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` is a node of the session's cluster."""
    return url in _CLUSTER_URLS


def client_for(url: str) -> Client:
    """An asyncio client for ``url``, a cluster client on the cluster."""
    if is_cluster_url(url):
        return RedisCluster.from_url(url)
    return Redis.from_url(url)


def sync_client_for(url: str) -> redis.Redis | redis.RedisCluster:
    """A blocking client for ``url``, a cluster client on the cluster."""
    if is_cluster_url(url):
        return redis.RedisCluster.from_url(url)
    return redis.Redis.from_url(url)


def flush(url: str) -> None:
    """Empty the Redis at ``url`` (every master of a cluster)."""
    if is_cluster_url(url):
        with redis.RedisCluster.from_url(url) as cluster:
            cluster.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        with redis.Redis.from_url(url) as node:
            node.flushall()
