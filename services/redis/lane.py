"""A lean Redis connection for the hottest calls: the referee's appends and reads, the bots'
reads and answers, the gateway's moves and its blocking read of the logs.

redis-py's asyncio client pays on every call for its connection pool, a timeout around each
write and read, retries and response callbacks; under the gateway bench, the sender's
pipelines and the hub's XREADs spent a quarter of the gateway's CPU there, and the referee's
append pipeline a fifth of the referee's. A :class:`Lane` is one connection that writes each
batch of commands at once (packed by hiredis) and hands the batch its replies, parsed by
hiredis, in order, raw as Redis sends them (an XREAD entry's fields are a flat list).
Everything else goes through redis-py.

It speaks to the Redis node of a ``redis://``, ``rediss://`` or ``unix://`` URL (or of a
redis-py node client: :func:`lane_of`), as its user, password and database. A lost connection
fails the batches waiting on it with redis-py's ConnectionError, and a batch unanswered for
``timeout_s`` (past its blocking time) fails with redis-py's TimeoutError and drops the
connection, as redis-py's socket timeout would; the next call connects again.
"""

from __future__ import annotations

import asyncio
import ssl
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import hiredis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection as AsyncSSLConnection
from redis.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.redis.lua import Arg, Call, Client, LuaScript

_CERTS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


TIMEOUT_S = 5.0
"""How long a batch may wait for its replies (beyond its blocking time): redis-py's default
socket timeout."""
_CHECK_S = 0.5
"""How often a connection with batches waiting looks at the oldest one's deadline."""


class _Batch:
    """Commands written together, waiting for their replies until ``deadline`` (loop time)."""

    __slots__ = ("deadline", "done", "replies", "size")

    def __init__(self, size: int, done: asyncio.Future[list[Any]], deadline: float) -> None:
        self.size = size
        self.replies: list[Any] = []
        self.done = done
        self.deadline = deadline


