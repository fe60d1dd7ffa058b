"""The Spark read paths over a compacted topic of a real node (decision 0324): a read through the
node learns the topic is compacted and reads every kept record across the gaps compaction left, with
no data loss reported; read straight from the files, the gaps are data loss unless the task says
the topic is compacted (or failOnDataLoss=false). First the tasks alone, then with a real
SparkSession: batch reads (Python over url and path, the JVM reader) and a streaming query whose
micro-batches end inside gaps, restarted from its checkpoint after more writes and another pass."""

from __future__ import annotations

import json
import os
import time
import urllib.error
from typing import Any

import pytest

from spark_connector.errors import DataLossError
from spark_connector.options import Location, parse_read_options
from spark_connector.reader import BatchReader, StreamReader, TaskPartition
from spark_connector.sources import DirectSource, HttpSource
from spark_connector.tasks import ReadTask, read_task
from tests.spark_connector.conftest import (
    create_topic,
    http_json,
    produce,
    require_segments_jar,
    wait_for_checkpoint,
)
from tests.support.nodes import NodeProcess

DEADLINE_S = 30.0
STABLE_S = 2.5  # unchanged over two of the node's maintenance passes (1 s apart)
WRITES = 60


def _offsets(task: ReadTask) -> list[int]:
    return [o for batch in read_task(task) for o in batch.column("offset").to_pylist()]


def _compacted_topic(node: NodeProcess, topic: str) -> list[int]:
    """A compacted topic with one stable key and five rewritten ones; the offsets kept once the
    node's maintenance compacted it and no pass changes them any more (a first pass may clean only
    part of the log: a read compared with it must not race the next)."""
    create_topic(node, topic, 1, {"cleanup_policy": "compact", "segment_bytes": 1024,
                                  "min_cleanable_dirty_ratio": 0.01})
    for i in range(WRITES):
        produce(node, topic, [{"key": "stable" if i == 0 else f"k{i % 5}", "value": f"{i:03d}" + "x" * 60,
                               "partition": 0}])
    deadline = time.monotonic() + DEADLINE_S
    offsets: list[int] = []
    unchanged_since = time.monotonic()
    while time.monotonic() < deadline:
        seen = _fetched(node, topic)
        if seen != offsets:
            offsets, unchanged_since = seen, time.monotonic()
        elif len(offsets) < WRITES // 2 and time.monotonic() - unchanged_since >= STABLE_S:
            return offsets
        time.sleep(0.3)
    raise AssertionError(f"the node never compacted the topic to a stable state: {offsets}")


def _fetched(node: NodeProcess, topic: str) -> list[int]:
    (part,) = http_json(f"{node.url}/v1/topics/{topic}")["partitions"]
    offset, offsets = part["earliest_offset"], list[int]()
    for _ in range(WRITES + 1):
        reply = http_json(f"{node.url}/v1/topics/{topic}/partitions/0/records?offset={offset}")
        if not reply["records"]:
            break
        offsets.extend(r["offset"] for r in reply["records"])
        offset = reply["next_offset"]
    return offsets


def test_a_read_through_the_node_crosses_the_gaps_without_data_loss(node: NodeProcess) -> None:
    kept = _compacted_topic(node, "compacted-http")
    source = HttpSource(Location(url=node.url), "compacted-http")
    bounds = source.bounds()[0]
    assert source.compacted
    task = ReadTask(Location(url=node.url), "", "compacted-http", 0, 0, bounds.latest, True, source.compacted)
    assert _offsets(task) == kept


def test_a_direct_read_crosses_the_gaps_when_the_task_says_compacted(node: NodeProcess) -> None:
    kept = _compacted_topic(node, "compacted-files")
    wait_for_checkpoint(node, "compacted-files")
    source = DirectSource((node.data_dir,), "compacted-files")
    directory, end = source.directory(0), source.bounds()[0].latest
    location = Location(data_dirs=(os.path.dirname(directory),))
    assert _offsets(ReadTask(location, directory, "compacted-files", 0, 0, end, True, True)) == kept
    with pytest.raises(DataLossError):
        _offsets(ReadTask(location, directory, "compacted-files", 0, 0, end, True, False))


