"""The node's storage state: a full disk is marked by a refused write and cleared by a write that
succeeds or by enough free space; it never clears on too little space."""

from __future__ import annotations

from logbroker.storage_health import RECOVERED_FREE_BYTES, StorageHealth, free_bytes


def test_full_is_set_by_a_refused_write_and_cleared_by_a_successful_one():
    clock = iter([1000, 2000])
    health = StorageHealth(lambda: next(clock))
    assert not health.full
    health.write_failed_full()
    health.write_failed_full()
    assert health.full and health.full_since_ms == 1000 and health.full_errors == 2
    health.space_seen(RECOVERED_FREE_BYTES - 1)
    assert health.full
    health.write_succeeded()
    assert not health.full and health.full_errors == 2


def test_enough_free_space_clears_full_without_a_write():
    health = StorageHealth(lambda: 5)
    health.write_failed_full()
    health.space_seen(RECOVERED_FREE_BYTES)
    described = health.describe(RECOVERED_FREE_BYTES, [])
    assert described == {"full": False, "full_since_ms": None, "full_errors": 1,
                         "free_bytes": RECOVERED_FREE_BYTES, "offline_partitions": []}


def test_free_bytes_reads_the_filesystem(tmp_path):
    assert (free_bytes(str(tmp_path)) or 0) > 0
    assert free_bytes(str(tmp_path / "missing")) is None
