"""A local SparkSession for scripts, tests and benchmarks, bound to loopback.

Spark's Python workers must run this interpreter (the one with pyarrow and this package), so
``PYSPARK_PYTHON`` is set to it; the driver binds to 127.0.0.1 and the web UI stays off. When the
JVM segment reader has been built (``make jvm``), its jar goes on ``spark.jars``, which makes
``format("logbroker-segments")`` available; it must be there when the JVM starts (the first session
of the process).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEGMENTS_JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm", "build", "logbroker-spark-segments.jar")


def local_session(app_name: str, *, cores: int = 2, shuffle_partitions: int = 4,
                  extra: dict[str, str] | None = None) -> SparkSession:
    """A ``local[cores]`` session with the ``logbroker`` format registered (stopped again when its
    Python workers cannot run the connector: ``WorkerEnvironmentError``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_connector import register

    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC"))
    settings = dict(extra or {})
    if os.path.exists(SEGMENTS_JAR):
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars"), SEGMENTS_JAR) if j)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)
    except BaseException:
        spark.stop()
        raise
    return spark
