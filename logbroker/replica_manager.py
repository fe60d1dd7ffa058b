"""The partitions this node hosts: their logs, high watermarks, long-poll waiters, flushing.

Invariants: ``Replica.high_watermark`` never passes the log end and decreases only when a
follower truncates a divergent suffix; with the ``always`` flush policy it only passes records
whose fsync completed. On a single node it follows the log end; a cluster node's replica gets a
``leader_hook`` while it leads (``logbroker.replication`` then sets it to the least log end over
the ISR) and follows its leader's shipments otherwise; it opens at its checkpointed value, so a
restarted node serves nothing its leader had not confirmed.

Storage faults: a full disk fails the append that met it (the log cut it back) and marks the
node's ``StorageHealth`` until space returns; a log that goes offline (a failed fsync) fails its
waiters at once and stays offline until the node restarts and recovers it.

Concurrency: appends and reads run on the event loop (page-cache I/O, bounded by the batch and
fetch size limits); fsync, log opening and retention run in one bounded executor, which is handed
a snapshot of the replica list (the event loop changes the list meanwhile). Waiting fetches are
futures woken when the high watermark moves; their number is bounded node-wide.

Topic deletion frees the space before it commits the metadata (so it works on a full disk): each
partition directory is renamed to ``<dir>.<topic_id>-delete`` and emptied, the caller commits the
deletion, then ``purge_deleted`` removes the emptied directories. A start that finds such a
directory finishes the deletion it belongs to (``pending_deletions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, final

from coordinator.errors import UnknownTopicError
from coordinator.models import TopicMetadata
from logbroker.at_rest import AtRest
from logbroker.compactor import Compactor
from logbroker.dedup import ENTRIES_MAX, DedupWindow
from logbroker.errors import NotAvailableError, NotLeaderError, UnknownPartitionError
from logbroker.storage_health import StorageHealth, free_bytes
from segments.batch import HEADER_SIZE, BatchHeader, parse_header
from segments.checkpoint import (
    HIGH_WATERMARK_FILE,
    RECOVERY_POINT_FILE,
    read_offsets,
    write_atomic,
    write_offsets,
)
from segments.config import LogConfig
from segments.errors import (
    CorruptCheckpointError,
    LogClosedError,
    LogOfflineError,
    StorageError,
    StorageFullError,
    TooManyOpenFilesError,
    is_fd_limit,
    is_no_space,
)
from segments.group_commit import GroupCommit
from segments.handles import SegmentHandles
from segments.log import AppendInfo, LogRead, PartitionLog
from segments.segment import LogSegment

log = logging.getLogger(__name__)


DEDUP_SCAN_BYTES_MAX: Final = 256 * 1024 * 1024
DEDUP_SCAN_READ_BYTES: Final = 4 * 1024 * 1024
LAPSED: Final = object()  # what a waiting fetch's future holds when its wait ran out


class WaiterBudget:
    """A node-wide bound on waiting fetches."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