# With a real SparkSession: a topic of two partitions written in two rounds of ROUND offsets each,
# compacted by the node between them. Partition 0 keeps a key written once at offset 0 (its log
# start stays there, with gaps after it); partition 1 rewrites or tombstones every key of the first
# round in the second, so compaction empties its first segments and its log start passes ROUND.
PARTITIONS = 2
ROUND = 40
DIRTY_RATIO = 0.01
MAX_PER_TRIGGER = 10
RANGE_NOT_SATISFIABLE = 416
STREAM_WAIT_S = 180.0
SETTLE_POLL_S = 0.5
Model = dict[tuple[int, str], str | None]
Rows = dict[tuple[int, int], tuple[bytes | None, bytes | None]]


def _record(i: int, partition: int) -> tuple[str, str | None]:
    """The key and value written at offset ``i`` of ``partition`` (None: a tombstone)."""
    if i < ROUND:
        key = "stable" if i == 0 and partition == 0 else "gone" if i in (1, 8) else f"k{i % 5}"
        return key, None if i == 8 else f"{partition}-{i:03d}" + "x" * 60
    if i == ROUND:
        return "k0", None  # k0 is never written again: once the tombstone is removed, it is gone
    return f"k{1 + i % 4}", f"{partition}-{i:03d}" + "x" * 60


def _write_round(node: NodeProcess, topic: str, model: Model, first: int) -> None:
    for i in range(first, first + ROUND):  # one request per offset: one batch per record and partition
        records = [(p, *_record(i, p)) for p in range(PARTITIONS)]
        acks = produce(node, topic, [{"key": k, "value": v, "partition": p} for p, k, v in records])
        assert [a["offset"] for a in acks] == [i] * PARTITIONS
        model.update({(p, k): v for p, k, v in records})


def _held(node: NodeProcess, topic: str) -> Rows | None:
    """Every record the node holds now, read with its JSON fetch from each partition's log start;
    None when the log start moved past the fetch meanwhile (a compaction pass emptied a segment)."""
    held: Rows = {}
    for part in http_json(f"{node.url}/v1/topics/{topic}")["partitions"]:
        partition, offset = part["partition"], part["earliest_offset"]
        for _ in range(2 * ROUND + 1):
            try:
                reply = http_json(f"{node.url}/v1/topics/{topic}/partitions/{partition}/records?offset={offset}")
            except urllib.error.HTTPError as exc:
                if exc.code == RANGE_NOT_SATISFIABLE:
                    return None
                raise
            if not reply["records"]:
                break
            for r in reply["records"]:
                value = None if r["value"] is None else r["value"].encode()
                held[(partition, r["offset"])] = (r["key"].encode(), value)
            offset = reply["next_offset"]
    return held


def _latest(held: Rows) -> Model:
    latest: Model = {}
    for (partition, _), (key, value) in sorted(held.items()):
        assert key is not None
        latest[(partition, key.decode())] = None if value is None else value.decode()
    return latest


def _settled(node: NodeProcess, topic: str, model: Model) -> Rows:
    """Wait (bounded) until the node's maintenance compacted every closed segment: no partition
    dirty, each key's latest value the model's, tombstoned keys removed, and the same records on two
    polls in a row; return those records."""
    live = {k: v for k, v in model.items() if v is not None}
    deadline, previous = time.monotonic() + DEADLINE_S, None
    while True:
        parts = http_json(f"{node.url}/v1/topics/{topic}")["partitions"]
        held = _held(node, topic)
        done = held is not None and _latest(held) == live and all(
            p["dirty_ratio"] < DIRTY_RATIO and p["last_compaction_ms"] > 0 for p in parts)
        if done and held is not None and held == previous:
            written = PARTITIONS * (max(o for _, o in held) + 1)
            assert len(held) < written // 2, "compaction left no gaps to read across"
            wait_for_checkpoint(node, topic)
            return held
        previous = held if done else None
        assert time.monotonic() < deadline, f"the node did not finish compacting {topic}: {held}"
        time.sleep(SETTLE_POLL_S)


