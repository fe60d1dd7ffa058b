"""The queues' cache of decoded batches stays within its bounds (bytes node-wide, batches per
partition), evicts the least recently used first and keeps nothing larger than its budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.queues.batch_cache import RECORD_OVERHEAD_BYTES, BatchCache, DecodedBatch, decoded
from segments.batch import Record


def batch(base: int, count: int, value_bytes: int = 0) -> DecodedBatch:
    return decoded(base, base + count, [Record(base + i, 0, None, bytes(value_bytes), []) for i in range(count)])


def test_the_size_counts_the_bytes_and_each_record() -> None:
    records = [Record(0, 0, b"key", b"value", [("h", b"12")]), Record(1, 0, None, None, [])]
    assert decoded(0, 2, records).size_bytes == 3 + 5 + 1 + 2 + 2 * RECORD_OVERHEAD_BYTES


def test_a_batch_is_found_by_any_of_its_offsets() -> None:
    cache = BatchCache()
    cache.add(("t", 0), batch(10, 5))
    assert cache.find(("t", 0), 10) is cache.find(("t", 0), 14) is not None
    assert cache.find(("t", 0), 15) is None and cache.find(("t", 1), 10) is None and cache.find(("u", 0), 10) is None


def test_the_least_recently_used_batch_goes_first() -> None:
    one = batch(0, 1).size_bytes
    cache = BatchCache(size_bytes_max=3 * one)
    for base in range(3):
        cache.add(("t", 0), batch(base, 1))
    cache.find(("t", 0), 0)  # now the most recent
    cache.add(("t", 1), batch(0, 1))
    assert cache.find(("t", 0), 1) is None
    assert cache.find(("t", 0), 0) is not None and cache.find(("t", 0), 2) is not None
    assert cache.size_bytes == 3 * one


def test_a_batch_larger_than_the_budget_is_not_kept() -> None:
    cache = BatchCache(size_bytes_max=10_000)
    cache.add(("t", 0), batch(0, 1))
    cache.add(("t", 0), batch(1, 1, value_bytes=20_000))
    assert cache.find(("t", 0), 1) is None and cache.find(("t", 0), 0) is not None


def test_a_partition_keeps_at_most_its_count_of_batches() -> None:
    cache = BatchCache(batches_per_partition_max=2)
    for base in range(4):
        cache.add(("t", 0), batch(base, 1))
    cache.add(("t", 1), batch(0, 1))
    assert [cache.find(("t", 0), o) is not None for o in range(4)] == [False, False, True, True]
    assert len(cache) == 3


def test_dropping_a_queue_forgets_its_batches_only() -> None:
    cache = BatchCache()
    cache.add(("t", 0), batch(0, 2))
    cache.add(("t", 3), batch(0, 2))
    cache.add(("u", 0), batch(0, 2))
    cache.drop("t")
    assert len(cache) == 1 and cache.find(("u", 0), 1) is not None
    assert cache.size_bytes == batch(0, 2).size_bytes


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 50),
                          st.integers(1, 4), st.integers(0, 3000)), max_size=60))
def test_the_bounds_hold_whatever_is_added(adds) -> None:
    cache = BatchCache(size_bytes_max=8_000, batches_per_partition_max=3)
    for topic, partition, base, count, value_bytes in adds:
        cache.add((topic, partition), batch(base * 10, count, value_bytes))
        assert cache.size_bytes <= 8_000
        assert len(cache) <= 3 * 8
    found = (cache.find((t, p), o) for t in "ab" for p in range(4) for o in range(510))
    kept = {id(b): b for b in found if b is not None}
    assert len(kept) == len(cache)
    assert cache.size_bytes == sum(b.size_bytes for b in kept.values())
