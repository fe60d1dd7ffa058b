"""Spark readers: batch (``DataSourceReader``) and streaming (``DataSourceStreamReader``).

Batch: one input partition per topic partition (split by offset range when ``minPartitions`` asks
for more), ``[startingOffsets, endingOffsets)`` capped at the high watermark.

Streaming: offsets are ``{"<topic>": {"<partition>": next offset}}``. ``latestOffset(start,
limit)`` reads the current high watermarks and, under ``maxOffsetsPerTrigger``, moves at most that
many records past ``start`` (shared over the partitions in proportion to their backlog). A
partition that appears later is read from offset 0. ``Trigger.AvailableNow`` fixes the target
when the query starts and never goes past it. Micro-batch ranges come only from the ``start``
and ``end`` that Spark checkpointed, so a restarted query re-reads exactly what it had not
committed: no gap, no duplicate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from spark_connector import offsets
from spark_connector.errors import ConnectorError, OptionError
from spark_connector.http import client_for
from spark_connector.offsets import Bounds, OffsetRange
from spark_connector.options import EARLIEST, LATEST, ReadOptions
from spark_connector.sources import PartitionSource, open_source
from spark_connector.tasks import ReadTask, read_task

log = logging.getLogger(__name__)


class TaskPartition(InputPartition):
    """An input partition carrying its ``ReadTask``."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task


def _tasks(options: ReadOptions, source: PartitionSource, ranges: list[OffsetRange]) -> list[TaskPartition]:
    return [TaskPartition(ReadTask(options.location, source.directory(r.partition), options.topic, r.partition,
                                   r.start, r.end, options.fail_on_data_loss, source.compacted)) for r in ranges]


def _starts(options: ReadOptions, source: PartitionSource, bounds: dict[int, Bounds]) -> dict[int, int]:
    if options.starting_timestamp is not None:
        return {p: source.offset_for_timestamp(p, options.starting_timestamp, b.latest) for p, b in bounds.items()}
    return offsets.resolve(options.starting, bounds, default=EARLIEST, display="startingOffsets")


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        source = open_source(self.options.location, self.options.topic)
        bounds = source.bounds()
        starts = _starts(self.options, source, bounds)
        ends = offsets.resolve(self.options.ending, bounds, default=LATEST, display="endingOffsets")
        # On a compacted topic a log start past the asked start is compaction, not loss (decision 0324).
        fail_on_data_loss = self.options.fail_on_data_loss and not source.compacted
        ranges = offsets.batch_ranges(starts, ends, bounds, fail_on_data_loss=fail_on_data_loss)
        return _tasks(self.options, source, offsets.split(ranges, self.options.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TaskPartition)
        return read_task(partition.task)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[int, int] | None = None

    def _source(self) -> PartitionSource:
        return open_source(self.options.location, self.options.topic)

    def _latest(self) -> dict[int, int]:
        return {p: b.latest for p, b in self._source().bounds().items()}

    def initialOffset(self) -> dict:  # type: ignore[type-arg]
        source = self._source()
        bounds = source.bounds()
        starts = _starts(self.options, source, bounds)
        return offsets.to_json(self.options.topic, starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[type-arg]
        begin = offsets.from_json(self.options.topic, start)
        latest = self._target if self._target is not None else self._latest()
        for p, offset in begin.items():  # a partition that vanished keeps its offset
            latest[p] = max(latest.get(p, offset), offset)
        if isinstance(limit, ReadMaxRows):
            end = offsets.rate_limit(begin, latest, limit.max_rows)
        elif isinstance(limit, ReadAllAvailable):
            end = offsets.rate_limit(begin, latest, None)
        else:
            raise OptionError(f"the logbroker source supports maxOffsetsPerTrigger only, not {limit}")
        return offsets.to_json(self.options.topic, end)

    def reportLatestOffset(self) -> dict | None:  # type: ignore[type-arg]
        return offsets.to_json(self.options.topic, self._latest())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:  # type: ignore[type-arg]
        begin = offsets.from_json(self.options.topic, start)
        finish = offsets.from_json(self.options.topic, end)
        ranges = [OffsetRange(p, begin.get(p, 0), finish[p]) for p in sorted(finish) if finish[p] > begin.get(p, 0)]
        source = self._source()
        source.bounds()  # tells whether the topic is compacted now, which the tasks need (decision 0324)
        return _tasks(self.options, source, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TaskPartition)
        return read_task(partition.task)

    def commit(self, end: dict) -> None:  # type: ignore[type-arg]
        """Spark's checkpoint holds the query's progress; with ``commitToGroup`` it is also
        committed to that consumer group (a commit without a member, for a group that has none),
        so lag tools and the console see the query's lag. Spark calls this for a batch as the next
        one starts, so the group trails the query by one batch. A failed commit is logged, never
        fails the query: it only reports progress."""
        group = self.options.commit_to_group
        if group is None:
            return
        finish = offsets.from_json(self.options.topic, end)
        body = {"offsets": [{"topic": self.options.topic, "partition": p, "offset": o}
                            for p, o in sorted(finish.items())]}
        try:
            with client_for(self.options.location) as client:
                client.json("POST", f"/v1/groups/{group}/offsets", body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})
        except (ConnectorError, OSError) as exc:
            log.warning("could not commit the query's progress to group %s: %s", group, exc)

    def stop(self) -> None:
        """Nothing to release: each call opens and closes what it uses."""