@final
class Replica:
    __slots__ = ("_budget", "_commit", "_health", "_waiters", "ack_wait", "dedup", "epoch", "high_watermark",
                 "in_cluster", "leader_hook", "local_end", "log", "partition", "topic", "unclean_start")

    def __init__(self, topic: str, partition: int, partition_log: PartitionLog, commit: GroupCommit,
                 budget: WaiterBudget, health: StorageHealth | None = None, *,
                 high_watermark: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.log = partition_log
        end = partition_log.log_end_offset
        # A cluster's replica: its high watermark moves only by the replication rules.
        self.in_cluster = high_watermark is not None
        self.high_watermark = end if high_watermark is None else max(partition_log.log_start_offset,
                                                                     min(high_watermark, end))
        # The end of what this node holds as its policy wants it (fsynced under ``always``).
        self.local_end = end
        # Set while this node leads the partition in a cluster: called when ``local_end`` moves.
        self.leader_hook: Callable[[Replica], None] | None = None
        # Set while this node leads in a cluster: waits until the ISR holds every record below an offset.
        self.ack_wait: Callable[[int], Awaitable[None]] | None = None
        self.epoch = 0  # the leader epoch appends are stamped with (the leadership's, in a cluster)
        # Idempotent writes stored lately; built from the log when first needed (``dedup_window``).
        self.dedup: DedupWindow | None = None
        # A cluster's replica whose log was not closed cleanly (a crash, a power cut): it may lack
        # records it had acknowledged, so it leaves the ISR before it may stand (decision 0385).
        self.unclean_start = False
        self._waiters: list[asyncio.Future[object]] = []
        self._commit = commit
        self._budget = budget
        self._health = health or StorageHealth()

    def append(self, batch: bytes | memoryview) -> AppendInfo:
        """Append a batch as the leader (stamped with ``epoch``). No fsync runs here, on the event
        loop: ``always`` waits for one in ``commit``; ``interval`` starts one in the background
        when it falls due."""
        if self.in_cluster and self.leader_hook is None:
            raise NotLeaderError(f"this node does not lead partition {self.partition} of {self.topic!r} now; retry")
        with self._write_faults():
            info = self.log.append(batch, leader_epoch=self.epoch, flush=False)
        if self.log.flush_due():
            self._commit.flush_in_background()
        return info

    @contextlib.contextmanager
    def _write_faults(self) -> Iterator[None]:
        """A full disk marks the node's storage health (a success clears it); a log that went
        offline fails its waiters at once."""
        try:
            yield
        except StorageFullError:
            self._health.write_failed_full()
            raise
        except LogOfflineError:
            self.wake_all()
            raise
        if self._health.full_since_ms is not None:
            self._health.write_succeeded()

    async def commit(self, info: AppendInfo) -> None:
        """After ``append``: wait for the fsync when the policy
        is ``always``, then expose the records to readers (advance the high watermark)."""
        if self.log.config.flush == "always":
            await self.make_durable(info)
        self.local_end = max(self.local_end, info.log_end_offset)
        if self.leader_hook is not None:
            self.leader_hook(self)
        elif not self.in_cluster:
            self._advance(info.log_end_offset)

    def commit_replicated(self, info: AppendInfo) -> Awaitable[None]:
        """``commit``, then, on a cluster's leader, wait until the in-sync replicas hold the batch
        (``acks=all``; internal logs: group offsets and queue state survive a failover). Call it
        right after ``append``, in the same step: it waits on the leadership the batch was
        appended under, and fails with ``not_leader`` if that one is gone already."""
        wait = self.ack_wait
        if self.in_cluster and wait is None:
            return self._commit_then_fail(info)
        return self._commit_and_wait(info, wait)

    async def _commit_and_wait(self, info: AppendInfo, wait: Callable[[int], Awaitable[None]] | None) -> None:
        await self.commit(info)
        if wait is not None:
            await wait(info.log_end_offset)

    async def _commit_then_fail(self, info: AppendInfo) -> None:
        await self.commit(info)
        raise NotLeaderError(f"this node stopped leading partition {self.partition} of {self.topic!r} before the "
                             "write was confirmed; it may or may not be kept")

    async def make_durable(self, info: AppendInfo) -> None:
        """Wait until the batch of ``info`` is fsynced, whatever the flush policy. A failed fsync
        takes the log offline: this waiter and every waiting fetch fail."""
        try:
            await self._commit.wait_durable(info.last_offset)
        except LogOfflineError:
            self.wake_all()
            raise

    def append_copied(self, batches: bytes | memoryview) -> AppendInfo | None:
        """Append batches copied from another replica, back to back, as they are (offsets and
        epochs kept; the first must start at this log's end; one write per segment and epoch).
        On an error the batches before the failing one stay. Readers see them once ``advance``
        says so."""
        with self._write_faults():
            info = self.log.append_replicas(batches, flush=False)
        if self.log.flush_due():
            self._commit.flush_in_background()
        return info

    def dedup_window(self, window_ms: int, now_ms: int, entries_max: int = ENTRIES_MAX) -> DedupWindow:
        """The partition's de-duplication window, rebuilt from the tail of the log (at most
        ``DEDUP_SCAN_BYTES_MAX`` of it) the first time it is needed after an open, a truncation
        or a change of leader."""
        if self.dedup is None or self.dedup.window_ms != window_ms:
            self.dedup = DedupWindow.from_headers(self._headers_since(now_ms - window_ms), window_ms, now_ms,
                                                  entries_max)
        return self.dedup

    def _headers_since(self, timestamp_ms: int) -> Iterator[BatchHeader]:
        partition_log = self.log
        offset = partition_log.offset_for_timestamp(max(timestamp_ms, 0))
        if offset is None:
            return
        scanned = 0
        while offset < partition_log.log_end_offset and scanned < DEDUP_SCAN_BYTES_MAX:
            read = partition_log.read(offset, DEDUP_SCAN_READ_BYTES)
            if read.next_offset <= offset:
                return
            data, position = read.data, 0
            while position + HEADER_SIZE <= len(data):
                header = parse_header(data, position)
                yield header
                position += header.size_bytes
            scanned += len(data)
            offset = read.next_offset

    def truncate(self, offset: int, *, restart: bool = False) -> None:
        """Cut the log to ``offset`` (a follower dropping a divergent suffix), or with ``restart``
        empty it and start it at ``offset`` (its leader's retention passed its end). The high
        watermark follows the cut down; waiting fetches wake and read again."""
        with self._write_faults():
            if restart:
                self.log.truncate_fully_and_start_at(offset)
            else:
                self.log.truncate_to(offset)
        end = self.log.log_end_offset
        self._commit.fail_from(end, NotLeaderError(f"partition {self.partition} of {self.topic!r} was cut at {end} "
                                                   "(a new leader did not have what followed)"))
        self.dedup = None
        self.local_end = end if restart else min(self.local_end, end)
        if restart or self.high_watermark > end:
            self.high_watermark = end
        self.wake_all()

    def copied(self, end: int) -> None:
        """Copied batches up to ``end`` are held as the flush policy wants (a follower)."""
        self.local_end = max(self.local_end, min(end, self.log.log_end_offset))

    def advance(self, offset: int) -> None:
        """Expose records below ``offset`` (never past the log end, never backwards)."""
        self._advance(offset)

    def _advance(self, offset: int) -> None:
        if offset <= self.high_watermark:
            return
        self.high_watermark = min(offset, self.log.log_end_offset)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def wait_for_data(self, offset: int, timeout_ms: int) -> None:
        """Return once the high watermark passes ``offset`` or ``timeout_ms`` elapse."""
        if self.high_watermark > offset or timeout_ms <= 0:
            return
        if self._budget.used >= self._budget.limit:
            raise NotAvailableError(f"{self._budget.used} fetches are already waiting; retry later")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[object] = loop.create_future()
        self._waiters.append(future)
        self._budget.used += 1
        # A timer that resolves the future, not ``asyncio.timeout``: a lapsed wait is an ordinary
        # return, and a tailing reader waits once per append, so the cancel-and-raise round of a
        # timeout cost more than the rest of the wait.
        timer = loop.call_later(timeout_ms / 1000, _lapse, future)
        try:
            await future
        finally:
            timer.cancel()
            self._budget.used -= 1
            if not future.done():
                future.cancel()
            if future.cancelled() or future.result() is LAPSED:  # still listed: only a wake-up empties the list
                self._waiters = [f for f in self._waiters if f is not future]

    def wake_all(self) -> None:
        """Release every waiting fetch (shutdown)."""
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


def _lapse(future: asyncio.Future[object]) -> None:
    if not future.done():
        future.set_result(LAPSED)


def _open_claimed(path: str, config: LogConfig, topic_id: str, **kwargs: Any) -> PartitionLog:
    """Open the partition log at ``path`` for the topic with id ``topic_id``. The directory names
    the topic by name only, so it also records the id (``TOPIC_ID_FILE``): a directory left by an
    older topic of the same name (deleted while this node was down) is removed, never served as
    the new topic's data. A directory from before ids were recorded is claimed as it is."""
    marker = os.path.join(path, TOPIC_ID_FILE)
    try:
        with open(marker, "rb") as f:
            found: str | None = f.read(TOPIC_ID_BYTES_MAX).decode(errors="replace").strip()
    except FileNotFoundError:
        found = None
    if found is not None and found != topic_id:
        log.warning("removing the data of an older topic of the same name", extra={"fields": {
            "path": path, "old_topic_id": found, "topic_id": topic_id}})
        shutil.rmtree(path)
        kwargs["recovery_point"] = 0
    partition_log = PartitionLog.open(path, config, **kwargs)
    if found != topic_id:
        write_atomic(marker, topic_id.encode())
    return partition_log


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


DELETE_SUFFIX = "-delete"
TOPIC_ID_FILE: Final = "topic-id"
TOPIC_ID_BYTES_MAX: Final = 256


def deletion_mark(path: str, topic_id: str) -> str:
    """The name a partition directory takes while its topic is being deleted."""
    return f"{path}.{topic_id}{DELETE_SUFFIX}"


def _deletion_marks(data_dir: str) -> list[tuple[str, str]]:
    """``(directory name, topic id)`` of every deletion mark in ``data_dir``."""
    marks = []
    for name in os.listdir(data_dir):
        if name.endswith(DELETE_SUFFIX) and os.path.isdir(os.path.join(data_dir, name)):
            _, _, topic_id = name[: -len(DELETE_SUFFIX)].rpartition(".")
            if topic_id:
                marks.append((name, topic_id))
    return marks


@final
class ReplicaManager:
    def __init__(self, data_dir: str, *, flush_threads: int, waiters_max: int,
                 fsync: Callable[[int], None] = os.fsync, at_rest: AtRest | None = None,
                 compaction_bytes_per_s: int = 0) -> None:
        """``fsync`` is what every log calls to make its files durable (tests inject faults);
        ``at_rest`` opens sealed batches for ``read_plain`` (none: the bytes are left as read);
        ``compaction_bytes_per_s`` bounds the I/O of compacting topics (0: no bound)."""
        self.data_dir = data_dir
        self.at_rest = at_rest or AtRest(None)
        self._fsync = fsync
        self.compactor = Compactor(compaction_bytes_per_s, ring=self.at_rest.ring, fsync=fsync)
        self._executor = ThreadPoolExecutor(max_workers=flush_threads, thread_name_prefix="logbroker-io")
        # topic -> partition -> replica: every partition on a single node, the hosted ones in a cluster.
        self._replicas: dict[str, dict[int, Replica]] = {}
        self._budget = WaiterBudget(waiters_max)
        self._recovery_points: dict[tuple[str, int], int] = {}
        self._high_watermarks: dict[tuple[str, int], int] = {}
        self._closed = False
        self.health = StorageHealth()
        self.handles = SegmentHandles[LogSegment]()
        self._reported_offline: set[tuple[str, int]] = set()
        self._topic_listeners: list[Callable[[str], None]] = []

    def read_plain(self, replica: Replica, offset: int, size_bytes_max: int, *,
                   offset_max: int | None = None) -> LogRead:
        """A read of ``replica``'s log for clients: its sealed batches opened (``AtRest.open``).
        Replication and recovery read the log itself and move the sealed bytes."""
        result = replica.log.read(offset, size_bytes_max, offset_max=offset_max)
        if self.at_rest.ring is None or not result.data:
            return result
        return result._replace(data=memoryview(self.at_rest.open(result.data, replica.topic, replica.partition)))

    def on_topic_change(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(topic)`` (on the event loop, must not block) whenever a topic's count of
        open partitions changes: opened, grown or removed."""
        self._topic_listeners.append(listener)

    def _topic_changed(self, topic: str) -> None:
        for listener in self._topic_listeners:
            listener(topic)

    def load_checkpoints(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        try:
            self._recovery_points = read_offsets(os.path.join(self.data_dir, RECOVERY_POINT_FILE))
        except CorruptCheckpointError as exc:
            log.warning("recovery point checkpoint unreadable; every log is rescanned",
                        extra={"fields": {"error": str(exc)}})
            self._recovery_points = {}
        try:
            self._high_watermarks = read_offsets(os.path.join(self.data_dir, HIGH_WATERMARK_FILE))
        except CorruptCheckpointError as exc:
            log.warning("high watermark checkpoint unreadable; partitions in a cluster open at their log start",
                        extra={"fields": {"error": str(exc)}})
            self._high_watermarks = {}

    async def open_topic(self, meta: TopicMetadata, config: LogConfig, hosted: Iterable[int] | None = None) -> None:
        """Open (or create) the partition logs of ``meta`` this node hosts (``hosted``; None: every
        partition, a single node) that are not open yet; recovery runs in the executor. Partitions
        opened before a failure stay registered (their files are open and counted)."""
        replicas = dict(self._replicas.get(meta.name, {}))
        wanted = range(meta.partitions) if hosted is None else sorted(p for p in hosted if 0 <= p < meta.partitions)
        try:
            await self._open_partitions(meta, config, [p for p in wanted if p not in replicas], replicas,
                                        in_cluster=hosted is not None)
        finally:
            self._replicas[meta.name] = dict(sorted(replicas.items()))
            self._topic_changed(meta.name)

    def reconfigure(self, topic: str, config: LogConfig) -> int:
        """Give every open partition of ``topic`` whose config differs ``config`` from now on (a
        changed topic config takes effect live, ``PartitionLog.reconfigure``); returns how many."""
        changed = 0
        for replica in self._replicas.get(topic, {}).values():
            if replica.log.config != config:
                replica.log.reconfigure(config)
                changed += 1
        return changed

    def hosts(self, topic: str, partition: int) -> bool:
        """True when this node has ``partition`` of ``topic`` open."""
        return partition in self._replicas.get(topic, {})

    async def _open_partitions(self, meta: TopicMetadata, config: LogConfig, wanted: list[int],
                               replicas: dict[int, Replica], *, in_cluster: bool) -> None:
        for p in wanted:
            path = os.path.join(self.data_dir, partition_dir_name(meta.name, p))
            point = self._recovery_points.get((meta.name, p), 0)
            try:
                opened = await self._open_log(path, config, point, meta.topic_id)
            except OSError as exc:
                if is_fd_limit(exc):
                    raise TooManyOpenFilesError(f"cannot open {path}: {exc}") from exc
                if is_no_space(exc):
                    raise StorageFullError(f"cannot create {path}: {exc}") from exc
                raise
            report = opened.recovery
            if report is not None and (report.errors or report.truncated_bytes):
                log.warning("partition recovered with loss", extra={"fields": {
                    "topic": meta.name, "partition": p, "truncated_bytes": report.truncated_bytes,
                    "errors": list(report.errors)}})
            # A cluster's replica opens at its checkpointed high watermark (DESIGN §6).
            high_watermark = None if not in_cluster else self._high_watermarks.get((meta.name, p), 0)
            replica = replicas[p] = Replica(meta.name, p, opened, GroupCommit(opened, self._executor), self._budget,
                                            self.health, high_watermark=high_watermark)
            # A log that existed (a segment was recovered) and has no clean-shutdown mark, or one
            # that ends below the high watermark this node checkpointed for it (its files were lost).
            replica.unclean_start = in_cluster and (
                (report is not None and not report.clean_shutdown and report.segments_recovered > 0)
                or (high_watermark or 0) > opened.log_end_offset)

    async def _open_log(self, path: str, config: LogConfig, recovery_point: int, topic_id: str) -> PartitionLog:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(
            _open_claimed, path, config, topic_id, recovery_point=recovery_point, fsync=self._fsync,
            handles=self.handles))

    def get(self, topic: str, partition: int) -> Replica:
        replicas = self._replicas.get(topic)
        if replicas is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        replica = replicas.get(partition)
        if replica is None:
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}",
                                        partitions=len(replicas))
        return replica

    def partitions(self, topic: str) -> list[Replica]:
        """The open partitions of ``topic`` by number (on a single node: all of them, so the list
        index is the partition number)."""
        replicas = self._replicas.get(topic)
        if replicas is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return list(replicas.values())

    def count(self, topic: str) -> int:
        """How many partitions of ``topic`` are open here (on a single node: all of them)."""
        replicas = self._replicas.get(topic)
        if replicas is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return len(replicas)

    def all(self) -> list[Replica]:
        return [r for replicas in self._replicas.values() for r in replicas.values()]

    async def remove_topic(self, topic: str, topic_id: str) -> None:
        """Close every partition log of ``topic`` and free its space: each partition directory is
        renamed to its deletion mark and emptied. ``purge_deleted`` removes the marks once the
        deletion is committed. Works on a full disk (it writes nothing)."""
        replicas = list(self._replicas.pop(topic, {}).values())
        self._topic_changed(topic)
        for replica in replicas:
            replica.wake_all()
            self.compactor.forget(topic, replica.partition)
        await asyncio.get_running_loop().run_in_executor(self._executor, self._empty_dirs, replicas, topic, topic_id)

    def _empty_dirs(self, replicas: list[Replica], topic: str, topic_id: str) -> None:
        for replica in replicas:
            mark = deletion_mark(replica.log.directory, topic_id)
            try:
                replica.log.delete(rename_to=mark)
            except OSError as exc:
                # The rename itself failed (a directory that must grow on a full disk): free the
                # space in place; only the mark that a restart would finish from is lost.
                log.warning("partition deleted without its deletion mark", extra={"fields": {
                    "topic": topic, "partition": replica.partition, "error": str(exc)}})
                shutil.rmtree(replica.log.directory, ignore_errors=True)
        for name in os.listdir(self.data_dir):
            prefix, _, number = name.rpartition("-")
            if prefix == topic and number.isdigit():  # a directory no open log owned
                path = os.path.join(self.data_dir, name)
                mark = deletion_mark(path, topic_id)
                try:
                    os.rename(path, mark)
                except OSError:
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                shutil.rmtree(mark, ignore_errors=True)
                os.makedirs(mark, exist_ok=True)

    async def drop_partitions(self, topic: str, partitions: Iterable[int]) -> None:
        """Close and delete the logs of ``partitions`` of ``topic`` (moved to other nodes)."""
        held = self._replicas.get(topic, {})
        dropped = [held.pop(p) for p in sorted(set(partitions)) if p in held]
        if not dropped:
            return
        self._topic_changed(topic)
        for replica in dropped:
            replica.wake_all()
            self.compactor.forget(topic, replica.partition)

        def delete() -> None:
            for replica in dropped:
                replica.log.delete()

        await asyncio.get_running_loop().run_in_executor(self._executor, delete)

    async def remove_strays(self) -> list[str]:
        """Remove partition directories no open log owns (a cluster node's partitions that were
        deleted or moved away while it was down). Call once every hosted partition is open."""
        owned = {os.path.normpath(replica.log.directory) for replica in self.all()}

        def remove() -> list[str]:
            removed = []
            for name in os.listdir(self.data_dir):
                path = os.path.join(self.data_dir, name)
                topic, _, number = name.rpartition("-")
                if topic and number.isdigit() and os.path.isdir(path) and os.path.normpath(path) not in owned:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(name)
            return removed

        removed = await asyncio.get_running_loop().run_in_executor(self._executor, remove)
        if removed:
            log.warning("removed partition directories this node no longer hosts", extra={"fields": {
                "directories": removed[:100], "count": len(removed)}})
        return removed

    def pending_deletions(self) -> set[str]:
        """Topic ids whose deletion a previous run began (their directories bear the mark)."""
        return {topic_id for _, topic_id in _deletion_marks(self.data_dir)}

    def purge_deleted(self, topic_id: str) -> None:
        """Remove the deletion marks of ``topic_id`` (after its deletion was committed)."""
        for name, marked in _deletion_marks(self.data_dir):
            if marked == topic_id:
                shutil.rmtree(os.path.join(self.data_dir, name), ignore_errors=True)

    def offline_partitions(self) -> list[dict[str, object]]:
        return [{"topic": r.topic, "partition": r.partition, "reason": r.log.offline_reason}
                for r in self.all() if r.log.offline_reason is not None]

    async def maintain(self) -> None:
        """One round of background work: due flushes, retention, checkpoints; then the storage
        state (free space, logs gone offline) on the event loop."""
        replicas = self.all()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._maintain_blocking, replicas)
        self.compactor.offer(replicas)
        space = await loop.run_in_executor(self._executor, free_bytes, self.data_dir)
        if space is not None:
            self.health.space_seen(space)
        for replica in replicas:
            key = (replica.topic, replica.partition)
            if replica.log.offline_reason is not None and key not in self._reported_offline:
                self._reported_offline.add(key)
                replica.wake_all()
                log.error("partition offline: its log is refused until the node restarts and recovers it",
                          extra={"fields": {"topic": replica.topic, "partition": replica.partition,
                                            "reason": replica.log.offline_reason}})

    def _maintain_blocking(self, replicas: list[Replica]) -> None:
        for replica in replicas:
            try:
                replica.log.flush_if_due()
                replica.log.apply_retention()
            except (LogClosedError, LogOfflineError):
                continue  # deleted while this round ran, or offline (reported on the event loop)
            except StorageFullError:
                self.health.write_failed_full()
        try:
            self._write_checkpoints(replicas)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            self.health.write_failed_full()
            log.warning("checkpoints not written: the disk is full", extra={"fields": {"error": str(exc)}})

    def _write_checkpoints(self, replicas: list[Replica]) -> None:
        write_offsets(os.path.join(self.data_dir, RECOVERY_POINT_FILE),
                      {(r.topic, r.partition): r.log.recovery_point for r in replicas})
        write_offsets(os.path.join(self.data_dir, HIGH_WATERMARK_FILE),
                      {(r.topic, r.partition): r.high_watermark for r in replicas})

    async def close(self) -> None:
        """Flush and close every log, then write the checkpoints. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for replica in self.all():
            replica.wake_all()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.compactor.close)
        await loop.run_in_executor(self._executor, self._close_blocking)
        self._executor.shutdown(wait=True)

    def _close_blocking(self) -> None:
        replicas = self.all()
        for replica in replicas:
            try:
                replica.log.close()
            except (OSError, StorageError) as exc:
                log.error("log not closed cleanly; the next start recovers it", extra={"fields": {
                    "topic": replica.topic, "partition": replica.partition, "error": str(exc)}})
        try:
            self._write_checkpoints(replicas)
        except OSError as exc:
            # The previous checkpoints stay: older recovery points only mean more to rescan.
            log.error("checkpoints not written at shutdown", extra={"fields": {"error": str(exc)}})
