"""Internal topics (names starting with ``__``): state the broker keeps in its own logs so that it
is stored, recovered (and, with clustering, replicated) exactly like user data.

``InternalLog`` appends msgpack-valued records to one partition of an internal topic and replays
a partition from its start. ``append`` writes the batch synchronously (so the order of appends is
the order of the calls that made them, even when their callers then await) and returns the
awaitable that completes once the batch is durable under the topic's flush policy and visible.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Final

import msgpack

from coordinator.base import Coordinator
from coordinator.errors import TopicExistsError, UnknownTopicError
from coordinator.models import TopicSpec
from logbroker.replica_manager import Replica, ReplicaManager
from segments.batch import ProducerRecord, Record, decode_records, encode_batch, iter_batches
from segments.config import LogConfig
from segments.log import AppendInfo

REPLAY_READ_BYTES: Final = 4 << 20
SNAPSHOT_RECORDS_MIN: Final = 10_000
SNAPSHOT_GROWTH: Final = 4
SNAPSHOT_BATCH_RECORDS: Final = 10_000
# Internal state must never be dropped by time or size: retention is off. Compaction (keeping the
# newest value per key) is what bounds these logs; records are keyed so that it can.
INTERNAL_LOG_CONFIG: Final = {"retention_ms": -1, "retention_bytes": -1, "cleanup_policy": "compact"}


def pack(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(data: bytes | None) -> Any:
    return None if data is None else msgpack.unpackb(data, raw=False, strict_map_key=False)


@dataclasses.dataclass(frozen=True, slots=True)
class InternalRecord:
    key: bytes
    value: bytes | None


class InternalLog:
    """Append to, replay and compact (by snapshot) the partitions of one internal topic.

    Compaction: the owner of the state writes a snapshot (records standing for the partition's
    whole state) with ``snapshot``; once it is fsynced, every segment before it is deleted. A
    crash before that leaves old records and the snapshot, which replay to the same state."""

    def __init__(self, replicas: Sequence[Replica]) -> None:
        self._replicas = list(replicas)
        self._since_snapshot = [r.log.log_end_offset - r.log.log_start_offset for r in self._replicas]
        self._snapshotting = [False] * len(self._replicas)

    @property
    def partitions(self) -> int:
        return len(self._replicas)

    def grow_to(self, replicas: Sequence[Replica]) -> None:
        """Take on the partitions added to the topic (``replicas`` starts with the ones held)."""
        for replica in replicas[len(self._replicas):]:
            self._replicas.append(replica)
            self._since_snapshot.append(replica.log.log_end_offset - replica.log.log_start_offset)
            self._snapshotting.append(False)

    def append(self, partition: int, records: Sequence[InternalRecord]) -> Awaitable[None]:
        replica = self._replicas[partition]
        info = self._append(replica, records)
        self._since_snapshot[partition] += len(records)
        return replica.commit_replicated(info)

    @staticmethod
    def _append(replica: Replica, records: Sequence[InternalRecord]) -> AppendInfo:
        batch = encode_batch([ProducerRecord(r.value, r.key) for r in records])
        return replica.append(batch)

    def wants_snapshot(self, partition: int, live_records: Callable[[], int]) -> bool:
        """True when the partition holds many more records than a snapshot would (``live_records``
        counts those; it is called only past ``SNAPSHOT_RECORDS_MIN``)."""
        since = self._since_snapshot[partition]
        return not self._snapshotting[partition] and since > SNAPSHOT_RECORDS_MIN and \
            since > SNAPSHOT_GROWTH * live_records()

    def snapshot(self, partition: int, records: Sequence[InternalRecord]) -> Awaitable[int]:
        """Write ``records`` (the whole state, taken by the caller in the same step) at the start
        of a new segment; the awaitable deletes the older segments once they are durable and
        returns how many it deleted."""
        assert records, "a snapshot has at least one record"
        replica = self._replicas[partition]
        replica.log.roll()
        infos = [self._append(replica, records[i:i + SNAPSHOT_BATCH_RECORDS])
                 for i in range(0, len(records), SNAPSHOT_BATCH_RECORDS)]
        self._since_snapshot[partition] = len(records)
        self._snapshotting[partition] = True
        return self._finish_snapshot(partition, replica, infos[0].base_offset, infos[-1])

    async def snapshot_in_slices(self, partition: int, slices: Iterable[Sequence[InternalRecord]]) -> int:
        """Write a snapshot one slice per event-loop step, for states too large to write in one
        (decision 0176): roll, then append each slice of ``slices`` (taken lazily, so each reads the
        state as it is at that step), interleaved with the ordinary appends of other steps; once
        the snapshot is durable, delete the older segments. Correct for logs where the newest
        record of a key wins: a key changed after its slice has a later record too. Returns how
        many segments were deleted."""
        assert not self._snapshotting[partition], "one snapshot at a time per partition"
        self._snapshotting[partition] = True
        try:
            replica = self._replicas[partition]
            replica.log.roll()
            start = replica.log.log_end_offset
            self._since_snapshot[partition] = 0
            last: AppendInfo | None = None
            for records in slices:
                if records:
                    last = self._append(replica, records)
                    self._since_snapshot[partition] += len(records)
                await asyncio.sleep(0)
            if last is not None:
                await replica.commit(last)
            end = replica.log.log_end_offset
            if end > start:
                await replica.make_durable(last or AppendInfo(start, end - 1, end))
            return replica.log.delete_before(start)
        finally:
            self._snapshotting[partition] = False

    async def _finish_snapshot(self, partition: int, replica: Replica, start: int, last: AppendInfo) -> int:
        try:
            await replica.commit(last)
            await replica.make_durable(last)
            return replica.log.delete_before(start)
        finally:
            self._snapshotting[partition] = False

    def replay(self, partition: int) -> Iterator[Record]:
        """Every record of the partition, oldest first (reads capped at ``REPLAY_READ_BYTES``)."""
        log = self._replicas[partition].log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            result = log.read(offset, REPLAY_READ_BYTES)
            if result.next_offset <= offset:
                break
            view = memoryview(result.data)
            for position, header in iter_batches(view):
                yield from decode_records(view[position:position + header.size_bytes])
            offset = result.next_offset


async def ensure_internal_topic(coordinator: Coordinator, replicas: ReplicaManager, name: str, partitions: int,
                                base: LogConfig, extra_config: dict[str, Any] | None = None, *,
                                placed_on: tuple[int, ...] | None = None) -> InternalLog:
    """Create the internal topic ``name`` unless it exists (``placed_on``: every partition on
    exactly those cluster nodes), open its logs, return its ``InternalLog``."""
    config = {**INTERNAL_LOG_CONFIG, **(extra_config or {})}
    spec = TopicSpec(name, partitions, None, "topic", config)
    try:
        meta = await coordinator.create_topic(spec, None, replicas=placed_on)
    except TopicExistsError:
        meta = await coordinator.get_topic(name)
    try:
        return InternalLog(replicas.partitions(name))
    except UnknownTopicError:
        pass
    existing = TopicSpec(meta.name, meta.partitions, meta.replication_factor, meta.kind, meta.config)
    await replicas.open_topic(meta, existing.log_config(base))
    return InternalLog(replicas.partitions(name))
