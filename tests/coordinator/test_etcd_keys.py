"""The etcd key layout parses back what it builds, refuses what it does not know, and encodes
equal records to equal bytes (the guards compare values)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.errors import CoordinatorError
from coordinator.etcd_client import parse_etcd_url
from coordinator.etcd_keys import (
    Key,
    LeaderRecord,
    PartitionRecord,
    acl_key,
    cluster_prefix,
    group_key,
    leader_key,
    lock_key,
    member_key,
    node_key,
    parse_key,
    partition_key,
    prefix_range_end,
    topic_key,
    user_key,
)

names = st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)


@given(names, st.integers(0, 1023), st.integers(0, 10_000))
def test_keys_round_trip(name, partition, node):
    for key in (topic_key(name), partition_key(name, partition), leader_key(name, partition), user_key(name),
                acl_key(name), group_key(name), lock_key(name), node_key(node), member_key(node)):
        assert parse_key(key.relative()) == key


@pytest.mark.parametrize("relative", ["", "topics", "topics/", "unknown/x", "partitions/t", "partitions/t/x",
                                      "partitions/t/1/2", "topics/a/b", "leaders//1"])
def test_unknown_keys_parse_to_none(relative):
    assert parse_key(relative) is None


def test_layout_matches_the_design():
    assert cluster_prefix("prod") == "/logbroker/prod/"
    assert partition_key("t", 3).relative() == "partitions/t/3"
    assert leader_key("t", 0).relative() == "leaders/t/0"
    assert Key("acls", "t").relative() == "acls/t"


@given(st.binary(min_size=1, max_size=20))
def test_prefix_range_end_bounds_exactly_the_prefix(prefix):
    end = prefix_range_end(prefix)
    if end != b"\0":
        assert prefix < end and prefix + b"\xff" * 4 < end
        assert not (prefix <= end < prefix + b"\xff" * 4)


@given(st.text(min_size=1, max_size=30), st.lists(st.integers(0, 99), max_size=5), st.integers(0, 2**40))
def test_records_round_trip_and_encode_deterministically(topic_id, replicas, epoch):
    record = PartitionRecord(topic_id, tuple(replicas), tuple(replicas[:1]), epoch)
    assert PartitionRecord.decode(record.encode()) == record
    assert record.encode() == PartitionRecord(topic_id, tuple(replicas), tuple(replicas[:1]), epoch).encode()
    assert b"elr" not in record.encode(), "an empty ELR is not stored: records from before it read alike"
    eligible = PartitionRecord(topic_id, tuple(replicas), tuple(replicas[:1]), epoch, tuple(replicas[1:]))
    assert PartitionRecord.decode(eligible.encode()) == eligible
    leader = LeaderRecord(7, epoch)
    assert LeaderRecord.decode(leader.encode()) == leader


def test_etcd_urls():
    assert parse_etcd_url("etcd://127.0.0.1:2379") == ["127.0.0.1:2379"]
    assert parse_etcd_url("etcd://a:1, b:2") == ["a:1", "b:2"]
    for bad in ("http://a:1", "etcd://", "etcd://a", "etcd://a:x", "etcd://a:0"):
        with pytest.raises(CoordinatorError):
            parse_etcd_url(bad)
