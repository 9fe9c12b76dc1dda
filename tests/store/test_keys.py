"""Key layout: stable partitions, one cluster slot per partition, strict match ids."""

from __future__ import annotations

import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from services.store import Ack, InvalidAppend, OutboxEntry, Schedule
from services.store.checks import check_append
from services.store.keys import Keys, partition_of, validate_match_id
from tests.store.contract import BAD_MATCH_IDS

pytestmark = pytest.mark.store


def slot(key: str) -> int:
    return key_slot(key.encode())


def test_partition_of_is_stable_across_runs_and_machines() -> None:
    # Golden values: a change here moves every stored match to another partition.
    assert [partition_of(m, 8) for m in ("match-0", "match-1", "abc", "m1", "é")] == [5, 3, 2, 7, 6]
    assert partition_of("abc", 16) == 2


def test_every_key_of_a_match_and_its_partition_shares_one_slot() -> None:
    keys = Keys("dom", 8)
    for n in range(500):
        match_id = f"match-{n}"
        partition = keys.partition_of(match_id)
        names = [
            keys.match(match_id),
            keys.dedupe(match_id),
            keys.log(partition),
            keys.turns(partition),
            keys.commands(partition),
            keys.deadlines(partition),
            keys.turn_began(partition),
            keys.clock(partition),
            keys.projection("summaries", partition),
        ]
        assert len({slot(name) for name in names}) == 1, names


def test_the_layout_is_the_documented_one() -> None:
    keys = Keys("dom", 8)
    partition = partition_of("m1", 8)

    assert keys.match("m1") == f"dom:{{p{partition}}}:m:m1"
    assert keys.dedupe("m1") == f"dom:{{p{partition}}}:dedupe:m1"
    assert keys.log(3) == "dom:{p3}:log"
    assert keys.turns(3, "greedy") == "dom:{p3}:turns:greedy"
    assert keys.commands(3) == "dom:{p3}:cmd"
    assert keys.deadlines(3) == "dom:{p3}:deadlines"
    assert keys.turn_began(3) == "dom:{p3}:began"
    assert keys.clock(3) == "dom:{p3}:clock"
    assert keys.projection("lobby", 3) == "dom:{p3}:proj:lobby"


def test_partitions_get_distinct_slots() -> None:
    keys = Keys("dom", 64)
    assert len({slot(keys.log(p)) for p in range(64)}) == 64


@pytest.mark.parametrize(
    ("key", "inside"),
    [
        ("dom:{p3}:turns", True),
        ("x{p3}", True),
        ("{p3}{p4}", True),
        ("a}{p3}", True),
        ("{{p3}}", False),
        ("{}{p3}", False),
        ("{p3", False),
        ("p3", False),  # hashes like {p3}, but an outbox stream must carry the tag
    ],
)
def test_an_outbox_stream_is_in_a_partition_only_through_its_hash_tag(
    key: str, inside: bool
) -> None:
    keys = Keys("dom", 8)
    assert keys.in_partition(key, 3) == inside
    if inside:
        assert slot(key) == slot(keys.log(3))
    # The append's checks agree, asked twice (the second answer is remembered).
    match_id = "match-1"
    assert partition_of(match_id, 8) == 3
    appends = [
        ([OutboxEntry(key, b"x")], (), None),
        ((), [Schedule(key, "m", 1)], None),
        ((), (), Ack(key, "group", "1-0")),
    ]
    for _ in range(2):
        for outbox, schedule, ack in appends:
            if inside:
                assert check_append(keys, match_id, 0, "c", outbox, schedule, ack) == 3
            else:
                with pytest.raises(InvalidAppend, match="outside partition 3"):
                    check_append(keys, match_id, 0, "c", outbox, schedule, ack)


@pytest.mark.parametrize("bad", BAD_MATCH_IDS)
def test_bad_match_ids_raise_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid match id"):
        validate_match_id(bad)


@pytest.mark.parametrize("prefix", ["", "a{b", "a b"])
def test_a_prefix_that_would_break_hash_tags_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Keys(prefix, 8)


def test_at_least_one_partition_is_needed() -> None:
    with pytest.raises(ValueError, match="partitions"):
        Keys("dom", 0)


@pytest.mark.cluster
@pytest.mark.anyio
async def test_the_cluster_agrees_on_the_slot_of_a_match(redis_cluster_urls: list[str]) -> None:
    keys = Keys("dom", 8)
    client = RedisCluster.from_url(redis_cluster_urls[0])
    try:
        for match_id in ("m1", "match-7", "x" * 128):
            partition = keys.partition_of(match_id)
            for name in (keys.match(match_id), keys.dedupe(match_id), keys.log(partition)):
                assert await client.cluster_keyslot(name) == slot(keys.log(partition))
    finally:
        await client.aclose()
