"""Key layout: every key of a match and of its partition carries the partition's hash tag.

    <prefix>:{p<n>}:m:<match_id>        match stream, one entry per event, never trimmed
    <prefix>:{p<n>}:dedupe:<match_id>   hash: command id -> result of the append it made
    <prefix>:{p<n>}:log                 notification log of the partition
    <prefix>:{p<n>}:cmd                 commands for the partition's referee
    <prefix>:{p<n>}:turns:<pool>        turns for one pool of bots (an outbox stream)
    <prefix>:{p<n>}:deadlines           sorted set: match id -> its turn's deadline (ms)
    <prefix>:{p<n>}:began               sorted set: match id -> when its current turn began (ms)
    <prefix>:{p<n>}:clock               when the partition's deadlines were last checked (ms)
    <prefix>:{p<n>}:watch               sorted set: live match id -> when to check it still moves
    <prefix>:{p<n>}:owner               the referee holding the partition (expiring lease)
    <prefix>:{p<n>}:proj:<name>[:...]   a projection's checkpoint and data
    <prefix>:{p<n>}:seat:<match_id>     a lobby match: rules, seats, token hashes
    <prefix>:{p<n>}:lobby               sorted set: the partition's matches waiting for players
    <prefix>:{p<n>}:limit:holds:<id>    the limit holds a lobby match frees when it starts
    <prefix>:{p<n>}:lease:<role>        a partition's lease held for another role (archiver)
    <prefix>:replies:<sender>           rejections back to one sender
    <prefix>:dead                       messages parked after failing too often

This module is the one place that names keys and streams: the store's and the services'.

Redis Cluster hashes only the text between the first `{` and the next `}`, so all keys of a
partition share one slot and a single script may touch all of them.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from events.vocabulary import POOL_NAME
from services.store.errors import InvalidMatchId

DEFAULT_PREFIX = "dom"
DEFAULT_PARTITIONS = 8
MAX_MATCH_ID_LENGTH = 128

_MATCH_ID = re.compile(rf"[^\s{{}}\x00-\x1f\x7f]{{1,{MAX_MATCH_ID_LENGTH}}}")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_SENDER = re.compile(r"[A-Za-z0-9_.:\-]{1,100}")
# Every command and turn asks for its match's partition and its pool's stream: remembered.
_PARTITIONS: dict[tuple[str, int], int] = {}
_PARTITIONS_KEPT = 10_000
_TURNS: dict[tuple[str, int, str], str] = {}
_TURNS_KEPT = 4096
EXTERNAL = "external"
"""The pool of seats played from outside, through the gateway (no turn messages)."""


def validate_match_id(match_id: str) -> None:
    """Raise InvalidMatchId unless `match_id` is 1-128 characters without braces or spaces."""
    if not isinstance(match_id, str) or _MATCH_ID.fullmatch(match_id) is None:
        raise InvalidMatchId(
            f"invalid match id {match_id!r}: 1-{MAX_MATCH_ID_LENGTH} characters, "
            "no braces, whitespace or control characters"
        )


def partition_of(match_id: str, partitions: int) -> int:
    """The partition (0..partitions-1) a match belongs to; stable across processes and runs."""
    return zlib.crc32(match_id.encode()) % partitions


def hash_tag(key: str) -> str | None:
    """The part of `key` Redis Cluster hashes when it has a non-empty `{...}`, else None."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end <= start + 1:
        return None
    return key[start + 1 : end]