class _Connection(asyncio.Protocol):
    """One socket to Redis: batches go out in order, replies come back in order; a batch
    unanswered past its deadline drops the connection (a watchdog that wakes every _CHECK_S
    while batches wait, not a timer per batch)."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.reader = hiredis.Reader()  # an error reply comes as a ReplyError, not raised
        self.waiting: deque[_Batch] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.timeout_s = timeout_s
        self._watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def send(
        self, commands: Sequence[Sequence[Arg]], block_s: float = 0.0
    ) -> asyncio.Future[list[Any]]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[Any]] = loop.create_future()
        if self.closed or self.transport is None:
            done.set_exception(RedisConnectionError("the connection to Redis is closed"))
            return done
        self.waiting.append(_Batch(len(commands), done, loop.time() + block_s + self.timeout_s))
        if self._watchdog is None:
            self._watchdog = loop.call_later(_CHECK_S, self._check)
        self.transport.write(b"".join(hiredis.pack_command(_args(c)) for c in commands))
        return done

    def _check(self) -> None:
        self._watchdog = None
        if self.closed or not self.waiting:
            return
        loop = asyncio.get_running_loop()
        if loop.time() > self.waiting[0].deadline:
            self._fail(RedisTimeoutError("Redis did not answer in time"))
            if self.transport is not None:
                self.transport.abort()
            return
        self._watchdog = loop.call_later(_CHECK_S, self._check)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not False:
                batch = self.waiting[0]
                if isinstance(reply, hiredis.ReplyError):
                    reply = _error(str(reply))
                batch.replies.append(reply)
                if len(batch.replies) == batch.size:
                    self.waiting.popleft()
                    if not batch.done.done():
                        batch.done.set_result(batch.replies)
        except (hiredis.ProtocolError, IndexError) as e:  # nothing more can be trusted
            self._fail(RedisConnectionError(f"Redis sent what the lane cannot read: {e!r}"))
            if self.transport is not None:
                self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"lost the connection to Redis: {exc or 'closed'}"))

    def _fail(self, error: Exception) -> None:
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        while self.waiting:
            batch = self.waiting.popleft()
            if not batch.done.done():
                batch.done.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _args(command: Sequence[Arg]) -> tuple[Any, ...]:
    return tuple(command)  # hiredis's stub types its argument as a tuple of one


def _error(message: str) -> ResponseError:
    if message.startswith("NOSCRIPT"):
        return NoScriptError(message)
    return ResponseError(message)


class Lane:
    """One pipelined connection to the Redis node at ``url`` (or of redis-py's connection
    ``options``), connected on first use."""

    def __init__(
        self,
        url: str | None = None,
        *,
        options: dict[str, Any] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        if options is None:
            if url is None:
                raise ValueError("a lane needs a URL or a node's connection options")
            options = parse_url(url)  # type: ignore[no-untyped-call]
        self.options: dict[str, Any] = options
        self.timeout_s = timeout_s
        self._connection: _Connection | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def of(cls, client: Redis, timeout_s: float = TIMEOUT_S) -> Lane:
        """A lane to the node ``client`` speaks to, as the same user (its own connection)."""
        pool = client.connection_pool
        options = dict(pool.connection_kwargs)
        options["connection_class"] = pool.connection_class  # TLS, for a rediss:// client
        return cls(options=options, timeout_s=timeout_s)

    async def pipeline(self, commands: Sequence[Sequence[Arg]], block_s: float = 0.0) -> list[Any]:
        """Send the commands at once; their replies in order, an error reply as its exception
        (ResponseError, NoScriptError). Raises ConnectionError when Redis cannot be reached or
        the connection is lost before every reply came, TimeoutError when they did not come
        within the lane's timeout (plus ``block_s``, a blocking command's own wait)."""
        if not commands:  # no reply would ever complete an empty batch
            return []
        connection = self._connection
        if connection is None or connection.closed:
            connection = await self._connect()
        return await connection.send(commands, block_s)

    async def call(self, *args: Arg) -> Any:
        """One command's reply; an error reply is raised."""
        (reply,) = await self.pipeline([args])
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def run(self, script: LuaScript, calls: Sequence[Call]) -> list[Any]:
        """``script`` once per call in one batch, as :meth:`LuaScript.many` runs it: by SHA,
        loaded first if the server lost it; a failed call's exception in its slot."""
        commands = [("EVALSHA", script.sha, len(keys), *keys, *args) for keys, args in calls]
        results = await self.pipeline(commands)
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:
            await self.call("SCRIPT", "LOAD", script.source)
            retried = await self.pipeline([commands[i] for i in missing])
            for i, result in zip(missing, retried, strict=True):
                results[i] = result
        return results

    async def aclose(self) -> None:
        """Close the connection (a later call opens another)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _connect(self) -> _Connection:
        async with self._lock:
            connection = self._connection
            if connection is not None and not connection.closed:
                return connection
            loop = asyncio.get_running_loop()
            options = self.options
            try:

                def made() -> _Connection:
                    return _Connection(self.timeout_s)

                connecting = (
                    loop.create_unix_connection(made, options["path"])
                    if "path" in options
                    else loop.create_connection(
                        made,
                        options.get("host", "localhost"),
                        options.get("port", 6379),
                        ssl=_tls(options),
                    )
                )
                _, fresh = await asyncio.wait_for(connecting, self.timeout_s)
            except TimeoutError as e:
                raise RedisTimeoutError(f"cannot reach Redis in {self.timeout_s:g} s") from e
            except OSError as e:
                raise RedisConnectionError(f"cannot reach Redis: {e}") from e
            hello: list[tuple[Arg, ...]] = []
            if options.get("password"):
                user = options.get("username")
                secret = options["password"]
                hello.append(("AUTH", user, secret) if user else ("AUTH", secret))
            if options.get("db"):
                hello.append(("SELECT", options["db"]))
            if hello:
                for reply in await fresh.send(hello):
                    if isinstance(reply, Exception):
                        fresh.close()
                        raise reply
            self._connection = fresh
            return fresh


class ClusterLane:
    """A :class:`Lane`'s calls on a Redis Cluster, through the cluster client: each command
    goes to the node that owns its key (following MOVED and ASK), a batch as one pipeline per
    node. The blocking read of the logs has no place here: on a cluster it is one read per
    stream (see services/gateway/hub.py)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The commands' replies in order, an error reply as its exception."""
        pipe = self.client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute(raise_on_error=False))

    async def call(self, *args: Arg) -> Any:
        """One command's reply; an error reply is raised."""
        return await self.client.execute_command(*args)

    async def run(self, script: LuaScript, calls: Sequence[Call]) -> list[Any]:
        """``script`` once per call, as :meth:`LuaScript.many` runs it."""
        return await script.many(self.client, calls)

    async def aclose(self) -> None:
        """Nothing of its own to close: the cluster client is the gateway's."""


_SHARED: weakref.WeakKeyDictionary[Any, Lane | ClusterLane] = weakref.WeakKeyDictionary()


def lane_of(client: Client) -> Lane | ClusterLane:
    """The lane every store and transport of ``client`` shares for its pipelines (not for a
    blocking read, which would hold up what is queued behind it: give that a lane of its
    own): a :class:`Lane` to a node client's node, a :class:`ClusterLane` over a cluster
    client. Closed by :func:`close_lane`, or with its socket when the client is collected."""
    lane = _SHARED.get(client)
    if lane is None:
        lane = ClusterLane(client) if isinstance(client, RedisCluster) else Lane.of(client)
        _SHARED[client] = lane
    return lane


async def close_lane(client: Client) -> None:
    """Close the lane :func:`lane_of` gave ``client``'s users, if any."""
    lane = _SHARED.pop(client, None)
    if lane is not None:
        await lane.aclose()


def _tls(options: dict[str, Any]) -> ssl.SSLContext | None:
    """The TLS context of a ``rediss://`` URL's options (its ``ssl_cert_reqs``, and
    ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile`` if given), or None."""
    kind = options.get("connection_class")
    if not (isinstance(kind, type) and issubclass(kind, (SSLConnection, AsyncSSLConnection))):
        return None
    context = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
    if options.get("ssl_certfile"):
        context.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"))
    reqs = _CERTS.get(str(options.get("ssl_cert_reqs", "required")).lower(), ssl.CERT_REQUIRED)
    if reqs != ssl.CERT_REQUIRED:
        context.check_hostname = False
    context.verify_mode = reqs
    return context
