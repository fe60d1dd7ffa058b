"""Offset planning and the stream reader's offsets (pure logic; a fake source, no Spark, no node)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_connector import reader as reader_module
from spark_connector.errors import DataLossError, OptionError
from spark_connector.offsets import Bounds, OffsetRange, batch_ranges, rate_limit, resolve, split
from spark_connector.options import EARLIEST, LATEST, parse_read_options

BOUNDS = {0: Bounds(0, 10), 1: Bounds(5, 8), 2: Bounds(0, 0)}


def test_resolve_earliest_latest_and_json_with_defaults():
    assert resolve("earliest", BOUNDS, default=EARLIEST, display="s") == {0: 0, 1: 5, 2: 0}
    assert resolve("latest", BOUNDS, default=EARLIEST, display="s") == {0: 10, 1: 8, 2: 0}
    assert resolve({0: 3, 1: LATEST}, BOUNDS, default=EARLIEST, display="s") == {0: 3, 1: 8, 2: 0}
    with pytest.raises(OptionError, match=r"names partition\(s\) \[7\]"):
        resolve({7: 1}, BOUNDS, default=EARLIEST, display="s")


def test_batch_ranges_cap_at_the_high_watermark_and_handle_deleted_records():
    ranges = batch_ranges({0: 2, 1: 5, 2: 0}, {0: 99, 1: 6, 2: 0}, BOUNDS, fail_on_data_loss=True)
    assert ranges == [OffsetRange(0, 2, 10), OffsetRange(1, 5, 6), OffsetRange(2, 0, 0)]
    with pytest.raises(DataLossError, match=r"offsets 1..4 were deleted"):
        batch_ranges({0: 0, 1: 1, 2: 0}, {0: 10, 1: 8, 2: 0}, BOUNDS, fail_on_data_loss=True)
    tolerant = batch_ranges({0: 0, 1: 1, 2: 0}, {0: 10, 1: 8, 2: 0}, BOUNDS, fail_on_data_loss=False)
    assert tolerant[1] == OffsetRange(1, 5, 8)


sizes = st.lists(st.integers(0, 500), min_size=1, max_size=6)


@given(sizes, st.integers(1, 40))
def test_split_covers_each_range_exactly_once(lengths, min_partitions):
    ranges = [OffsetRange(p, 100 * p, 100 * p + n) for p, n in enumerate(lengths)]
    pieces = split(ranges, min_partitions)
    for r in ranges:
        mine = sorted((x.start, x.end) for x in pieces if x.partition == r.partition)
        covered = [o for start, end in mine for o in range(start, end)]
        assert covered == list(range(r.start, r.end))
    if sum(lengths) >= min_partitions:
        assert len(pieces) >= min(min_partitions, sum(lengths))


@given(st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
       st.one_of(st.none(), st.integers(1, 3000)))
def test_rate_limit_takes_at_most_the_limit_and_never_moves_backwards(spans, limit):
    start = {p: min(a, b) for p, (a, b) in spans.items()}
    latest = {p: max(a, b) for p, (a, b) in spans.items()}
    end = rate_limit(start, latest, limit)
    assert all(start[p] <= end[p] <= latest[p] for p in latest)
    taken = sum(end[p] - start[p] for p in latest)
    backlog = sum(latest[p] - start[p] for p in latest)
    assert taken == (backlog if limit is None else min(limit, backlog))


class FakeSource:
    compacted = False

    def __init__(self, latest: dict[int, int]) -> None:
        self.latest = latest

    def bounds(self) -> dict[int, Bounds]:
        return {p: Bounds(0, o) for p, o in self.latest.items()}

    def directory(self, partition: int) -> str:
        return f"/data/t-{partition}"

    def offset_for_timestamp(self, partition: int, timestamp_ms: int, latest: int) -> int:
        return latest


def test_stream_reader_picks_up_new_partitions_and_honours_limits(monkeypatch):
    source = FakeSource({0: 10, 1: 4})
    monkeypatch.setattr(reader_module, "open_source", lambda location, topic: source)
    options = parse_read_options({"topic": "t", "path": "/data", "startingOffsets": "earliest",
                                  "maxOffsetsPerTrigger": "6"}, "stream")
    stream = reader_module.StreamReader(options)
    start = stream.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    assert stream.getDefaultReadLimit() == ReadMaxRows(6)
    end = stream.latestOffset(start, ReadMaxRows(6))
    assert end == {"t": {"0": 4, "1": 2}}  # 6 shared by backlog (10:4), the leftover to the larger remainder
    source.latest = {0: 10, 1: 4, 2: 5}  # a partition was added
    everything = stream.latestOffset(end, ReadAllAvailable())
    assert everything == {"t": {"0": 10, "1": 4, "2": 5}}
    tasks = [p.task for p in stream.partitions(end, everything)]
    assert [(t.partition, t.start, t.end, t.directory) for t in tasks] == [
        (0, 4, 10, "/data/t-0"), (1, 2, 4, "/data/t-1"), (2, 0, 5, "/data/t-2")]
    with pytest.raises(OptionError, match="not for topic 't'"):
        stream.partitions({"other": {"0": 1}}, everything)


def test_available_now_stops_at_the_target_fixed_when_the_query_started(monkeypatch):
    source = FakeSource({0: 10})
    monkeypatch.setattr(reader_module, "open_source", lambda location, topic: source)
    stream = reader_module.StreamReader(parse_read_options({"topic": "t", "url": "http://127.0.0.1:1",
                                                            "startingOffsets": "earliest"}, "stream"))
    start = stream.initialOffset()
    stream.prepareForTriggerAvailableNow()
    source.latest = {0: 50, 1: 7}
    end = stream.latestOffset(start, ReadMaxRows(4))
    assert end == {"t": {"0": 4}}
    end = stream.latestOffset(end, ReadAllAvailable())
    assert end == {"t": {"0": 10}}
    assert stream.latestOffset(end, ReadAllAvailable()) == end
