"""PySpark data source ``logbroker``: batch and streaming reads over segments or HTTP, and a sink.

``register(spark)`` makes ``spark.read.format("logbroker")``, ``spark.readStream.format(...)``,
``df.write.format(...)`` and ``df.writeStream.format(...)`` available in that session.
``session()`` builds a local session set up the way this connector is tested (loopback only).
Batch reads of segment files are also available from the JVM (``format("logbroker-segments")``,
``spark_connector/jvm/``, same rows and options, no Python worker), when its jar is on the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_connector import workers
from spark_connector.datasource import NAME, LogBrokerDataSource
from spark_connector.errors import WorkerEnvironmentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NAME", "LogBrokerDataSource", "WorkerEnvironmentError", "register"]


def register(spark: SparkSession, *, check_workers: bool = True) -> None:
    """Register the ``logbroker`` format in ``spark`` (``spark.dataSource.register``).

    First, unless ``check_workers`` is False, check that Spark's Python workers can import pyarrow
    and this package (``spark_connector.workers``): when they run another interpreter than this one,
    that costs one task; when they cannot, ``WorkerEnvironmentError`` says what to set."""
    if check_workers:
        workers.check_workers(spark)
    spark.dataSource.register(LogBrokerDataSource)
