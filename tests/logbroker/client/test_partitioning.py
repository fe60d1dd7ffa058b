"""The key-to-partition rule (DESIGN §4, decision 0388) is one rule for the client, the broker and
the Spark sink (``segments.partitioning``): xxh3-64 of the key by default, or Kafka's murmur2 for a
topic with ``key_hash: murmur2``, equal to Kafka's own partitioner (kafka-python's, which is
Kafka's ``Utils.murmur2``), so a keyed record lands in the same partition whoever places it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from logbroker import records
from logbroker.client import key_partition
from logbroker.client.partitioning import murmur2


@given(st.binary(max_size=256), st.integers(min_value=1, max_value=10_000), st.sampled_from(["xxh3", "murmur2"]))
def test_client_and_broker_agree(key, partitions, key_hash):
    assert key_partition(key, partitions, key_hash) == records.key_partition(key, partitions, key_hash)
    assert 0 <= key_partition(key, partitions, key_hash) < partitions


@given(st.binary(max_size=300))
def test_murmur2_is_kafkas(key):
    assert murmur2(key) == kafka_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1_000))
def test_murmur2_placement_is_kafkas_default_partitioner(key, partitions):
    assert key_partition(key, partitions, "murmur2") == (kafka_murmur2(key) & 0x7FFFFFFF) % partitions


def test_known_values():
    # xxh3_64(b"") == 0x2D06800538D394C2; pinned so that a change of hash shows as a protocol change.
    assert key_partition(b"", 1 << 16) == 0x94C2
    # Kafka's Utils.murmur2("21".getBytes()) == -973932308 (as Java's signed int).
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF
