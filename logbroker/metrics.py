"""Prometheus metrics of one node, in a registry of its own (several nodes may share a process
in tests). Per-partition gauges are read from the replicas at scrape time, never pushed."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from logbroker.compactor import CompactionStatus
from logbroker.replica_manager import Replica
from logbroker.storage_health import StorageHealth
from segments.handles import SegmentHandles
from segments.segment import LogSegment

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _PartitionCollector(Collector):
    def __init__(self, replicas: Callable[[], list[Replica]],
                 compaction: Mapping[tuple[str, int], CompactionStatus] | None = None) -> None:
        self._replicas = replicas
        self._compaction = compaction if compaction is not None else {}

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        end = GaugeMetricFamily("logbroker_log_end_offset", "Next offset to be written", labels=["topic", "partition"])
        start = GaugeMetricFamily("logbroker_log_start_offset", "First offset kept", labels=["topic", "partition"])
        hwm = GaugeMetricFamily("logbroker_high_watermark", "Offset below which consumers read",
                                labels=["topic", "partition"])
        size = GaugeMetricFamily("logbroker_log_size_bytes", "Bytes on disk", labels=["topic", "partition"])
        offline = GaugeMetricFamily("logbroker_log_offline", "1 when the partition's log is offline (a failed fsync"
                                    " or write); it stays so until the node restarts", labels=["topic", "partition"])
        dirty = GaugeMetricFamily("logbroker_compaction_dirty_ratio", "Share of a compacted partition's closed "
                                  "segment bytes not compacted yet", labels=["topic", "partition"])
        last = GaugeMetricFamily("logbroker_compaction_last_timestamp_seconds", "When the partition's last "
                                 "compaction pass ended (0: none since the node started)",
                                 labels=["topic", "partition"])
        cleaned = CounterMetricFamily("logbroker_compaction_bytes_removed", "Bytes compaction removed from the "
                                      "partition", labels=["topic", "partition"])
        for replica in self._replicas():
            labels = [replica.topic, str(replica.partition)]
            if replica.log.offline_reason is not None:
                offline.add_metric(labels, 1)
                continue
            end.add_metric(labels, replica.log.log_end_offset)
            start.add_metric(labels, replica.log.log_start_offset)
            hwm.add_metric(labels, replica.high_watermark)
            size.add_metric(labels, replica.log.size_bytes)
            if replica.log.config.compacts and not replica.topic.startswith("__"):
                status = self._compaction.get((replica.topic, replica.partition), CompactionStatus())
                dirty.add_metric(labels, replica.log.dirty_ratio())
                last.add_metric(labels, status.last_ms / 1000)
                cleaned.add_metric(labels, status.bytes_removed)
        yield from (end, start, hwm, size, offline, dirty, last, cleaned)


class _StorageCollector(Collector):
    def __init__(self, health: StorageHealth, handles: SegmentHandles[LogSegment]) -> None:
        self._health = health
        self._handles = handles

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        full = GaugeMetricFamily("logbroker_storage_full", "1 while the data directory's disk is full")
        full.add_metric([], 1 if self._health.full else 0)
        errors = CounterMetricFamily("logbroker_storage_full_errors", "Writes refused because the disk was full")
        errors.add_metric([], self._health.full_errors)
        sealed = GaugeMetricFamily("logbroker_open_sealed_segments",
                                   "Sealed segments holding their files open (bounded; the rest reopen on use)")
        sealed.add_metric([], self._handles.open_count)
        releases = CounterMetricFamily("logbroker_sealed_segment_releases",
                                       "Sealed segments whose files were closed to stay within the budget")
        releases.add_metric([], self._handles.releases)
        files = GaugeMetricFamily("logbroker_open_files", "File descriptors the process holds")
        files.add_metric([], len(os.listdir("/proc/self/fd")))
        limit = GaugeMetricFamily("logbroker_open_files_limit", "The process's soft descriptor limit")
        limit.add_metric([], resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        yield from (full, errors, sealed, releases, files, limit)


class Metrics:
    def __init__(self, replicas: Callable[[], list[Replica]], health: StorageHealth | None = None,
                 handles: SegmentHandles[LogSegment] | None = None, *,
                 compaction: Mapping[tuple[str, int], CompactionStatus] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("logbroker_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("logbroker_http_request_duration_seconds", "HTTP request latency",
                                 ["method", "route"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self._topic_counters: dict[str, tuple[Counter, Counter, Counter, Counter]] = {}
        self.bytes_in = Counter("logbroker_bytes_in", "Record batch bytes appended", ["topic"], registry=self.registry)
        self.bytes_out = Counter("logbroker_bytes_out", "Record batch bytes served", ["topic"], registry=self.registry)
        self.records_in = Counter("logbroker_records_in", "Records appended", ["topic"], registry=self.registry)
        self.records_out = Counter("logbroker_records_out", "Offsets served to readers from their fetch position on "
                                   "(records, and the gaps compaction left among them)", ["topic"],
                                   registry=self.registry)
        self.background_failures = Counter("logbroker_background_task_failures",
                                           "Rounds of a background task that failed (each is retried)", ["task"],
                                           registry=self.registry)
        self.duplicates = Counter("logbroker_produce_duplicates", "Retried idempotent batches answered with their "
                                  "first offsets, nothing appended", ["topic"], registry=self.registry)
        self.dead_letters_withheld = Counter(
            "logbroker_dead_letters_withheld", "Dead messages kept out of a queue's dead-letter topic because it is "
            "gone or its owner may not write to it (they stay dead in the queue's state log)", ["queue", "reason"],
            registry=self.registry)
        self.records_skipped = Counter(
            "logbroker_unreadable_records_skipped", "Offsets of stored batches whose records cannot be decoded, "
            "passed over by a reader (which delivered the records around them)", ["topic", "reader"],
            registry=self.registry)
        self.registry.register(_PartitionCollector(replicas, compaction))
        self.registry.register(_StorageCollector(health or StorageHealth(), handles or SegmentHandles[LogSegment]()))

    def count_background_failure(self, task: str) -> None:
        self.background_failures.labels(task).inc()

    def count_in(self, topic: str, size_bytes: int, records: int) -> None:
        """An append stored ``size_bytes`` holding ``records`` records."""
        bytes_in, records_in, _, _ = self._of_topic(topic)
        bytes_in.inc(size_bytes)
        records_in.inc(records)

    def count_out(self, topic: str, size_bytes: int, offsets: int) -> None:
        """A read served ``size_bytes`` of whole batches, ``offsets`` of them at or past its position."""
        _, _, bytes_out, records_out = self._of_topic(topic)
        bytes_out.inc(size_bytes)
        records_out.inc(max(0, offsets))

    def _of_topic(self, topic: str) -> tuple[Counter, Counter, Counter, Counter]:
        """A topic's four traffic counters, looked up once: ``labels()`` costs more than the
        increment it serves on every append and every read. A topic's series are never removed,
        so neither are these (there are as many as topics the node has served)."""
        found = self._topic_counters.get(topic)
        if found is None:
            found = (self.bytes_in.labels(topic), self.records_in.labels(topic),
                     self.bytes_out.labels(topic), self.records_out.labels(topic))
            self._topic_counters[topic] = found
        return found

    def count_duplicate(self, topic: str) -> None:
        self.duplicates.labels(topic).inc()

    def count_withheld_dead_letters(self, queue: str, reason: str, count: int) -> None:
        self.dead_letters_withheld.labels(queue, reason).inc(count)

    def count_skipped(self, topic: str, reader: str, offsets: int) -> None:
        self.records_skipped.labels(topic, reader).inc(offsets)

    def render(self) -> bytes:
        return generate_latest(self.registry)
