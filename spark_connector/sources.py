"""Where a topic's partitions are and how far they go: data directories, or a node over HTTP.

Planning (on the driver) asks a source for each partition's ``Bounds`` (earliest offset, high
watermark) and for the first offset at a timestamp. The direct source takes the high watermark
from the broker's ``high-watermark-checkpoint`` (never from the segment files, which may hold
appended records that are not committed yet); with several data directories (a cluster's nodes
sharing their disks) each partition is read from the directory whose checkpoint is furthest on.
"""

from __future__ import annotations

import os
from typing import Protocol

from segments.errors import CorruptCheckpointError, StorageError
from segments.reader import SegmentReader, high_watermarks, partition_directories
from segments.scan import BatchScan
from segments.segment import LOG_SUFFIX, segment_file_name
from spark_connector.errors import ReadError, TopicNotFoundError
from spark_connector.http import HttpClient, HttpError, client_for
from spark_connector.offsets import Bounds
from spark_connector.options import Location

HEADER_SCAN_BYTES_MAX = 64 * 1024 * 1024


class PartitionSource(Protocol):
    # True when the topic is compacted (decision 0324): gaps between offsets are not data loss.
    compacted: bool

    def bounds(self) -> dict[int, Bounds]: ...

    def offset_for_timestamp(self, partition: int, timestamp_ms: int, latest: int) -> int: ...

    def directory(self, partition: int) -> str: ...


def open_source(location: Location, topic: str) -> PartitionSource:
    if location.direct:
        return DirectSource(location.data_dirs, topic)
    return HttpSource(location, topic)


class DirectSource:
    """Partitions found as ``<topic>-<p>`` directories under the given data directories."""

    def __init__(self, data_dirs: tuple[str, ...], topic: str) -> None:
        self.topic = topic
        # The data directory does not hold topic configs: gaps count as data loss here.
        self.compacted = False
        self._found: dict[int, tuple[str, int]] = {}
        for data_dir in data_dirs:
            if not os.path.isdir(data_dir):
                raise TopicNotFoundError(f"path: {data_dir!r} is not a directory (give the broker's data directory)")
            try:
                marks = high_watermarks(data_dir)
            except CorruptCheckpointError as exc:
                raise ReadError(f"{data_dir}: the high watermark checkpoint cannot be read: {exc}") from exc
            for partition, directory in partition_directories(data_dir, topic).items():
                mark = marks.get((topic, partition), 0)
                if partition not in self._found or mark > self._found[partition][1]:
                    self._found[partition] = (directory, mark)
        if not self._found:
            raise TopicNotFoundError(f"topic {topic!r} has no partition directory ({topic}-<n>) in {list(data_dirs)}")

    def bounds(self) -> dict[int, Bounds]:
        out = {}
        for partition, (directory, mark) in sorted(self._found.items()):
            earliest = SegmentReader(directory).log_start_offset()
            out[partition] = Bounds(min(earliest, mark), mark)
        return out

    def directory(self, partition: int) -> str:
        return self._found[partition][0]

    def offset_for_timestamp(self, partition: int, timestamp_ms: int, latest: int) -> int:
        """Base offset of the first batch below ``latest`` whose max timestamp is >= ``timestamp_ms``
        (else ``latest``): the broker's own answer to ``offsets?at=``, from batch headers alone."""
        directory = self.directory(partition)
        reader = SegmentReader(directory)
        for base in reader.segment_bases():
            if base >= latest:
                break
            path = os.path.join(directory, segment_file_name(base, LOG_SUFFIX))
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                size = os.fstat(fd).st_size
                for _, header, _ in BatchScan(fd, 0, size, size_bytes_max=HEADER_SCAN_BYTES_MAX, verify=False):
                    if header.base_offset >= latest:
                        return latest
                    if header.max_timestamp >= timestamp_ms:
                        return header.base_offset
            except StorageError as exc:
                raise ReadError(f"{path}: {exc}") from exc
            finally:
                os.close(fd)
        return latest


class HttpSource:
    """Partitions as a node describes them (any node answers for the whole cluster)."""

    def __init__(self, location: Location, topic: str) -> None:
        self.topic = topic
        self.location = location
        self.compacted = False

    def _client(self) -> HttpClient:
        return client_for(self.location)

    def bounds(self) -> dict[int, Bounds]:
        with self._client() as client:
            try:
                described = client.json("GET", f"/v1/topics/{self.topic}")
            except HttpError as exc:
                if exc.status == 404:
                    raise TopicNotFoundError(f"topic {self.topic!r} does not exist on {self.location.url}") from exc
                raise
        self.compacted = "compact" in str(described.get("config", {}).get("cleanup_policy", "delete"))
        return {int(p["partition"]): Bounds(int(p["earliest_offset"]), int(p["latest_offset"]))
                for p in described["partitions"]}

    def directory(self, partition: int) -> str:
        return ""

    def offset_for_timestamp(self, partition: int, timestamp_ms: int, latest: int) -> int:
        with self._client() as client:
            answer = client.json("GET", f"/v1/topics/{self.topic}/partitions/{partition}/offsets",
                                 params={"at": str(timestamp_ms)})
        offset = answer.get("offset")
        return latest if offset is None else min(int(offset), latest)
