"""A Spark streaming query from one topic into another through the logbroker sink, run as its
own process so a test can kill its driver with SIGKILL mid-batch and run it again from the same
checkpoint (``test_exactly_once``).

Usage: python -m tests.spark_connector.exactly_once_driver URL IN_TOPIC OUT_TOPIC CHECKPOINT MODE
[EXACTLY_ONCE]; MODE ``run`` keeps going (until killed), ``drain`` processes what is there and stops.
"""

from __future__ import annotations

import sys

from spark_connector.session import local_session

PER_TRIGGER = 400
BATCH_BYTES = 1024  # the smallest the sink takes: many small writes per micro-batch


def main(url: str, source: str, sink: str, checkpoint: str, mode: str, exactly_once: str = "true") -> None:
    spark = local_session("exactly-once-driver")
    stream = (spark.readStream.format("logbroker").option("url", url).option("topic", source)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load()
              .selectExpr("key", "value"))
    writer = (stream.writeStream.format("logbroker").option("url", url).option("topic", sink)
              .option("batchBytes", str(BATCH_BYTES)).option("exactlyOnce", exactly_once)
              .option("checkpointLocation", checkpoint))
    query = writer.trigger(availableNow=True).start() if mode == "drain" else \
        writer.trigger(processingTime="100 milliseconds").start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