@dataclass(frozen=True, slots=True)
class Keys:
    """Builds every key of the store for one prefix and number of partitions."""

    prefix: str = DEFAULT_PREFIX
    partitions: int = DEFAULT_PARTITIONS

    def __post_init__(self) -> None:
        if not self.prefix or any(c in self.prefix for c in "{} \t\r\n"):
            raise ValueError(f"invalid key prefix {self.prefix!r}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be at least 1, not {self.partitions}")

    def partition_of(self, match_id: str) -> int:
        """The partition of a match; raises InvalidMatchId for an invalid id."""
        known = _PARTITIONS.get((match_id, self.partitions))
        if known is not None:
            return known
        validate_match_id(match_id)
        if len(_PARTITIONS) >= _PARTITIONS_KEPT:
            _PARTITIONS.clear()
        partition = _PARTITIONS[match_id, self.partitions] = partition_of(match_id, self.partitions)
        return partition

    def check_partition(self, partition: int) -> None:
        """Raise ValueError unless `partition` is one of this layout's partitions."""
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} not in 0..{self.partitions - 1}")

    def tag(self, partition: int) -> str:
        """The hash tag shared by a partition's keys, braces included: `{p3}`."""
        return f"{{p{partition}}}"

    def match(self, match_id: str) -> str:
        """The match stream: one entry per event, entry id `0-<version>`."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:m:{match_id}"

    def dedupe(self, match_id: str) -> str:
        """The hash of command ids already applied to a match."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:dedupe:{match_id}"

    def inflight(self, match_id: str, command_id: str) -> str:
        """Marks a command id sent and not yet answered (a gateway's move on its way)."""
        tag = self.tag(self.partition_of(match_id))
        return f"{self.prefix}:{tag}:inflight:{match_id}:{command_id}"

    def log(self, partition: int) -> str:
        """The notification log of a partition: every event of its matches, in append order."""
        return f"{self.prefix}:{self.tag(partition)}:log"

    def turns(self, partition: int, pool: str = EXTERNAL) -> str:
        """The turns stream of one pool of bots in a partition; ValueError for a bad pool."""
        known = _TURNS.get((self.prefix, partition, pool))
        if known is not None:
            return known
        if POOL_NAME.fullmatch(pool) is None:
            raise ValueError(f"invalid bot pool name {pool!r}")
        if len(_TURNS) >= _TURNS_KEPT:
            _TURNS.clear()
        stream = _TURNS[self.prefix, partition, pool] = (
            f"{self.prefix}:{self.tag(partition)}:turns:{pool}"
        )
        return stream

    def all_turns(self, pool: str) -> list[str]:
        """The turns streams of one pool in every partition."""
        return [self.turns(p, pool) for p in range(self.partitions)]

    def deadlines(self, partition: int) -> str:
        """The sorted set of turn deadlines of a partition's matches."""
        return f"{self.prefix}:{self.tag(partition)}:deadlines"

    def turn_began(self, partition: int) -> str:
        """The sorted set of when each of a partition's matches began its current turn, on the
        Redis server's clock (a move that reached the commands before is not an answer to it)."""
        return f"{self.prefix}:{self.tag(partition)}:began"

    def clock(self, partition: int) -> str:
        """When the owner of a partition last checked its deadlines, on the Redis server's
        clock: a longer gap than a stall's is time nobody served the partition."""
        return f"{self.prefix}:{self.tag(partition)}:clock"

    def watch(self, partition: int) -> str:
        """The sorted set of live matches: match id -> when to check that it still moves (and
        send its turn again if the turn was lost)."""
        return f"{self.prefix}:{self.tag(partition)}:watch"

    def owner(self, partition: int) -> str:
        """The lease naming the referee that holds a partition."""
        return f"{self.prefix}:{self.tag(partition)}:owner"

    @property
    def referees(self) -> str:
        """The sorted set of live referees' heartbeats."""
        return f"{self.prefix}:referees"

    def lease(self, partition: int, role: str) -> str:
        """The lease naming the process of ``role`` (e.g. the archiver) holding a partition;
        the referees' is :meth:`owner`."""
        if _NAME.fullmatch(role) is None:
            raise ValueError(f"invalid role name {role!r}")
        return f"{self.prefix}:{self.tag(partition)}:lease:{role}"

    def holders(self, role: str) -> str:
        """The sorted set of the heartbeats of the live processes of ``role``."""
        if _NAME.fullmatch(role) is None:
            raise ValueError(f"invalid role name {role!r}")
        return f"{self.prefix}:holders:{role}"

    def heartbeats_of(self, role: str) -> str:
        """The heartbeats of the processes of ``role`` that share the partitions by lease: the
        referees' are :attr:`referees`, every other role's :meth:`holders`."""
        return self.referees if role == "referee" else self.holders(role)

    def lease_of(self, partition: int, role: str) -> str:
        """The lease on a partition of the process of ``role`` that holds it: the referees'
        is :meth:`owner`, every other role's :meth:`lease`."""
        return self.owner(partition) if role == "referee" else self.lease(partition, role)

    def lobby_match(self, match_id: str) -> str:
        """A lobby match's hash: rules, seats, names, token hashes (services/lobby/tables.py)."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:seat:{match_id}"

    def lobby(self, partition: int) -> str:
        """The sorted set of a partition's lobby matches waiting for players."""
        return f"{self.prefix}:{self.tag(partition)}:lobby"

    def seat_token(self, digest: str) -> str:
        """Which match and seat a seat token (its SHA-256) opens."""
        return f"{self.prefix}:{self.tag(partition_of(digest, self.partitions))}:token:{digest}"

    def holds(self, match_id: str) -> str:
        """The set of limit holds a lobby match frees when it starts."""
        return f"{self.prefix}:{self.tag(self.partition_of(match_id))}:limit:holds:{match_id}"

    def replies(self, sender: str) -> str:
        """Where rejections for ``sender`` are sent; ValueError for a bad sender name."""
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

    def commands(self, partition: int) -> str:
        """The stream of commands for a partition's referee."""
        return f"{self.prefix}:{self.tag(partition)}:cmd"

    def projection(self, name: str, partition: int) -> str:
        """The checkpoint key of a projection; its data keys start with this plus `:`."""
        if _NAME.fullmatch(name) is None:
            raise ValueError(f"invalid projection name {name!r}")
        return f"{self.prefix}:{self.tag(partition)}:proj:{name}"

    # -- accounts: every key of one account shares the account id's hash tag -------------------

    def _account_tag(self, account_id: str) -> str:
        return self.tag(partition_of(account_id, self.partitions))

    def account(self, account_id: str) -> str:
        """An account's hash: its name, token hash, feed counter, banned flag."""
        return f"{self.prefix}:{self._account_tag(account_id)}:acct:{account_id}"

    def account_feed(self, account_id: str) -> str:
        """An account's event stream (entry ids ``<n>-0``, n = 1, 2, 3 ...)."""
        return f"{self.prefix}:{self._account_tag(account_id)}:acct:{account_id}:feed"

    def account_live(self, account_id: str) -> str:
        """The set of an account's matches that have started and not ended."""
        return f"{self.prefix}:{self._account_tag(account_id)}:acct:{account_id}:live"

    def account_mark(self, account_id: str, match_id: str) -> str:
        """What an account was told of a match's end, kept for a while (its feed's
        ``match_finished`` waiting for the start to be written, or empty once told)."""
        return f"{self.prefix}:{self._account_tag(account_id)}:acct:{account_id}:ended:{match_id}"

    def account_name(self, skeleton: str) -> str:
        """Which account holds a name (by its look-alike skeleton)."""
        return f"{self.prefix}:{self.tag(partition_of(skeleton, self.partitions))}:name:{skeleton}"

    def account_token(self, digest: str) -> str:
        """Which account an API token (its SHA-256) opens."""
        return f"{self.prefix}:{self.tag(partition_of(digest, self.partitions))}:atoken:{digest}"

    @property
    def accounts(self) -> str:
        """The sorted set of every account id, by registration time."""
        return f"{self.prefix}:accounts"

    @property
    def revocations(self) -> str:
        """The stream of credentials that ended (a token rotated, revoked or re-issued, an
        account banned, a seat's match called off), which every gateway follows."""
        return f"{self.prefix}:revoked"

    def in_partition(self, key: str, partition: int) -> bool:
        """True when `key` hashes with the given partition's keys (same hash tag)."""
        return hash_tag(key) == f"p{partition}"
