"""Example pipeline: count events per key per minute from a topic, into another topic and Parquet.

Against ``make run``'s broker (http://127.0.0.1:8080, auth on; ``make spark-example`` runs this)::

    .venv/bin/python -m spark_connector.examples.events_per_minute --seed 5000 --once \
        --username admin --password dev-admin-password

Credentials: ``--token``, or ``--username``/``--password`` (default: ``LOGBROKER_TOKEN``,
``LOGBROKER_USER``/``LOGBROKER_PASSWORD`` as for the CLI); none for a node with auth off.

``--seed N`` first produces N sample events (keys ``user-0`` .. ``user-9``, timestamps spread over
the last five minutes) to ``--events-topic``; the topics are created when missing. The streaming
query reads the events topic (``url=``, or ``--data-dir`` to read the node's segment files
directly), counts events per key per one-minute window and, for every micro-batch, writes the
updated counts to ``--counts-topic`` (key: the event key, value: JSON with the window and count)
and appends them to Parquet under ``--parquet``. Its checkpoint (``--checkpoint``) lets a rerun
continue where the last one stopped. ``--once`` processes what is there and stops
(``Trigger.AvailableNow``); without it the query runs until Ctrl-C, every ``--interval`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from segments.batch import ProducerRecord, encode_batch
from spark_connector.errors import ConnectorError
from spark_connector.http import HttpClient, HttpError, client_for
from spark_connector.options import Location

KEYS = 10
SEED_BATCH = 1000
MINUTE_MS = 60_000


def location(args: argparse.Namespace) -> Location:
    return Location(url=args.url, token=args.token or None, username=args.username or None,
                    password=args.password or None)


def auth_options(args: argparse.Namespace) -> dict[str, str]:
    """The data source's credential options for these arguments."""
    pairs = {"token": args.token, "username": args.username, "password": args.password}
    return {name: value for name, value in pairs.items() if value}


def ensure_topic(client: HttpClient, name: str, partitions: int) -> None:
    try:
        client.json("GET", f"/v1/topics/{name}")
    except HttpError as exc:
        if exc.status != 404:
            raise
        body = json.dumps({"name": name, "partitions": partitions}).encode()
        client.request("POST", "/v1/topics", body=body, headers={"Content-Type": "application/json"})


def seed(client: HttpClient, topic: str, count: int, partitions: int) -> None:
    """Produce ``count`` sample events as prebuilt batches (one partition per batch, round-robin)."""
    now = int(time.time() * 1000)
    rng = random.Random(7)
    for n, first in enumerate(range(0, count, SEED_BATCH)):
        records = [ProducerRecord(json.dumps({"n": i, "amount": rng.randint(1, 100)}).encode(),
                                  f"user-{rng.randrange(KEYS)}".encode(), (("source", b"example"),),
                                  now - rng.randrange(5 * MINUTE_MS))
                   for i in range(first, min(count, first + SEED_BATCH))]
        client.produce_batch(topic, n % partitions, encode_batch(records), "1")
    print(f"seeded {count} events into {topic}")


def build_query(spark: Any, args: argparse.Namespace) -> Any:
    from pyspark.sql import functions as F

    reader = spark.readStream.format("logbroker").option("topic", args.events_topic)
    reader = reader.option("path", args.data_dir) if args.data_dir else reader.options(**auth_options(args)) \
        .option("url", args.url)
    events = reader.option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", args.max_per_trigger).load()
    counts = (events.withWatermark("timestamp", "10 minutes")
              .groupBy(F.window("timestamp", "1 minute"), F.col("key"))
              .agg(F.count("*").alias("events")))

    def write_batch(batch: Any, batch_id: int) -> None:
        rows = batch.select(
            F.col("key"), F.col("window.start").alias("window_start"), F.col("events"), F.lit(batch_id).alias("batch"))
        rows.write.mode("append").parquet(args.parquet)
        out = rows.select(F.col("key"), F.to_json(F.struct("window_start", "events", "batch")).alias("value"))
        out.write.format("logbroker").option("url", args.url).options(**auth_options(args)) \
            .option("topic", args.counts_topic).mode("append").save()
        print(f"batch {batch_id}: {rows.count()} updated (key, minute) counts")

    writer = counts.writeStream.outputMode("update").foreachBatch(write_batch) \
        .option("checkpointLocation", args.checkpoint)
    return writer.trigger(availableNow=True) if args.once else writer.trigger(processingTime=f"{args.interval} seconds")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="a node (default: make run's)")
    parser.add_argument("--token", default=os.environ.get("LOGBROKER_TOKEN", ""), help="a bearer token")
    parser.add_argument("--username", default=os.environ.get("LOGBROKER_USER", ""))
    parser.add_argument("--password", default=os.environ.get("LOGBROKER_PASSWORD", ""))
    parser.add_argument("--data-dir", default="", help="read the events from this data directory instead of url")
    parser.add_argument("--events-topic", default="events")
    parser.add_argument("--counts-topic", default="events-per-minute")
    parser.add_argument("--partitions", type=int, default=3, help="for topics created here")
    parser.add_argument("--seed", type=int, default=0, help="produce this many sample events first")
    parser.add_argument("--parquet", default=".data/examples/events-per-minute")
    parser.add_argument("--checkpoint", default=".data/examples/events-per-minute-checkpoint")
    parser.add_argument("--max-per-trigger", default="100000", help="maxOffsetsPerTrigger")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between micro-batches")
    parser.add_argument("--once", action="store_true", help="process what is there, then stop")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with client_for(location(args)) as client:
            ensure_topic(client, args.events_topic, args.partitions)
            ensure_topic(client, args.counts_topic, args.partitions)
            if args.seed:
                seed(client, args.events_topic, args.seed, args.partitions)
    except (OSError, urllib.error.URLError, ConnectorError) as exc:
        print(f"cannot use the broker at {args.url} ({exc}); start it with `make run` and check the credentials",
              file=sys.stderr)
        return 1
    from spark_connector.session import local_session

    spark = local_session("events-per-minute")
    try:
        query = build_query(spark, args).start()
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        total = spark.read.parquet(args.parquet).count() if args.once else None
        if total is not None:
            print(f"Parquet under {args.parquet} holds {total} count rows; topic {args.counts_topic} has them too")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
