"""The ``logbroker`` Python data source: the object Spark instantiates with the user's options.

Options are validated when Spark asks for a reader or writer (on the driver), so a bad option
fails the query before any task runs; ``spark_connector.options`` says what each one means.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from spark_connector.errors import OptionError
from spark_connector.options import parse_read_options, parse_write_options
from spark_connector.reader import BatchReader, StreamReader
from spark_connector.schema import SCHEMA_DDL, spark_schema
from spark_connector.writer import (
    BatchWriter,
    StreamWriter,
    batch_scope,
    check_input_schema,
    topic_placement,
    writer_tag,
)

NAME = "logbroker"


class LogBrokerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    def _check_read_schema(self, schema: StructType) -> None:
        if schema.simpleString() != spark_schema().simpleString():
            raise OptionError(f"the logbroker source has a fixed schema ({SCHEMA_DDL}); do not set another one "
                              f"(got {schema.simpleString()})")

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_read_schema(schema)
        return BatchReader(parse_read_options(self.options, "batch"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_read_schema(schema)
        return StreamReader(parse_read_options(self.options, "stream"))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_write_options(self.options)
        check_input_schema(schema)
        partitions, key_hash = topic_placement(options)
        return BatchWriter(options, partitions, writer_tag(options), batch_scope(), key_hash)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        options = parse_write_options(self.options)
        check_input_schema(schema)
        partitions, key_hash = topic_placement(options)
        return StreamWriter(options, partitions, writer_tag(options), key_hash)
