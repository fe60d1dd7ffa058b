"""Seals on etcd records (decision 0225): a sealed record opens only under the key it was sealed
for, unchanged and with the cluster's secret; the cache ignores a put that does not verify (the
key keeps its last verified value, or stays absent) and counts it; kinds that are not sealed pass
as they are."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.cache import Entry, MetadataCache
from coordinator.etcd_keys import PartitionRecord, encode, user_key
from coordinator.etcd_seal import SEAL_FIELD, RecordSeal, SealError
from coordinator.users import UserRecord

PREFIX = "/logbroker/c/"
SEAL = RecordSeal("the-cluster-token", PREFIX)


def user(name: str, role: str = "user") -> UserRecord:
    return UserRecord(name, role, "scrypt$hash", 1, user_id=f"id-{name}")  # type: ignore[arg-type]


def test_a_sealed_record_opens_to_itself():
    raw = SEAL.seal("users/alice", user("alice").to_json())
    assert SEAL_FIELD in raw.decode()
    assert UserRecord.from_json(SEAL.open("users/alice", raw)) == user("alice")


@pytest.mark.parametrize("forge", [
    lambda raw: encode(user("alice", "admin").to_json()),                      # no seal
    lambda raw: raw.replace(b'"role":"user"', b'"role":"admin"'),             # changed under its seal
    lambda raw: RecordSeal("another-secret", PREFIX).seal("users/alice", user("alice", "admin").to_json()),
])
def test_a_forged_user_does_not_open(forge):
    raw = SEAL.seal("users/alice", user("alice").to_json())
    with pytest.raises(SealError):
        SEAL.open("users/alice", forge(raw))


def test_a_valid_record_does_not_open_under_another_key_or_cluster():
    raw = SEAL.seal("users/alice", user("alice", "admin").to_json())
    with pytest.raises(SealError):
        SEAL.open("users/mallory", raw)
    with pytest.raises(SealError):
        RecordSeal("the-cluster-token", "/logbroker/other/").open("users/alice", raw)


def test_placement_is_not_sealed_and_no_secret_checks_nothing():
    record = PartitionRecord("t1", (1, 2), (1,), 3)
    assert SEAL.seal("partitions/t/0", {"topic_id": "t1"}) == encode({"topic_id": "t1"})
    assert PartitionRecord.from_value(SEAL.open("partitions/t/0", record.encode())) == record
    unsealed = RecordSeal(None, PREFIX)
    assert unsealed.open("users/alice", encode(user("alice").to_json())) == user("alice").to_json()


@given(st.dictionaries(st.text(max_size=8).filter(lambda k: k != SEAL_FIELD), st.integers() | st.text(max_size=8),
                       max_size=5), st.sampled_from(["users/a", "acls/t", "groups/g", "topics/t", "nodes/1"]))
def test_any_sealed_value_round_trips_and_any_change_is_caught(value, key):
    raw = SEAL.seal(key, value)
    assert SEAL.open(key, raw) == value
    with pytest.raises(SealError):
        SEAL.open(key, encode({**value, "extra": 1}) if value else encode({"extra": 1}))


def test_the_cache_ignores_a_put_that_does_not_verify_and_counts_it():
    cache = MetadataCache(SEAL)
    good = SEAL.seal("users/alice", user("alice").to_json())
    forged = encode(user("mallory", "admin").to_json())
    cache.reset([Entry("users/alice", good, 1, 1), Entry("users/mallory", forged, 2, 2)], 2)
    assert [u.name for u in cache.users()] == ["alice"] and cache.rejected_records == 1
    cache.apply([("users/alice", Entry("users/alice", good.replace(b'"role":"user"', b'"role":"admin"'), 1, 3))], 3)
    assert cache.user("alice") == user("alice") and cache.rejected_records == 2  # the forged put is ignored
    assert cache.mod_revision(user_key("alice")) == 3  # a guarded write of a node replaces it
    cache.apply([("users/alice", None)], 4)
    assert cache.user("alice") is None  # a delete needs no seal
    assert cache.entry(user_key("mallory")) is not None  # kept raw: a guard can still replace it
