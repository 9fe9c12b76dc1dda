"""A network between the parts of a test: network namespaces, a bridge, delays and cuts.

Loopback hides what a network does: a replica trails its master by microseconds there, and a
process is never cut off from Redis while the machine runs. Here each part a test starts (a
Redis node, a referee, a gateway) can have a network namespace of its own (``ip netns add``)
with one address, 10.77.K.n/24, on a veth whose other end is on a bridge in a namespace of
its own (the switch). The test process reaches every address through one more veth on the
bridge (10.77.K.254). Nothing else on the machine sees these addresses, and everything is
deleted when the network closes, a failing test's too.

This kernel has no ``netem``, so delay is a TCP proxy (:func:`delay`): a process that takes
the connections one namespace makes to an address and forwards each direction after a fixed
delay, in order (Toxiproxy's latency toxic). A partition is a host's link taken down at the
bridge (:meth:`Host.cut`): its packets are dropped, its connections hang, as on a real
network, until the link is up again; or the proxy cutting its connections and dropping what
was in flight (:meth:`DelayProxy.cut`).

Names carry the test process's id and a random tag, so two pytest workers never collide,
and namespaces left by a process that died without closing its network are deleted by the
next one. Run as ``python -m tests.support.netns proxy ...`` this module is the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import functools
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.redis.servers import Placement

PREFIX = "dn"
"""Every namespace made here is named ``dn-<pid>-<tag>-<role>``."""
SUBNETS = ipaddress.IPv4Network("10.77.0.0/16")
NETNS_DIR = Path("/var/run/netns")
_LOCK = Path("/tmp/domino-netns.lock")  # held while a network picks its /24
_CLONE_NEWNET = 0x40000000
_GATEWAY_HOST = 254  # the test process's own address on every network


class NetnsUnavailable(RuntimeError):
    """Raised when network namespaces cannot be made here; the message says why."""


def why_unavailable() -> str | None:
    """Why this machine cannot give a test network namespaces (None: it can)."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root (run the tests as root)"
    if shutil.which("ip") is None:
        return "no `ip` command (install iproute2)"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def require_netns() -> None:
    """Skip the calling test where namespaces cannot be made, saying why; fail instead when
    the environment variable CI is set, so that CI never passes by skipping."""
    why = why_unavailable()
    if why is None:
        return
    message = f"needs network namespaces: {why}"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: the network tests must run)")
    pytest.skip(message)


@dataclass
class Host:
    """One namespace on the network, with one address."""

    name: str
    netns: str
    address: str
    link: str
    """The link's end on the bridge, in the switch's namespace: down means cut off."""
    switch: str

    @property
    def wrapper(self) -> tuple[str, ...]:
        """The command that runs the rest of its command line in this namespace."""
        return ("ip", "netns", "exec", self.netns)

    @property
    def placement(self) -> Placement:
        """Where a Redis server runs on this host (services/redis/servers.py)."""
        return Placement(self.address, self.wrapper)

    def cut(self) -> None:
        """Take the host's link down at the bridge: every packet to or from it is dropped, so
        its connections hang (no reset) and new ones go unanswered."""
        _ip("-n", self.switch, "link", "set", self.link, "down")

    def restore(self) -> None:
        """Bring the host's link up again after :meth:`cut`."""
        _ip("-n", self.switch, "link", "set", self.link, "up")


