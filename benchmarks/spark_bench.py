"""Spark batch read throughput: segment files read directly, by the JVM reader
(``logbroker-segments``) and by the Python ``logbroker`` source, against the Python source reading
through the node's HTTP API (raw-batch fetch), side by side in one run.

A node (embedded coordinator) gets a 4-partition topic of 100-byte records (10 million in the full
run), produced as prebuilt batches. A ``local[2]`` SparkSession (driver, Python workers and the node
share the machine's 2 cores) then runs, alternately for each repetition, the same query over
``path=`` (direct) and ``url=`` (HTTP): ``count(offset)`` and ``sum(length(value))`` over every
row, checked against what was produced. For scale, the same query over a source that only repeats
one prebuilt Arrow batch of the same schema (``spark_only``) shows what Spark itself costs per row:
no read path can make a query faster than that. The connector's read path is also timed without
Spark (``tasks_*``: the same read tasks run one after another in this process, Arrow batches built
and dropped), which is the part of the difference between direct and HTTP the connector decides.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.pipelined import produce_pipelined
from benchmarks.results import DEFAULT_OUT_DIR, summarize, write_result
from logbroker.client import Client
from logbroker.launcher import NodeProcess
from segments.batch import encode_values
from segments.reader import high_watermarks

TOPIC = "spark-bench"
PARTITIONS = 4
RECORD_BYTES = 100
BATCH_RECORDS = 10_000
IN_FLIGHT = 4
CHECKPOINT_WAIT_S = 60.0
WARM_UPS = 2
POLL_S = 0.1


@dataclasses.dataclass(frozen=True)
class Plan:
    reps: int
    records: int


QUICK = Plan(reps=3, records=1_000_000)
FULL = Plan(reps=3, records=10_000_000)


async def _produce(url: str, total: int) -> float:
    batch = encode_values([os.urandom(RECORD_BYTES)] * BATCH_RECORDS)
    async with Client(url) as client:
        await client.create_topic(TOPIC, partitions=PARTITIONS, config={"flush": "never"})
        return await produce_pipelined(client, TOPIC, total // BATCH_RECORDS, lambda _n: batch,
                                       partitions=PARTITIONS, in_flight=IN_FLIGHT)


def _wait_for_checkpoint(data_dir: str, total: int) -> None:
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    while time.monotonic() < deadline:
        marks = high_watermarks(data_dir)
        if sum(marks.get((TOPIC, p), 0) for p in range(PARTITIONS)) >= total:
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"the node's high watermark checkpoint did not reach {total} records")


def _timed_query(df: Any, total: int) -> float:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    row = df.agg(F.count("offset").alias("n"), F.sum(F.length("value")).alias("size")).collect()[0]
    elapsed = time.perf_counter() - started
    if row.n != total or row.size != total * RECORD_BYTES:
        raise RuntimeError(f"read {row.n} records of {row.size} bytes, expected {total} of {total * RECORD_BYTES}")
    return elapsed


def _spark_only_source(total: int) -> type:
    """A data source that repeats one prebuilt Arrow batch: what Spark alone costs per row."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_connector.arrow import ArrowBuilder
    from spark_connector.schema import SCHEMA_DDL

    per_partition = total // PARTITIONS

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            builder = ArrowBuilder(TOPIC, partition.value, 0, BATCH_RECORDS, rows_per_batch=BATCH_RECORDS)
            batch = next(iter(builder.add_batch(encode_values([b"v" * RECORD_BYTES] * BATCH_RECORDS))))
            for _ in range(per_partition // BATCH_RECORDS):
                yield batch

    class SparkOnly(DataSource):
        @classmethod
        def name(cls) -> str:
            return "logbroker-bench-spark-only"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    return SparkOnly


def _read_tasks(node: NodeProcess, direct: bool) -> tuple[float, int]:
    """Seconds to run every partition's read task in this process, and the records read."""
    from spark_connector.options import Location
    from spark_connector.sources import DirectSource
    from spark_connector.tasks import ReadTask, read_task

    source = DirectSource((node.data_dir,), TOPIC)
    location = Location(data_dirs=(node.data_dir,)) if direct else Location(url=node.url)
    started = time.perf_counter()
    records = 0
    for partition, bounds in source.bounds().items():
        task = ReadTask(location, source.directory(partition), TOPIC, partition, 0, bounds.latest, True)
        records += sum(batch.num_rows for batch in read_task(task))
    return time.perf_counter() - started, records


def _measure_tasks(node: NodeProcess, plan: Plan) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"tasks_direct": [], "tasks_http": []}
    for rep in range(plan.reps):
        for name, direct in (("tasks_direct", True), ("tasks_http", False)):
            seconds, records = _read_tasks(node, direct)
            if records != plan.records:
                raise RuntimeError(f"{name} read {records} records, expected {plan.records}")
            samples[name].append(records / seconds)
            print(f"  rep {rep + 1} {name} (no Spark): {records / seconds:,.0f} records/s", flush=True)
    return samples