def _rows(df: Any) -> Rows:
    """A DataFrame's (partition, offset) -> (key, value), each record once (a duplicate fails)."""
    rows: Rows = {}
    for row in df.select("partition", "offset", "key", "value").collect():
        assert (row.partition, row.offset) not in rows, f"record {row.partition}/{row.offset} read twice"
        rows[(row.partition, row.offset)] = (row.key, row.value)
    return rows


def _read(spark: Any, fmt: str, topic: str, where: tuple[str, str], **options: str) -> Any:
    return spark.read.format(fmt).option("topic", topic).option(*where).options(**options).load()


@pytest.fixture(scope="module")
def state(node: NodeProcess) -> tuple[str, Rows]:
    """A topic compacted after both rounds, and the records its node holds then."""
    topic, model = "state-batch", Model()
    create_topic(node, topic, PARTITIONS, {"cleanup_policy": "compact", "segment_bytes": 1024,
                                          "min_cleanable_dirty_ratio": DIRTY_RATIO, "delete_retention_ms": 0})
    _write_round(node, topic, model, 0)
    _write_round(node, topic, model, ROUND)
    held = _settled(node, topic, model)
    assert min(o for p, o in held if p == 1) > ROUND, "partition 1's first round was not compacted away"
    return topic, held


def test_the_readers_plan_tasks_that_know_the_topic_is_compacted(node: NodeProcess, state: tuple[str, Rows]) -> None:
    """Planning alone: a batch start below the log start compaction moved is not loss, and a
    streaming micro-batch's tasks (planned from checkpointed offsets only) know the policy too."""
    topic, held = state
    start = http_json(f"{node.url}/v1/topics/{topic}")["partitions"][1]["earliest_offset"]
    assert 5 < start <= min(o for p, o in held if p == 1)
    starting = json.dumps({topic: {"0": 3, "1": 5}})
    batch = BatchReader(parse_read_options({"topic": topic, "url": node.url, "startingOffsets": starting}, "batch"))
    tasks = [p.task for p in batch.partitions() if isinstance(p, TaskPartition)]
    assert [(t.partition, t.start, t.compacted) for t in tasks] == [(0, 3, True), (1, start, True)]
    stream = StreamReader(parse_read_options({"topic": topic, "url": node.url}, "stream"))
    planned = stream.partitions({topic: {"0": 0, "1": 0}}, {topic: {"0": ROUND, "1": ROUND}})
    tasks = [p.task for p in planned if isinstance(p, TaskPartition)]
    assert [(t.partition, t.start, t.end, t.compacted) for t in tasks] == [(0, 0, ROUND, True), (1, 0, ROUND, True)]


def test_spark_batch_reads_of_a_compacted_topic_return_exactly_the_kept_records(spark: Any, node: NodeProcess,
                                                                               state: tuple[str, Rows]) -> None:
    topic, held = state
    url, path = ("url", node.url), ("path", node.data_dir)
    assert _rows(_read(spark, "logbroker", topic, url)) == held
    # Task ranges that start, end or lie wholly inside gaps, and starts below partition 1's log start.
    assert _rows(_read(spark, "logbroker", topic, url, minPartitions="9")) == held
    starting = json.dumps({topic: {"0": 3, "1": 5}})
    assert _rows(_read(spark, "logbroker", topic, url, startingOffsets=starting)) == \
        {(p, o): r for (p, o), r in held.items() if o >= (3 if p == 0 else 5)}
    # Straight from the files the topic's policy is unknown (decision 0324): gaps are data loss
    # unless failOnDataLoss=false, which then reads the same records.
    assert _rows(_read(spark, "logbroker", topic, path, failOnDataLoss="false", minPartitions="9")) == held
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        _read(spark, "logbroker", topic, path).collect()


