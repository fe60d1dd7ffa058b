"""The partition of a keyed record, as the HTTP API defines it (DESIGN §4): xxh3-64 of the key
modulo the partition count. The broker applies the same rule to records produced without a
partition (``logbroker.records``); the client keeps its own copy because it imports nothing of
the server, and a test checks that both agree."""

from __future__ import annotations

import xxhash


def key_partition(key: bytes, partitions: int) -> int:
    """The partition of a record with this key in a topic of ``partitions`` partitions."""
    return xxhash.xxh3_64_intdigest(key) % partitions