def _measure(node: NodeProcess, plan: Plan) -> dict[str, list[float]]:
    from spark_connector.session import local_session

    spark = local_session("logbroker-spark-bench")
    try:
        spark.dataSource.register(_spark_only_source(plan.records))
        queries = {
            "jvm_direct": spark.read.format("logbroker-segments").option("topic", TOPIC)
            .option("path", node.data_dir).load(),
            "direct": spark.read.format("logbroker").option("topic", TOPIC).option("path", node.data_dir).load(),
            "http": spark.read.format("logbroker").option("topic", TOPIC).option("url", node.url).load(),
            "spark_only": spark.read.format("logbroker-bench-spark-only").load(),
        }
        # Warm the page cache and the JVM's compiled code (the JVM reader runs in it entirely, and its
        # first queries are still being compiled): the same number of warm-up queries for each reader.
        for warm_up in range(WARM_UPS):
            for name, df in queries.items():
                print(f"  warm-up {warm_up + 1} {name}: {_timed_query(df, plan.records):.2f} s", flush=True)
        samples: dict[str, list[float]] = {name: [] for name in queries}
        for rep in range(plan.reps):
            for name, df in queries.items():
                seconds = _timed_query(df, plan.records)
                samples[name].append(plan.records / seconds)
                print(f"  rep {rep + 1} {name}: {seconds:.2f} s, {plan.records / seconds:,.0f} records/s", flush=True)
        return samples
    finally:
        spark.stop()


def run(*, quick: bool, out_dir: str | None = None, work_dir: str | None = None) -> str:
    plan = QUICK if quick else FULL
    started_at = datetime.datetime.now(datetime.UTC)
    base = tempfile.mkdtemp(prefix="logbroker-spark-bench-", dir=work_dir)
    try:
        with NodeProcess(os.path.join(base, "data"), "--maintenance-interval-ms", "200",
                         "--log-level", "warning") as node:
            seconds = asyncio.run(_produce(node.url, plan.records))
            print(f"produced {plan.records:,} records of {RECORD_BYTES} B in {seconds:.1f} s", flush=True)
            _wait_for_checkpoint(node.data_dir, plan.records)
            samples = _measure(node, plan)
            samples.update(_measure_tasks(node, plan))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figures: dict[str, float] = {}
    units: dict[str, str] = {}
    summarize("jvm_direct_records_per_s", samples["jvm_direct"], "records/s", figures, units)
    jvm_ratios = [j / h for j, h in zip(samples["jvm_direct"], samples["http"], strict=True)]
    summarize("jvm_direct_over_http", jvm_ratios, "ratio", figures, units)
    jvm_python = [j / d for j, d in zip(samples["jvm_direct"], samples["direct"], strict=True)]
    summarize("jvm_direct_over_direct", jvm_python, "ratio", figures, units)
    summarize("direct_records_per_s", samples["direct"], "records/s", figures, units)
    summarize("http_records_per_s", samples["http"], "records/s", figures, units)
    summarize("spark_only_records_per_s", samples["spark_only"], "records/s", figures, units)
    ratios = [d / h for d, h in zip(samples["direct"], samples["http"], strict=True)]
    summarize("direct_over_http", ratios, "ratio", figures, units)
    summarize("tasks_direct_records_per_s", samples["tasks_direct"], "records/s", figures, units)
    summarize("tasks_http_records_per_s", samples["tasks_http"], "records/s", figures, units)
    task_ratios = [d / h for d, h in zip(samples["tasks_direct"], samples["tasks_http"], strict=True)]
    summarize("tasks_direct_over_http", task_ratios, "ratio", figures, units)
    path = write_result(out_dir or DEFAULT_OUT_DIR, "spark", system="logbroker", version="0.1.0",
                        started_at=started_at, params={
                            "records": plan.records, "record_bytes": RECORD_BYTES, "partitions": PARTITIONS,
                            "batch_records": BATCH_RECORDS, "reps": plan.reps, "warm_ups": WARM_UPS,
                            "spark_master": "local[2]",
                            "query": "count(offset), sum(length(value))", "quick": quick,
                            "readers": {"jvm_direct": "logbroker-segments, path", "direct": "logbroker, path",
                                        "http": "logbroker, url", "spark_only": "a repeated Arrow batch"}},
                        figures=figures, units=units)
    print(f"jvm direct {figures['jvm_direct_records_per_s']:,.0f} records/s, jvm direct / http "
          f"{figures['jvm_direct_over_http']:.2f} ({figures['jvm_direct_over_http_min']:.2f}-"
          f"{figures['jvm_direct_over_http_max']:.2f}), jvm direct / python direct "
          f"{figures['jvm_direct_over_direct']:.2f}; python "
          f"direct {figures['direct_records_per_s']:,.0f} records/s, http {figures['http_records_per_s']:,.0f} "
          f"records/s, ratio {figures['direct_over_http']:.2f} "
          f"({figures['direct_over_http_min']:.2f}-{figures['direct_over_http_max']:.2f}); "
          f"spark alone {figures['spark_only_records_per_s']:,.0f} records/s; without Spark: direct "
          f"{figures['tasks_direct_records_per_s']:,.0f}, http {figures['tasks_http_records_per_s']:,.0f} records/s, "
          f"ratio {figures['tasks_direct_over_http']:.2f} -> {path}")
    return path