@dataclass
class DelayProxy:
    """A running delay proxy: what one namespace sends to some ports of an address, and what
    comes back, each held ``delay_ms`` before it is passed on."""

    process: subprocess.Popen[str]
    delay_ms: float
    cuts: int = 0

    def cut(self, kill: int | None = None) -> None:
        """Drop every connection at once, with what was in flight in either direction, and
        refuse new ones until :meth:`heal`: a link that died. With ``kill``, SIGKILL that
        process first, in the same instant: a host that died, and what it had on the wire."""
        self._say("cut" if kill is None else f"cut {kill}")
        self.cuts += 1

    def heal(self) -> None:
        """Accept connections again after :meth:`cut`."""
        self._say("heal")

    def _say(self, order: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(order + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if answer != order:
            raise NetnsUnavailable(f"the delay proxy answered {answer!r} to {order!r}")

    def stop(self) -> None:
        """Stop the proxy process."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@dataclass
class Network:
    """A bridge, the hosts on it and the proxies between them; all deleted by :meth:`close`."""

    tag: str
    subnet: ipaddress.IPv4Network
    switch: str
    uplink: str
    hosts: dict[str, Host] = field(default_factory=dict)
    proxies: list[DelayProxy] = field(default_factory=list)

    @property
    def own_address(self) -> str:
        """The test process's address on this network."""
        return str(self.subnet[_GATEWAY_HOST])

    def host(self, name: str) -> Host:
        """A new namespace on the bridge with the next address, its loopback up."""
        index = len(self.hosts) + 1
        if index >= _GATEWAY_HOST:
            raise NetnsUnavailable("a network holds at most 253 hosts")
        netns = f"{PREFIX}-{self.tag}-{name}"
        link = f"h{index}"
        address = str(self.subnet[index])
        _ip("netns", "add", netns)
        self.hosts[name] = host = Host(name, netns, address, link, self.switch)
        _ip("-n", self.switch, "link", "add", link, "type", "veth", "peer", "eth0", "netns", netns)
        _ip("-n", self.switch, "link", "set", link, "master", "br0", "up")
        _ip("-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        # An address put on this host's loopback by delay() is another host's: never answer
        # ARP for it on the bridge, nor use it as a source there.
        for setting in ("arp_ignore=1", "arp_announce=2"):
            _ip("netns", "exec", netns, "sysctl", "-qw", f"net.ipv4.conf.all.{setting}")
        return host

    def delay(
        self, a: Host, a_ports: Sequence[int], b: Host, b_ports: Sequence[int], delay_ms: float
    ) -> DelayProxy:
        """Delay every connection between ``a`` and ``b`` (to ``a_ports`` of ``a``, to
        ``b_ports`` of ``b``), each way, by ``delay_ms``; their traffic with others is
        untouched.

        Each host has the other's address on its loopback, so it reaches the other locally,
        where the proxy listens; the proxy forwards from the test's own namespace (each end
        sees connections from the test's address: both directions go through the proxy, so
        neither host answers the other on a path the other did not use).
        """
        routes = []
        for here, there, ports in ((a, b, b_ports), (b, a, a_ports)):
            _ip("-n", here.netns, "addr", "add", f"{there.address}/32", "dev", "lo")
            listen = NETNS_DIR / here.netns
            routes += [f"{listen}@{there.address}:{p}={there.address}:{p}" for p in ports]
        command = [
            sys.executable,
            "-m",
            "tests.support.netns",
            "proxy",
            "--delay-ms",
            str(delay_ms),
            *routes,
        ]
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        proxy = DelayProxy(process, delay_ms)
        self.proxies.append(proxy)
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise NetnsUnavailable(f"the delay proxy did not start (exit {process.poll()})")
        return proxy

    def close(self) -> None:
        """Stop the proxies and delete every namespace (their links go with them)."""
        for proxy in self.proxies:
            proxy.stop()
        for host in self.hosts.values():
            _ip("netns", "del", host.netns, check=False)
        _ip("netns", "del", self.switch, check=False)
        _ip("link", "del", self.uplink, check=False)


@contextlib.contextmanager
def network() -> Iterator[Network]:
    """A new network (a bridge, and the test process on it) on a /24 of 10.77.0.0/16 that no
    other network here uses; deleted on exit, whatever happened."""
    tag = f"{os.getpid()}-{secrets.token_hex(2)}"
    switch = f"{PREFIX}-{tag}-switch"
    uplink = f"{PREFIX}{secrets.token_hex(4)}"  # in the test's own namespace: 10 characters
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _delete_orphans()
        subnet = _free_subnet()
        net = Network(tag, subnet, switch, uplink)
        try:
            _ip("netns", "add", switch)
            _ip("-n", switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", switch, "link", "set", "br0", "up")
            _ip("link", "add", uplink, "type", "veth", "peer", "up0", "netns", switch)
            _ip("-n", switch, "link", "set", "up0", "master", "br0", "up")
            _ip("addr", "add", f"{net.own_address}/{subnet.prefixlen}", "dev", uplink)
            _ip("link", "set", uplink, "up")
        except BaseException:
            net.close()
            raise
    try:
        yield net
    finally:
        net.close()


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of :data:`SUBNETS` that no address of this namespace is on."""
    shown = _ip("-o", "-4", "addr", "show").stdout
    used = {
        ipaddress.IPv4Interface(found).network
        for found in re.findall(r"inet (\S+)", shown)
        if ipaddress.IPv4Interface(found).ip in SUBNETS
    }
    for candidate in SUBNETS.subnets(new_prefix=24):
        if candidate not in used and candidate.network_address.packed[2] != 0:
            return candidate
    raise NetnsUnavailable("every /24 of 10.77.0.0/16 is in use")


def _delete_orphans() -> None:
    """Delete the namespaces of networks whose process has died without closing them."""
    if not NETNS_DIR.is_dir():
        return
    for entry in NETNS_DIR.iterdir():
        found = re.fullmatch(rf"{PREFIX}-(\d+)-[0-9a-f]+-.+", entry.name)
        if found and not Path(f"/proc/{found[1]}").exists():
            _ip("netns", "del", entry.name, check=False)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetnsUnavailable(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


# The proxy process.


def _enter(path: str) -> None:
    """Move this thread into the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


def _listener(netns: str, host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` in ``netns``; this thread stays where it was."""
    home_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _enter(netns)
        try:
            return socket.create_server((host, port), backlog=128)
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home_fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(home_fd)


class _Proxy:
    """Connections taken in one namespace, forwarded from this one, each direction delayed."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.open = True
        self.writers: set[asyncio.StreamWriter] = set()

    async def serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to: str
    ) -> None:
        """Forward one connection to ``to`` (``host:port``), each direction delayed."""
        host, port = to.rsplit(":", 1)
        if not self.open:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.transport.abort()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.writers.add(w)
        try:
            await asyncio.gather(
                self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
            )
        finally:
            for w in (writer, up_writer):
                self.writers.discard(w)
                w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Pass what ``reader`` gives to ``writer`` ``delay_s`` later, in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        delivering = asyncio.create_task(deliver())
        try:
            while data := await reader.read(1 << 16):
                queue.put_nowait((loop.time() + self.delay_s, data))
            queue.put_nowait((loop.time() + self.delay_s, b""))
            await delivering
        finally:
            delivering.cancel()

    def cut(self) -> None:
        """Reset every connection, dropping what is queued, and refuse new ones."""
        self.open = False
        for writer in list(self.writers):
            writer.transport.abort()  # a reset, and whatever was queued is gone
        self.writers.clear()


async def _run_proxy(delay_ms: float, routes: list[str]) -> None:
    proxy = _Proxy(delay_ms / 1000)
    servers = []
    for route in routes:
        listen, to = route.split("=")
        netns, listen = listen.split("@")
        host, port = listen.rsplit(":", 1)
        sock = _listener(netns, host, int(port))
        servers.append(await asyncio.start_server(functools.partial(proxy.serve, to=to), sock=sock))
    loop = asyncio.get_running_loop()
    orders = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(orders), sys.stdin)
    print("ready", flush=True)
    while line := (await orders.readline()).decode().strip():
        if line.startswith("cut"):
            for pid in line.split()[1:]:
                os.kill(int(pid), signal.SIGKILL)
            proxy.cut()
        elif line == "heal":
            proxy.open = True
        print(line, flush=True)
    for server in servers:
        server.close()


def main(argv: Sequence[str] | None = None) -> None:
    """``proxy --delay-ms MS NETNS@HOST:PORT=HOST:PORT ...``: listen on each first address
    in the namespace whose file is NETNS, forward to the second from this namespace."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.netns")
    commands = parser.add_subparsers(dest="command", required=True)
    proxy = commands.add_parser("proxy")
    proxy.add_argument("--delay-ms", type=float, required=True)
    proxy.add_argument("routes", nargs="+")
    args = parser.parse_args(argv)
    asyncio.run(_run_proxy(args.delay_ms, args.routes))


if __name__ == "__main__":
    main()
