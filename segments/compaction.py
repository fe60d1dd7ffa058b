"""Key-based compaction of record batches (decision 0321): which records a compacted log keeps.

Pure: functions over batch bytes, no files and no clock (``now`` comes in as an argument).

The rules, applied to the *cleanable* batches of a partition (closed segments only, oldest first):

- a record with a key is kept only when it is the latest record for its key among the cleanable
  batches (``latest_offsets``); a later record in the active segment does not count yet, so
  compacting the same closed batches always gives the same result;
- a tombstone (a keyed record whose value is null) that is the latest for its key is kept until
  its timestamp is older than ``tombstone_before_ms`` (now minus ``delete_retention_ms``), then
  dropped too;
- a record without a key is always kept (it supersedes nothing and nothing supersedes it);
- the last record of the cleanable batches (``keep_offset``) is always kept, so compaction never
  leaves a gap at the end of the closed segments, where a reader or a follower could find no
  record to move on to while the active segment is still empty;
- control batches, and batches sealed at rest when no key ring is given, are kept as they are
  (their records are neither read nor counted);
- offsets never change. A batch that keeps every record keeps its bytes; one that loses records
  is re-encoded as one batch per run of consecutive kept records, each with the base offset of
  its first record, the original leader epoch, codec and producer identity (the base sequence
  moved by the same delta), and a new checksum. Readers therefore see gaps only *between*
  batches, never inside one (a batch's record count stays ``last_offset_delta + 1``). A batch
  sealed at rest is opened with the ring and each rewritten run sealed again with it.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, cast

from segments.batch import (
    CONTROL_FLAG,
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    NO_SEQUENCE,
    BatchHeader,
    ProducerRecord,
    RecordColumns,
    batch_columns,
    encode_batch,
    parse_header,
)
from segments.compression import Codec

# Opens a batch sealed at rest (``segments.encryption.open_batch`` with a ring), and seals one.
Opener = Callable[[bytes | memoryview], bytes | bytearray]
Sealer = Callable[[bytes], bytes | bytearray]

# The most distinct keys one compaction pass maps (about 100 bytes each in memory): a pass over
# more stops at the segment where the map fills, and the next pass continues from there.
KEYS_PER_PASS_MAX = 1_000_000


def _sealed(header: BatchHeader) -> bool:
    """A batch encrypted at rest (read from its header here: importing the cipher's module would
    load ``cryptography`` into the client's storage code)."""
    return bool(header.attributes & ENCRYPTED_FLAG)


class CompactionStats(NamedTuple):
    """What compacting one segment's batches did."""

    records_in: int
    records_kept: int
    batches_rewritten: int


def _columns(batch: bytes | memoryview, header: BatchHeader, opener: Opener | None,
             size_bytes_max: int) -> RecordColumns | None:
    """The batch's records, or None when they are not to be read (control, or sealed without a ring)."""
    if header.attributes & CONTROL_FLAG:
        return None
    if _sealed(header):
        if opener is None:
            return None
        batch = memoryview(opener(batch))
        header = parse_header(batch)
    return batch_columns(header, memoryview(batch)[HEADER_SIZE:header.size_bytes], size_bytes_max)


def add_latest_offsets(latest: dict[bytes, int], batches: Iterable[tuple[BatchHeader, bytes | memoryview]], *,
                       opener: Opener | None = None, size_bytes_max: int = 64 * 1024 * 1024) -> None:
    """Record in ``latest`` the offset of each key's latest record among ``batches`` (in offset order)."""
    for header, batch in batches:
        columns = _columns(batch, header, opener, size_bytes_max)
        if columns is None:
            continue
        keys = columns.keys
        # ``dict.update`` walks the pairs in C; within a batch a later offset overwrites an earlier.
        if keys.count(None) == 0:
            latest.update(zip(cast("tuple[bytes, ...]", keys), columns.offsets, strict=True))
        else:
            latest.update((k, o) for k, o in zip(keys, columns.offsets, strict=True) if k is not None)


def latest_offsets(batches: Iterable[tuple[BatchHeader, bytes | memoryview]], *,
                   opener: Opener | None = None) -> dict[bytes, int]:
    """Each key's latest offset among ``batches``."""
    latest: dict[bytes, int] = {}
    add_latest_offsets(latest, batches, opener=opener)
    return latest


def _rewrite_codec(codec: int) -> Codec:
    """The codec a rewritten run is stored with: the batch's own, or lz4 for a Kafka batch's snappy
    (runs are rewritten in the broker's record format, which has no snappy)."""
    return Codec(codec) if codec in Codec.__members__.values() else Codec.LZ4


def keeps(key: bytes | None, value: bytes | None, offset: int, timestamp: int, latest: Mapping[bytes, int],
          tombstone_before_ms: int, keep_offset: int = -1) -> bool:
    """Whether compaction keeps this record (see the module docstring)."""
    if key is None or offset == keep_offset:
        return True
    if latest.get(key, offset) != offset:
        return False
    return value is not None or timestamp >= tombstone_before_ms


def _kept(columns: RecordColumns, latest: Mapping[bytes, int], tombstone_before_ms: int,
          keep_offset: int) -> list[int]:
    """The indexes of the records ``keeps`` keeps, found column-wise in C for the usual batch (the
    latest-per-key test as ``map``s), record by record only where tombstones or ``keep_offset``
    are in it. A record without a key looks itself up as its own default, so it is kept."""
    offsets, keys, values = columns.offsets, columns.keys, columns.values
    latest_here = list(map(operator.eq, map(latest.get, keys, offsets), offsets))  # type: ignore[arg-type]
    if values.count(None) or offsets[0] <= keep_offset <= offsets[-1]:
        return [i for i, (offset, ts, key, value) in
                enumerate(zip(offsets, columns.timestamps, keys, values, strict=True))
                if (latest_here[i] or offset == keep_offset)
                and keeps(key, value, offset, ts, latest, tombstone_before_ms, keep_offset)]
    return list(itertools.compress(range(len(latest_here)), latest_here))


def compact_batch(batch: bytes | memoryview, header: BatchHeader, latest: Mapping[bytes, int], *,
                  tombstone_before_ms: int, opener: Opener | None = None, sealer: Sealer | None = None,
                  size_bytes_max: int = 64 * 1024 * 1024,
                  keep_offset: int = -1) -> tuple[list[bytes | memoryview], CompactionStats]:
    """The batches that replace ``batch``: itself when it keeps every record, none when it keeps
    none, else one re-encoded batch per run of consecutive kept records."""
    columns = _columns(batch, header, opener, size_bytes_max)
    if columns is None:
        return [batch], CompactionStats(header.record_count, header.record_count, 0)
    kept = _kept(columns, latest, tombstone_before_ms, keep_offset)
    count = len(columns.offsets)
    if len(kept) == count:
        return [batch], CompactionStats(count, count, 0)
    runs: list[list[int]] = []
    for i in kept:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    out: list[bytes | memoryview] = []
    for run in runs:
        first = run[0]
        records = [ProducerRecord(columns.values[i], columns.keys[i], columns.headers[i], columns.timestamps[i])
                   for i in run]
        sequence = header.base_sequence + first if header.base_sequence != NO_SEQUENCE else NO_SEQUENCE
        rewritten = encode_batch(
            records, base_offset=columns.offsets[first], leader_epoch=header.leader_epoch,
            codec=_rewrite_codec(header.codec), producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=sequence)
        if _sealed(header):
            assert sealer is not None, "a sealed batch is read only with an opener, and rewritten with a sealer"
            rewritten = bytes(sealer(rewritten))
        out.append(rewritten)
    return out, CompactionStats(count, len(kept), len(runs))
