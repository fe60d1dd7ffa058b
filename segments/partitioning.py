"""Where a keyed record goes (pure): the partition of a key under a topic's ``key_hash``, the one
rule the broker (records produced without a partition), the Python client, the Spark sink and,
with ``murmur2``, Kafka's own clients all apply (DESIGN §4, decision 0388).

- ``xxh3`` (the default): xxh3-64 of the key, modulo the partition count;
- ``murmur2``: Kafka's default partitioner, ``(murmur2(key) & 0x7fffffff) % partitions``, with
  the 32-bit MurmurHash2 Kafka's ``Utils.murmur2`` computes (seed ``0x9747b28c``), so a Kafka
  producer and a LogBroker producer put a key in the same partition.
"""

from __future__ import annotations

from typing import Final, Literal

import xxhash

KEY_HASH_KEY: Final = "key_hash"
KeyHash = Literal["xxh3", "murmur2"]
KEY_HASHES: Final[tuple[KeyHash, ...]] = ("xxh3", "murmur2")
DEFAULT_KEY_HASH: Final[KeyHash] = "xxh3"
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``, as an unsigned 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def key_partition(key: bytes, partitions: int, key_hash: str = DEFAULT_KEY_HASH) -> int:
    """The partition of a record with this key in a topic of ``partitions`` partitions."""
    if key_hash == "murmur2":
        return (murmur2(key) & 0x7FFFFFFF) % partitions
    return xxhash.xxh3_64_intdigest(key) % partitions
