"""The sink: a DataFrame's ``key``/``value`` (and optional ``partition``, ``headers``, ``timestamp``)
columns produced to a topic through a node's HTTP API as prebuilt binary batches.

Each task groups its rows by partition (the ``partition`` column; else xxh3 of the key, as the
broker does; else one partition per batch, moving on after each batch, starting from the task's
own), builds batches of at most ``batchBytes`` with ``segments.batch.encode_batch`` and sends each
with ``Content-Type: application/vnd.logbroker.batch``.

Exactly once (``exactlyOnce``, the default): every batch carries an idempotent identity derived
from the query, the micro-batch and the task (``write_identity``), so a retried request, a re-run
task, or a micro-batch run again after the driver restarts from its checkpoint stores nothing
twice, as long as the query is deterministic and the re-run comes within the output topic's
``dedup_window_ms``. With ``exactlyOnce=false`` delivery is at least once (decision 0299).
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from segments.batch import BATCH_RECORDS_MAX, ProducerRecord, encode_batch
from segments.partitioning import DEFAULT_KEY_HASH, KEY_HASH_KEY, key_partition
from spark_connector.errors import OptionError, TopicNotFoundError, WriteError
from spark_connector.http import HttpClient, HttpError, client_for
from spark_connector.options import WriteOptions
from spark_connector.write_identity import EPOCHS, SERIAL_BITS, producer_epoch, producer_id, streaming_scope

RECORD_OVERHEAD_BYTES: Final = 16
SEQUENCE_WRAP: Final = 1 << 31  # a base sequence is a non-negative i32
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"  # what Spark's micro-batch execution sets for its tasks
BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
RECORDS_PER_BATCH_MAX: Final = BATCH_RECORDS_MAX  # what the broker takes in one batch
COLUMNS: Final = ("key", "value", "partition", "headers", "timestamp")


@dataclasses.dataclass(frozen=True, slots=True)
class Written(WriterCommitMessage):
    records: int
    batches: int


def check_input_schema(schema: StructType) -> None:
    """Raise ``OptionError`` unless the DataFrame's columns are ones the sink can write."""
    names = schema.fieldNames()
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise OptionError(f"the logbroker sink writes the columns {', '.join(COLUMNS)}; drop or rename {unknown}")
    if "value" not in names:
        raise OptionError("the logbroker sink needs a value column (binary or string)")
    types = {f.name: f.dataType for f in schema.fields}
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], BinaryType | StringType):
            raise OptionError(f"column {name} must be binary or string, not {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType | LongType | ShortType):
        raise OptionError(f"column partition must be an integer, not {types['partition'].simpleString()}")
    if "timestamp" in types and not isinstance(types["timestamp"], TimestampType | LongType):
        raise OptionError("column timestamp must be a timestamp or a long (milliseconds)")
    if "headers" in types and not _headers_type_ok(types["headers"]):
        raise OptionError("column headers must be map<string,binary|string> or array<struct<key:string,"
                          f"value:binary|string>>, not {types['headers'].simpleString()}")


def _headers_type_ok(kind: DataType) -> bool:
    if isinstance(kind, MapType):
        return isinstance(kind.keyType, StringType) and isinstance(kind.valueType, BinaryType | StringType)
    if isinstance(kind, ArrayType) and isinstance(kind.elementType, StructType):
        fields = {f.name: f.dataType for f in kind.elementType.fields}
        return set(fields) == {"key", "value"} and isinstance(fields["key"], StringType) \
            and isinstance(fields["value"], BinaryType | StringType)
    return False


def topic_placement(options: WriteOptions) -> tuple[int, str]:
    """The topic's partition count and ``key_hash``: where the sink puts a keyed record, as the
    broker would (``segments.partitioning``)."""
    location = options.location
    with client_for(location) as client:
        try:
            described = client.json("GET", f"/v1/topics/{options.topic}", params={"offsets": "false"})
        except HttpError as exc:
            if exc.status == 404:
                raise TopicNotFoundError(f"topic {options.topic!r} does not exist on {location.url}") from exc
            raise
    key_hash = described.get("config", {}).get(KEY_HASH_KEY, DEFAULT_KEY_HASH)
    return int(described["partition_count"]), str(key_hash)


def writer_tag(options: WriteOptions) -> int | None:
    """The caller's writer tag (on the driver): the broker issues the caller a producer id, whose
    high bits are the tag every identity of theirs must carry. None without exactly once."""
    if not options.exactly_once:
        return None
    with client_for(options.location) as client:
        issued = client.json("POST", "/v1/producers")
    return int(issued["producer_id"]) >> SERIAL_BITS


def batch_scope() -> str:
    """A batch write's scope (picked once on the driver, so a retried task repeats its identities)."""
    return uuid.uuid4().hex


@dataclasses.dataclass(frozen=True, slots=True)
class TaskIdentity:
    producer_id: int
    producer_epoch: int
    task: int


def task_identity(tag: int | None, scope: str | None, epoch: int | None) -> TaskIdentity | None:
    """This task's identity (on the executor), from the write's tag, scope and epoch (a batch
    write's, fixed on the driver) or the query id and micro-batch id Spark gives a streaming
    task; None without exactly once."""
    context = TaskContext.get()
    if tag is None or context is None:
        return None
    task = context.partitionId()
    if scope is None:  # a streaming write: the query id survives restarts from the checkpoint
        scope = context.getLocalProperty(QUERY_ID_PROPERTY)
        raw_batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        if scope is None or raw_batch is None or not raw_batch.isdigit():
            raise WriteError("exactly-once writing needs the streaming query's id and batch id, which Spark did "
                             "not pass to this task; write with exactlyOnce=false")
        scope, epoch = streaming_scope(scope, int(raw_batch)), producer_epoch(int(raw_batch))
    try:
        return TaskIdentity(producer_id(tag, scope, task), epoch or 0, task)
    except ValueError as exc:
        raise WriteError(str(exc)) from exc


class _ProduceMixin:
    options: WriteOptions
    partitions: int
    tag: int | None
    scope: str | None = None
    epoch: int | None = None
    key_hash: str = DEFAULT_KEY_HASH

    def _produce(self, batches: Iterator[pa.RecordBatch]) -> Written:
        identity = task_identity(self.tag, self.scope, self.epoch)
        sender = _Sender(client_for(self.options.location), self.options, self.partitions, identity, self.key_hash)
        try:
            for batch in batches:
                sender.add(batch)
            sender.flush_all()
        finally:
            sender.client.close()
        return Written(sender.records, sender.batches)


class BatchWriter(_ProduceMixin, DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, partitions: int, tag: int | None = None, scope: str | None = None,
                 key_hash: str = DEFAULT_KEY_HASH) -> None:
        self.options, self.partitions, self.tag, self.key_hash = options, partitions, tag, key_hash
        self.scope = scope or batch_scope()
        self.epoch = random.randrange(EPOCHS)  # with the scope: fixed for the job, so retried tasks repeat it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return self._produce(iterator)


class StreamWriter(_ProduceMixin, DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, partitions: int, tag: int | None = None,
                 key_hash: str = DEFAULT_KEY_HASH) -> None:
        self.options, self.partitions, self.tag, self.key_hash = options, partitions, tag, key_hash

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return self._produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are appended as tasks run; nothing is left to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Appended records stay (the log is append-only); the batch's re-run writes the same
        identities, so what was stored is not stored again (exactly once)."""


class _Sender:
    """Per-partition buffers of records, each sent as one batch when it reaches ``batch_bytes``."""

    def __init__(self, client: HttpClient, options: WriteOptions, partitions: int,
                 identity: TaskIdentity | None = None, key_hash: str = DEFAULT_KEY_HASH) -> None:
        self.client, self.options, self.partitions, self.identity = client, options, partitions, identity
        self.key_hash = key_hash
        self._pending: dict[int, list[ProducerRecord]] = {}
        self._sizes: dict[int, int] = {}
        self._sequences: dict[int, int] = {}  # records sent per partition (each batch's base sequence)
        # Unkeyed rows stick to one partition until its batch is sent, then move on (as Kafka's
        # sticky partitioner does); each task starts at its own (a re-run places rows as before).
        self._sticky = (identity.task if identity is not None else random.randrange(partitions)) % partitions
        self.records = 0
        self.batches = 0

    def add(self, batch: pa.RecordBatch) -> None:
        columns = {name: batch.column(name) for name in batch.schema.names}
        keys = _bytes_list(columns.get("key"), batch.num_rows)
        values = _bytes_list(columns.get("value"), batch.num_rows)
        parts = columns["partition"].to_pylist() if "partition" in columns else [None] * batch.num_rows
        headers = _headers_list(columns.get("headers"), batch.num_rows)
        stamps = _millis(columns.get("timestamp"), batch.num_rows)
        for key, value, part, pairs, stamp in zip(keys, values, parts, headers, stamps, strict=True):
            sticky = part is None and key is None
            if part is None:
                part = key_partition(key, self.partitions, self.key_hash) if key is not None else self._sticky
            elif not 0 <= part < self.partitions:
                raise WriteError(f"partition {part} is not a partition of topic {self.options.topic} "
                                 f"(it has {self.partitions})")
            if self._append(part, ProducerRecord(value, key, pairs, stamp)) and sticky:
                self._sticky = (self._sticky + 1) % self.partitions

    def _append(self, partition: int, record: ProducerRecord) -> bool:
        """Buffer ``record``; True when the partition's earlier records were sent first."""
        size = len(record.value or b"") + len(record.key or b"") + RECORD_OVERHEAD_BYTES \
            + sum(len(n) + len(v) for n, v in record.headers)
        pending = self._pending.setdefault(partition, [])
        sent = bool(pending) and (self._sizes[partition] + size > self.options.batch_bytes
                                  or len(pending) >= RECORDS_PER_BATCH_MAX)
        if sent:
            self._send(partition)
            pending = self._pending.setdefault(partition, [])
        pending.append(record)
        self._sizes[partition] = self._sizes.get(partition, 0) + size
        return sent

    def _send(self, partition: int) -> None:
        records = self._pending.pop(partition, [])
        self._sizes[partition] = 0
        if not records:
            return
        if self.identity is None:
            batch = encode_batch(records)
        else:
            sequence = self._sequences.get(partition, 0)
            self._sequences[partition] = (sequence + len(records)) % SEQUENCE_WRAP
            batch = encode_batch(records, producer_id=self.identity.producer_id,
                                 producer_epoch=self.identity.producer_epoch, base_sequence=sequence)
        try:
            self.client.produce_batch(self.options.topic, partition, batch, self.options.acks)
        except HttpError as exc:
            if exc.problem.get("code") == "idempotency_conflict":
                raise WriteError(f"a batch written again to {self.options.topic}/{partition} holds other records "
                                 "than its first write: the query is not deterministic, which exactly-once "
                                 f"writing needs (or write with exactlyOnce=false): {exc}") from exc
            raise WriteError(f"producing {len(records)} records to {self.options.topic}/{partition}: {exc}") from exc
        self.records += len(records)
        self.batches += 1

    def flush_all(self) -> None:
        for partition in list(self._pending):
            self._send(partition)


def _bytes_list(column: pa.Array | None, rows: int) -> list[bytes | None]:
    if column is None:
        return [None] * rows
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


def _headers_list(column: pa.Array | None, rows: int) -> list[tuple[tuple[str, bytes], ...]]:
    if column is None:
        return [()] * rows
    out: list[tuple[tuple[str, bytes], ...]] = []
    for entry in column.to_pylist():
        if not entry:
            out.append(())
            continue
        pairs = entry if isinstance(entry[0], tuple) else [(e["key"], e["value"]) for e in entry]
        out.append(tuple((name, _as_bytes(name, value)) for name, value in pairs))
    return out


def _as_bytes(name: str, value: Any) -> bytes:
    if value is None:
        raise WriteError(f"header {name!r} has no value (null); header values must be bytes or strings")
    return value.encode() if isinstance(value, str) else bytes(value)


def _millis(column: pa.Array | None, rows: int) -> list[int | None]:
    if column is None:
        return [None] * rows
    if pa.types.is_timestamp(column.type):
        column = pc.divide(column.cast(pa.timestamp("us")).cast(pa.int64()), 1000)
    stamps: list[int | None] = column.to_pylist()
    return stamps
