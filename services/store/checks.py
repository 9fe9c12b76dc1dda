"""Checks an append must pass before it is sent: ids, versions, and every key in the match's
partition (so each append touches one Redis Cluster slot)."""

from __future__ import annotations

from collections.abc import Sequence

from services.store.base import Ack, OutboxEntry, Schedule, TurnCheck
from services.store.errors import InvalidAppend
from services.store.keys import Keys, hash_tag

_MAX_ID_PART = 2**64 - 1


def check_append(
    keys: Keys,
    match_id: str,
    expected_version: int,
    command_id: str,
    outbox: Sequence[OutboxEntry],
    schedule: Sequence[Schedule] = (),
    ack: Ack | None = None,
    turn: TurnCheck | None = None,
) -> int:
    """Validate an append before it is sent and return the match's partition.

    Raises InvalidMatchId for a bad match id, InvalidAppend for a negative expected version,
    an empty command id, an outbox stream, schedule key or ack stream outside the match's
    partition, a schedule entry without a member or with a negative time, or an ack with an
    empty group or an entry id Redis would refuse.
    """
    partition = keys.partition_of(match_id)
    check_request(
        keys, partition, match_id, expected_version, command_id, outbox, schedule, ack, turn
    )
    return partition


def check_request(
    keys: Keys,
    partition: int,
    match_id: str,
    expected_version: int,
    command_id: str,
    outbox: Sequence[OutboxEntry],
    schedule: Sequence[Schedule] = (),
    ack: Ack | None = None,
    turn: TurnCheck | None = None,
) -> None:
    """`check_append` for a match id already validated and known to be in `partition`, and
    the keys of `turn` (its turn check) in that partition too.

    Each check has a fast path for the plain case (an int, a non-empty str, a key whose hash
    tag was seen before); anything else goes through the full check.
    """
    if type(expected_version) is not int or expected_version < 0:
        _check_version(expected_version)
    if type(command_id) is not str or not command_id:
        _check_command_id(command_id)
    for entry in outbox:
        if _partition_tag(entry.stream) != partition:
            raise InvalidAppend(
                f"outbox stream {entry.stream!r} is outside partition {partition} of match "
                f"{match_id!r}: it must carry the hash tag {keys.tag(partition)}"
            )
    for change in schedule:
        if _partition_tag(change.key) != partition:
            raise InvalidAppend(
                f"schedule key {change.key!r} is outside partition {partition} of match "
                f"{match_id!r}: it must carry the hash tag {keys.tag(partition)}"
            )
        member, at_ms = change.member, change.at_ms
        if type(member) is not str or not member:
            _check_member(change)
        if at_ms is not None and (type(at_ms) is not int or at_ms < 0):
            _check_time(change)
    if ack is not None:
        check_ack(keys, ack, partition, match_id)
    if turn is not None:
        for key in (turn.deadlines, turn.began, turn.clock):
            if _partition_tag(key) != partition:
                raise InvalidAppend(
                    f"turn check key {key!r} is outside partition {partition} of match "
                    f"{match_id!r}: it must carry the hash tag {keys.tag(partition)}"
                )


def _check_version(expected_version: object) -> None:
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise InvalidAppend(f"expected version must be an int, not {expected_version!r}")
    if expected_version < 0:
        raise InvalidAppend(f"expected version must be >= 0, not {expected_version}")


def _check_command_id(command_id: object) -> None:
    if not isinstance(command_id, str) or not command_id:
        raise InvalidAppend(f"command id must be a non-empty string, not {command_id!r}")


def _check_member(change: Schedule) -> None:
    if not isinstance(change.member, str) or not change.member:
        raise InvalidAppend(f"schedule member must be a non-empty string: {change!r}")


def _check_time(change: Schedule) -> None:
    at_ms = change.at_ms
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
        raise InvalidAppend(f"schedule time must be a non-negative int or None: {change!r}")


def check_ack(keys: Keys, ack: Ack, partition: int, match_id: str) -> None:
    """Raise InvalidAppend unless `ack` can be made by an append of a match of `partition`:
    its stream in the partition, a non-empty group and an entry id XACK accepts
    (`<ms>-<seq>` or `<ms>`, each part a 64-bit unsigned integer)."""
    if not isinstance(ack, Ack):
        raise InvalidAppend(f"ack must be an Ack, not {ack!r}")
    if _partition_tag(ack.stream) != partition:
        raise InvalidAppend(
            f"ack stream {ack.stream!r} is outside partition {partition} of match "
            f"{match_id!r}: it must carry the hash tag {keys.tag(partition)}"
        )
    if not isinstance(ack.group, str) or not ack.group:
        raise InvalidAppend(f"ack group must be a non-empty string: {ack!r}")
    if not _is_entry_id(ack.id):
        raise InvalidAppend(f"ack id must be a stream entry id such as '1712345-0': {ack!r}")


def _is_entry_id(entry_id: object) -> bool:
    if not isinstance(entry_id, str) or not entry_id.isascii():
        return False
    ms, dash, seq = entry_id.partition("-")
    return _is_id_part(ms) and (not dash or _is_id_part(seq))


def _is_id_part(part: str) -> bool:
    # ASCII only (checked above), so isdigit() means 0-9.
    return part.isdigit() and (len(part) < 20 or (len(part) == 20 and int(part) <= _MAX_ID_PART))


_TAGS: dict[str, int | None] = {}
_MAX_TAGS = 4096


def _partition_tag(key: object) -> int | None:
    """The partition whose hash tag `key` carries (`{p3}` -> 3), None for any other key.

    Outbox streams, schedule keys and ack streams are a few keys used over and over, so the
    answer is remembered."""
    if type(key) is not str:
        return None
    try:
        return _TAGS[key]
    except KeyError:
        pass
    tag = hash_tag(key)
    digits = tag[1:] if tag is not None and tag.startswith("p") else ""
    found = (
        int(digits)
        if digits.isascii() and digits.isdigit() and str(int(digits)) == digits
        else None
    )
    if len(_TAGS) >= _MAX_TAGS:
        _TAGS.clear()
    _TAGS[key] = found
    return found
