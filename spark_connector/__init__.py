"""PySpark data source ``logbroker``: batch and streaming reads over segments or HTTP, and a sink.

``register(spark)`` makes ``spark.read.format("logbroker")``, ``spark.readStream.format(...)``,
``df.write.format(...)`` and ``df.writeStream.format(...)`` available in that session.
``session()`` builds a local session set up the way this connector is tested (loopback only).
Batch reads of segment files are also available from the JVM (``format("logbroker-segments")``,
``spark_connector/jvm/``, same rows and options, no Python worker), when its jar is on the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_connector.datasource import NAME, LogBrokerDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NAME", "LogBrokerDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``logbroker`` format in ``spark`` (``spark.dataSource.register``)."""
    spark.dataSource.register(LogBrokerDataSource)
