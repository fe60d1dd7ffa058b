"""The partition of a keyed record, as the HTTP API defines it (DESIGN §4): the topic's
``key_hash`` (xxh3-64 by default, or Kafka's murmur2) of the key modulo the partition count. The
one rule is ``segments.partitioning``, which the broker, the Spark sink and this client share."""

from __future__ import annotations

from segments.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY, KEY_HASHES, key_partition, murmur2

__all__ = ["DEFAULT_KEY_HASH", "KEY_HASHES", "KEY_HASH_KEY", "key_partition", "murmur2"]
