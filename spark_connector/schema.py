"""The row schema of the ``logbroker`` source (DESIGN §7) and its Arrow form (pure).

Spark checks that every ``pyarrow.RecordBatch`` a reader yields has exactly the Arrow schema it
derives from the declared schema (timestamps in microseconds, UTC), so batches are built against
``arrow_schema()``, which asks pyspark for that derivation rather than restating it.
"""

from __future__ import annotations

import functools
from typing import Final

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SCHEMA_DDL: Final = ("key binary, value binary, topic string, partition int, offset long, "
                     "timestamp timestamp, headers map<string,binary>")
COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


@functools.cache
def spark_schema() -> StructType:
    """The schema as a ``StructType`` (built directly: parsing DDL needs a running session)."""
    return StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
        StructField("partition", IntegerType()), StructField("offset", LongType()),
        StructField("timestamp", TimestampType()), StructField("headers", MapType(StringType(), BinaryType())),
    ])


@functools.cache
def arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    schema: pa.Schema = to_arrow_schema(spark_schema(), timezone="UTC")
    assert tuple(schema.names) == COLUMNS
    return schema
