"""The storage engine: record batches, segment files, mmap indexes, partition logs, recovery.

This package imports nothing else of the project (a test walks the imports to prove it): it is
the bottom layer that the node, replication and the Spark reader all stand on.
"""

from segments.batch import (
    BatchHeader,
    ProducerRecord,
    Record,
    decode_records,
    encode_batch,
    encode_values,
    iter_batches,
    validate_batch,
)
from segments.compression import Codec
from segments.config import LogConfig
from segments.errors import (
    BatchTooLargeError,
    CorruptBatchError,
    InvalidArgumentError,
    InvalidBatchError,
    OffsetOutOfRangeError,
    StorageError,
)
from segments.log import AppendInfo, LogRead, LogSlice, PartitionLog, RecoveryReport

__all__ = [
    "AppendInfo",
    "BatchHeader",
    "BatchTooLargeError",
    "Codec",
    "CorruptBatchError",
    "InvalidArgumentError",
    "InvalidBatchError",
    "LogConfig",
    "LogRead",
    "LogSlice",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ProducerRecord",
    "Record",
    "RecoveryReport",
    "StorageError",
    "decode_records",
    "encode_batch",
    "encode_values",
    "iter_batches",
    "validate_batch",
]
