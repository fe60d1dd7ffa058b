"""Decoded batches of queue partitions, kept so that a receive of 100 messages from a producer's
batch of 1000 does not decode the batch ten times.

Bounded twice: at most ``BATCHES_PER_PARTITION_MAX`` batches per partition (lookups scan them),
and node-wide at most ``CACHE_BYTES_MAX`` of estimated memory (what the records' bytes take plus
``RECORD_OVERHEAD_BYTES`` per record for the objects that hold them). Past either bound the least
recently used batch goes; a batch larger than the whole budget is not kept at all. Entries are
keyed by the queue's topic id, so a queue deleted and created again never sees the old one's.

One owner (the queue manager, on the event loop); no locking.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from collections.abc import Sequence
from typing import Final

from segments.batch import Record

CACHE_BYTES_MAX: Final = 64 * 1024 * 1024
BATCHES_PER_PARTITION_MAX: Final = 16
# A Record tuple, its entry in the offset dict and its offset int, as CPython 3.11 sizes them.
RECORD_OVERHEAD_BYTES: Final = 200
_KEY = operator.itemgetter(2)
_VALUE = operator.itemgetter(3)
_HEADERS = operator.itemgetter(4)
PartitionKey = tuple[str, int]  # (topic id, partition)


@dataclasses.dataclass(frozen=True, slots=True)
class DecodedBatch:
    base_offset: int
    next_offset: int
    records: dict[int, Record]  # by offset
    size_bytes: int  # estimated memory
    # Why the offsets of [base_offset, next_offset) missing from ``records`` cannot be read (a
    # stored batch whose records cannot be decoded: only those before its first bad one are here).
    unreadable: str | None = None


def decoded(base_offset: int, next_offset: int, records: Sequence[Record], *,
            unreadable: str | None = None) -> DecodedBatch:
    """A batch's records ready for the cache, with their estimated size."""
    data_bytes = sum(map(len, filter(None, map(_KEY, records)))) + sum(map(len, filter(None, map(_VALUE, records))))
    header_bytes = sum(len(name) + len(value) for headers in filter(None, map(_HEADERS, records))
                       for name, value in headers)
    size = data_bytes + header_bytes + RECORD_OVERHEAD_BYTES * len(records)
    return DecodedBatch(base_offset, next_offset, {r.offset: r for r in records}, size, unreadable)


class BatchCache:
    def __init__(self, size_bytes_max: int = CACHE_BYTES_MAX,
                 batches_per_partition_max: int = BATCHES_PER_PARTITION_MAX) -> None:
        assert size_bytes_max > 0 and batches_per_partition_max > 0
        self.size_bytes_max = size_bytes_max
        self.batches_per_partition_max = batches_per_partition_max
        self.size_bytes = 0
        # Least recently used first; and the same entries per partition (oldest added first).
        self._lru: collections.OrderedDict[tuple[str, int, int], DecodedBatch] = collections.OrderedDict()
        self._partitions: dict[PartitionKey, dict[int, DecodedBatch]] = {}

    def __len__(self) -> int:
        return len(self._lru)

    def find(self, partition: PartitionKey, offset: int) -> DecodedBatch | None:
        """The cached batch of ``partition`` that holds ``offset`` (now the most recently used)."""
        for batch in self._partitions.get(partition, {}).values():
            if batch.base_offset <= offset < batch.next_offset:
                self._lru.move_to_end((*partition, batch.base_offset))
                return batch
        return None

    def add(self, partition: PartitionKey, batch: DecodedBatch) -> None:
        """Keep ``batch`` (unless it alone exceeds the budget), evicting what the bounds require."""
        if batch.size_bytes > self.size_bytes_max:
            return
        self._remove(partition, batch.base_offset)
        batches = self._partitions.setdefault(partition, {})
        batches[batch.base_offset] = batch
        self._lru[(*partition, batch.base_offset)] = batch
        self.size_bytes += batch.size_bytes
        while len(batches) > self.batches_per_partition_max:
            self._remove(partition, next(iter(batches)))
        while self.size_bytes > self.size_bytes_max:
            topic_id, p, base = next(iter(self._lru))
            self._remove((topic_id, p), base)

    def drop(self, topic_id: str) -> None:
        """Forget every batch of a queue (it was deleted)."""
        for partition in [key for key in self._partitions if key[0] == topic_id]:
            for base in list(self._partitions[partition]):
                self._remove(partition, base)

    def _remove(self, partition: PartitionKey, base_offset: int) -> None:
        batches = self._partitions.get(partition)
        if batches is None or base_offset not in batches:
            return
        self.size_bytes -= batches.pop(base_offset).size_bytes
        del self._lru[(*partition, base_offset)]
        if not batches:
            del self._partitions[partition]
