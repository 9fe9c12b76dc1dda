"""Where the services find their Redis: ``REDIS_URL``, or an embedded server on a data dir.

One embedded server serves a data dir at a time: while it runs, its URL is written in the
data dir (``server.url``), and any other ``domino`` command started there without
``REDIS_URL`` uses that server instead of starting a second one on the same files.

``domino up --cluster`` embeds a local Redis Cluster instead (3 masters with a replica each,
in the data dir's ``cluster/``, formed anew at each start): its first node's URL is written
the same way, so ``domino status`` and the other commands started there find it.

An embedded server has an ACL user per role of the service (services/redis/acl.py), each with
a fresh random password at every start, and its default user behind the server's own
password (services/redis/servers.py says why not off). ``server.url`` signs in as
the operator (what the other ``domino`` commands use); ``server.users`` holds every role's
URL, from which ``domino up`` gives each process its own. Both files are the owner's alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from services.config import DEFAULT_DATA_DIR, Settings
from services.redis import acl
from services.redis.servers import local_cluster, private_server, server_binary, server_version

URL_FILE = "server.url"
USERS_FILE = "server.users"
RUN_ID_FILE = "server.id"
CLUSTER_DIR = "cluster"


@dataclass(frozen=True, slots=True)
class ServiceUrls:
    """Where each process finds its Redis: the operator's URL, and each role's own (none
    with ``REDIS_URL``: there every process is given its URL by whoever deploys it)."""

    operator: str
    users: Mapping[str, str] = field(default_factory=dict)

    def of(self, user: str) -> str:
        """The URL the ACL user ``user`` signs in with (the operator's if it has none)."""
        return self.users.get(user, self.operator)


@contextlib.contextmanager
def service_urls(settings: Settings, *, cluster: bool = False) -> Iterator[ServiceUrls]:
    """:func:`redis_url`, with each role's URL beside the operator's."""
    with redis_url(settings, cluster=cluster) as url:
        if settings.redis_url:
            yield ServiceUrls(url)
            return
        try:
            found = json.loads((embedded_data_dir(settings) / USERS_FILE).read_text())
        except (OSError, ValueError):
            found = {}
        yield ServiceUrls(url, {str(k): str(v) for k, v in dict(found).items()})


@contextlib.contextmanager
def redis_url(settings: Settings, *, cluster: bool = False) -> Iterator[str]:
    """Yield the Redis to use: ``REDIS_URL`` if set; else the embedded server already running
    on ``DOMINO_DATA_DIR`` (default :data:`DEFAULT_DATA_DIR`); else a new embedded server there, so
    matches outlive the process — or, with ``cluster``, a new local Redis Cluster there, whose
    matches last as long as it runs."""
    if settings.redis_url:
        yield settings.redis_url
        return
    data_dir = embedded_data_dir(settings)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)  # every hand and every stock order is in there: the owner's alone
    descriptor = os.open(data_dir / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    os.fchmod(descriptor, 0o600)  # one made by an older version was 0644
    with os.fdopen(descriptor, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time decides who serves the dir
        running = _running(data_dir)
        if running is None:
            password = secrets.token_urlsafe(24)  # other local users cannot connect
            passwords = acl.new_passwords(acl.users())
            binary = server_binary()
            version = server_version(binary) if binary else None
            users = acl.config_lines(settings.prefix, passwords, version)
            server: contextlib.AbstractContextManager[str] = (
                _cluster(data_dir / CLUSTER_DIR, settings, password, users)
                if cluster
                else private_server(
                    appendfsync=settings.appendfsync,
                    data_dir=data_dir,
                    password=password,
                    users=users,
                )
            )
            admin = server.__enter__()
            try:
                url = _publish(data_dir, admin, passwords)
            except BaseException:
                server.__exit__(None, None, None)
                raise
        fcntl.flock(lock, fcntl.LOCK_UN)
    if running is not None:
        yield running
        return
    try:
        yield url
    finally:
        for name in (URL_FILE, USERS_FILE, RUN_ID_FILE):
            (data_dir / name).unlink(missing_ok=True)
        server.__exit__(None, None, None)


def _publish(data_dir: Path, admin: str, passwords: Mapping[str, str]) -> str:
    """Write where the server is and who may sign in to it; return the operator's URL.

    ``server.id`` holds the server's ``run_id`` (a new one at every start): the one server
    that answers with it is this data dir's, not another that took over its port."""
    with redis.Redis.from_url(admin) as client:
        run_id = str(client.info("server")["run_id"])
    urls = {user: acl.url_for(admin, user, secret) for user, secret in passwords.items()}
    _write_private(data_dir / RUN_ID_FILE, run_id)
    _write_private(data_dir / USERS_FILE, json.dumps(urls, indent=1))
    _write_private(data_dir / URL_FILE, urls[acl.OPERATOR.name])
    return urls[acl.OPERATOR.name]


@contextlib.contextmanager
def _cluster(
    directory: Path, settings: Settings, password: str, users: Sequence[str]
) -> Iterator[str]:
    """A local cluster of 3 masters with a replica each in ``directory``; its first URL."""
    appendfsync = settings.appendfsync
    with local_cluster(
        3,
        replicas=1,
        appendfsync=appendfsync,
        directory=directory,
        password=password,
        users=users,
    ) as nodes:
        yield nodes.urls[0]


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (the URL carries the server's password)."""
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)


def embedded_data_dir(settings: Settings) -> Path:
    """Where an embedded Redis keeps its files: ``DOMINO_DATA_DIR``, else the default, resolved."""
    return Path(settings.data_dir or DEFAULT_DATA_DIR).resolve()


def _running(data_dir: Path) -> str | None:
    """The URL of the embedded server serving ``data_dir``, if one answers: the very server
    that started there (its ``run_id``), not another that reuses its port."""
    try:
        url = (data_dir / URL_FILE).read_text().strip()
        run_id = (data_dir / RUN_ID_FILE).read_text().strip()
    except OSError:
        return None
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=0.5) as client:
            served = client.info("server").get("run_id")
    except (redis.RedisError, ValueError):
        return None
    return url if run_id and served == run_id else None
