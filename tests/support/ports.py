"""Ports for the processes a test starts."""

from __future__ import annotations

import random
import socket

_EPHEMERAL = (32768, 60999)


def _ephemeral_range() -> tuple[int, int]:
    """Where the kernel picks the local ports of outgoing connections (and of ``bind(0)``)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return _EPHEMERAL


def consecutive_free_ports(n: int) -> int:
    """The first of ``n`` consecutive loopback ports nothing listens on now, below the
    ephemeral range: a port in it could be taken by any outgoing connection between this
    check and the moment the process that is to listen there starts."""
    low, _ = _ephemeral_range()
    top = low - n if low - n > 12_000 else 60_000 - n
    for _ in range(200):
        base = random.randrange(10_000, top)
        sockets: list[socket.socket] = []
        try:
            for k in range(n):
                sockets.append(socket.socket())
                sockets[-1].bind(("127.0.0.1", base + k))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports")