def test_the_jvm_reader_reads_a_compacted_topic_as_the_python_readers_do(spark: Any, node: NodeProcess,
                                                                        state: tuple[str, Rows]) -> None:
    require_segments_jar()
    topic, held = state
    path = ("path", node.data_dir)
    assert _rows(_read(spark, "logbroker-segments", topic, path, failOnDataLoss="false")) == held
    assert _rows(_read(spark, "logbroker-segments", topic, path, failOnDataLoss="false", minPartitions="9")) == held
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        _read(spark, "logbroker-segments", topic, path).collect()


@pytest.mark.parametrize("mode", ["url", "path"])
def test_a_streaming_read_of_a_compacted_topic_restarts_after_another_pass_without_duplicates(
        spark: Any, node: NodeProcess, tmp_path: Any, mode: str) -> None:
    topic, model = f"state-stream-{mode}", Model()
    create_topic(node, topic, PARTITIONS, {"cleanup_policy": "compact", "segment_bytes": 1024,
                                          "min_cleanable_dirty_ratio": DIRTY_RATIO, "delete_retention_ms": 0})
    _write_round(node, topic, model, 0)
    first = _settled(node, topic, model)
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": str(MAX_PER_TRIGGER)}
    if mode == "path":
        options["failOnDataLoss"] = "false"  # decision 0324: the files do not say the topic is compacted
    source = (spark.readStream.format("logbroker").option("topic", topic)
              .option(mode, node.url if mode == "url" else node.data_dir).options(**options).load()
              .select("partition", "offset", "key", "value"))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> list[tuple[int, dict[int, int], dict[int, int]]]:
        """One availableNow run: each micro-batch's (rows read, start offsets, end offsets)."""
        query = (source.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(STREAM_WAIT_S)
        return [(p["numInputRows"], _stream_offsets(topic, p["sources"][0]["startOffset"]),
                 _stream_offsets(topic, p["sources"][0]["endOffset"])) for p in query.recentProgress]

    def written() -> Rows:
        return _rows(spark.read.parquet(out))

    batches = run()
    _check_micro_batches(batches, first)
    assert written() == first
    _write_round(node, topic, model, ROUND)
    second = _settled(node, topic, model)
    earliest = {p["partition"]: p["earliest_offset"] for p in http_json(f"{node.url}/v1/topics/{topic}")["partitions"]}
    assert earliest[1] > ROUND, "the offset the query stopped at was not compacted away"
    batches = run()
    assert batches[0][1] == dict.fromkeys(range(PARTITIONS), ROUND), "the restart did not resume at the checkpoint"
    _check_micro_batches(batches, second)
    assert written() == first | {k: r for k, r in second.items() if k[1] >= ROUND}


def _stream_offsets(topic: str, text: str | None) -> dict[int, int]:
    """A micro-batch's offsets from its progress report (none before the first batch)."""
    document = json.loads(text) if text else None
    return {} if document is None else {int(p): o for p, o in document[topic].items()}


def _check_micro_batches(batches: list[tuple[int, dict[int, int], dict[int, int]]], held: Rows) -> None:
    """Each micro-batch of at most MAX_PER_TRIGGER offsets read exactly the held records of its
    range, and some batch boundary fell inside a gap (an offset the node no longer holds)."""
    assert len(batches) > 1
    inside_gap = False
    for rows, start, end in batches:
        assert sum(end[p] - start.get(p, end[p]) for p in end) <= MAX_PER_TRIGGER or not start
        assert rows == sum(1 for p, o in held if start.get(p, 0) <= o < end[p]), (rows, start, end)
        inside_gap |= any((p, o) not in held for p, o in end.items() if o < max(q for _, q in held))
    assert inside_gap, f"no micro-batch ended inside a gap: {batches}"
