"""Every stream and key the services use, built from the store's partitioned key layout.

<prefix>:{p<n>}:cmd                  commands for the referee
<prefix>:{p<n>}:turns:<pool>         turns for one pool of bots (an outbox stream)
<prefix>:{p<n>}:deadlines            sorted set: match id -> its turn's deadline (ms)
<prefix>:{p<n>}:proj:<name>...       projections (checkpoint and data)
<prefix>:replies:<sender>            rejections back to one sender
<prefix>:dead                        messages parked after failing too often
"""

from __future__ import annotations

import re

from services.store.keys import Keys

_POOL = re.compile(r"[a-z0-9_\-]{1,32}")
_SENDER = re.compile(r"[A-Za-z0-9_.:\-]{1,100}")


class Topology(Keys):
    """The store's keys plus the services' streams."""

    __slots__ = ()

    def turns(self, partition: int, pool: str = "external") -> str:  # type: ignore[override]
        """The turns stream of one pool of bots in a partition."""
        if _POOL.fullmatch(pool) is None:
            raise ValueError(f"invalid bot pool name {pool!r}")
        return f"{self.prefix}:{self.tag(partition)}:turns:{pool}"

    def deadlines(self, partition: int) -> str:
        """The sorted set of turn deadlines of a partition's matches."""
        return f"{self.prefix}:{self.tag(partition)}:deadlines"

    def replies(self, sender: str) -> str:
        """Where rejections for ``sender`` are sent."""
        if _SENDER.fullmatch(sender) is None:
            raise ValueError(f"invalid sender name {sender!r}")
        return f"{self.prefix}:replies:{sender}"

    def is_reply_stream(self, key: str) -> bool:
        """Whether ``key`` is some sender's reply stream (and nothing else)."""
        head = f"{self.prefix}:replies:"
        return key.startswith(head) and _SENDER.fullmatch(key[len(head) :]) is not None

    @property
    def dead_letters(self) -> str:
        """The dead-letter stream."""
        return f"{self.prefix}:dead"

    def all_turns(self, pool: str) -> list[str]:
        """The turns streams of one pool in every partition."""
        return [self.turns(p, pool) for p in range(self.partitions)]
