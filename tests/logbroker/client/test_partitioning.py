"""The client's copy of the key-to-partition rule agrees with the broker's (DESIGN §4: xxh3-64 of
the key modulo the partition count), so a keyed record lands in the same partition whether the
producer or the broker picks it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker import records
from logbroker.client import key_partition


@given(st.binary(max_size=256), st.integers(min_value=1, max_value=10_000))
def test_client_and_broker_agree(key, partitions):
    assert key_partition(key, partitions) == records.key_partition(key, partitions)
    assert 0 <= key_partition(key, partitions) < partitions


def test_known_values():
    # xxh3_64(b"") == 0x2D06800538D394C2; pinned so that a change of hash shows as a protocol change.
    assert key_partition(b"", 1 << 16) == 0x94C2
