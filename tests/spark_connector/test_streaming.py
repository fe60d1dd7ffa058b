"""Streaming reads with a real SparkSession and a real node: availableNow with a rate limit, a
processing-time trigger picking up new records, restarts from the checkpoint (no gap, no duplicate)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.spark_connector.conftest import create_topic, produce, wait_for_checkpoint

PARTITIONS = 3
WAIT_S = 120.0
POLL_S = 0.2


def _produce(node: Any, topic: str, first: int, count: int) -> set[tuple[int, int, bytes]]:
    records = [{"value": f"r{i}", "partition": i % PARTITIONS} for i in range(first, first + count)]
    acks = produce(node, topic, records)
    wait_for_checkpoint(node, topic)
    return {(a["partition"], a["offset"], r["value"].encode()) for r, a in zip(records, acks, strict=True)}


def _stream(spark: Any, node: Any, topic: str, mode: str, **options: str) -> Any:
    reader = spark.readStream.format("logbroker").option("topic", topic)
    reader = reader.option(mode, node.data_dir if mode == "path" else node.url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select("partition", "offset", "value")


def _sink(df: Any, out: str, checkpoint: str) -> Any:
    return df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)


def _written(spark: Any, out: str) -> list[tuple[int, int, bytes]]:
    return [(r.partition, r.offset, bytes(r.value)) for r in spark.read.parquet(out).collect()]


def _exactly_once(rows: list[tuple[int, int, bytes]], want: set[tuple[int, int, bytes]]) -> None:
    assert len(rows) == len(set(rows)), "a record was delivered twice"
    assert set(rows) == want


@pytest.mark.parametrize("mode", ["path", "url"])
def test_available_now_then_processing_time_then_restart_without_gap_or_duplicate(spark, node, tmp_path, mode):
    topic = f"events-{mode}"
    create_topic(node, topic, PARTITIONS)
    want = _produce(node, topic, 0, 60)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    source = _stream(spark, node, topic, mode, startingOffsets="earliest", maxOffsetsPerTrigger="25")

    query = _sink(source, out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(WAIT_S)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [25, 25, 10]
    _exactly_once(_written(spark, out), want)

    query = _sink(source, out, checkpoint).trigger(processingTime="500 milliseconds").start()
    try:
        want |= _produce(node, topic, 60, 30)
        _wait_for_rows(spark, query, out, len(want))
    finally:
        query.stop()
    _exactly_once(_written(spark, out), want)

    want |= _produce(node, topic, 90, 20)  # produced while no query runs
    query = _sink(source, out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(WAIT_S)
    _exactly_once(_written(spark, out), want)


def _wait_for_rows(spark: Any, query: Any, out: str, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        if query.lastProgress and sum(p["numInputRows"] for p in query.recentProgress) and \
                len(_written(spark, out)) >= count:
            return
        time.sleep(POLL_S)
    raise AssertionError(f"the streaming query did not write {count} rows within {WAIT_S} s")


def test_streaming_starts_at_latest_by_default_and_rejects_batch_only_options(spark, node, tmp_path):
    topic = "late"
    create_topic(node, topic, PARTITIONS)
    _produce(node, topic, 0, 9)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = _sink(_stream(spark, node, topic, "url"), out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(WAIT_S)
    want = _produce(node, topic, 9, 6)
    query = _sink(_stream(spark, node, topic, "url"), out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(WAIT_S)
    _exactly_once(_written(spark, out), want)
    with pytest.raises(Exception, match="endingOffsets is for batch reads only"):
        _stream(spark, node, topic, "url", endingOffsets="latest").writeStream.format("memory") \
            .queryName("never").start().awaitTermination(WAIT_S)


def test_example_pipeline_counts_every_event_into_the_topic_and_parquet(spark, node, tmp_path):
    from pyspark.sql import functions as F

    from spark_connector.examples import events_per_minute as example

    args = example.build_parser().parse_args([
        "--url", node.url, "--once", "--max-per-trigger", "700", "--parquet", str(tmp_path / "pq"),
        "--checkpoint", str(tmp_path / "checkpoint")])
    with example.client_for(example.location(args)) as client:
        example.ensure_topic(client, args.events_topic, 3)
        example.ensure_topic(client, args.counts_topic, 3)
        example.seed(client, args.events_topic, 2000, 3)
    wait_for_checkpoint(node, args.events_topic)
    query = example.build_query(spark, args).start()
    assert query.awaitTermination(WAIT_S)
    counts = spark.read.parquet(str(tmp_path / "pq"))
    final = counts.groupBy("key", "window_start").agg(F.max("events").alias("events"))
    assert final.agg(F.sum("events")).collect()[0][0] == 2000
    published = spark.read.format("logbroker").option("topic", args.counts_topic).option("url", node.url).load()
    assert published.count() == counts.count() > 0


def test_commit_to_group_reports_each_finished_micro_batch_to_a_consumer_group(spark, node, tmp_path):
    """``commitToGroup``: the group's committed offsets follow the query (lag tools and the console
    see its lag); Spark's checkpoint still decides where the query resumes."""
    from tests.spark_connector.conftest import http_json

    topic = "events-commit"
    create_topic(node, topic, PARTITIONS)
    _produce(node, topic, 0, 30)
    source = _stream(spark, node, topic, "url", startingOffsets="earliest", maxOffsetsPerTrigger="20",
                     commitToGroup="spark-report")
    def committed() -> list[tuple[int, int, int]]:
        described = http_json(f"{node.url}/v1/groups/spark-report")
        assert described["state"] == "empty"
        return sorted((o["partition"], o["committed_offset"], o["lag"]) for o in described["offsets"]
                      if o["topic"] == topic)

    runs = []
    for first in (30, 60):  # Spark commits a batch's source offsets once the next batch starts
        query = _sink(source, str(tmp_path / "out"), str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
        assert query.awaitTermination(WAIT_S)
        runs.append(committed())
        _produce(node, topic, first, 30)
    assert sum(o for _, o, _ in runs[0]) == 20, "the first of the run's two batches (20 and 10 records)"
    assert sum(lag for _, _, lag in runs[0]) == 10, "lag: the batch not committed yet"
    assert sum(o for _, o, _ in runs[1]) == 50, "the second run's batches (20, 20, 20): all but its last"
    assert sum(lag for _, _, lag in runs[1]) == 10, "lag against the 60 records stored then"
