"""The storage engine: record batches, segment files, mmap indexes, partition logs, recovery.

This package imports nothing else of the project (a test walks the imports to prove it): it is
the bottom layer that the node, replication and the Spark reader all stand on.

Names are loaded on first use (PEP 562), so that importing one module of the package, as the
client does with ``segments.batch``, does not load the partition log and the segment files.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULE_OF = {
    **dict.fromkeys(("BatchHeader", "ProducerRecord", "Record", "decode_records", "encode_batch", "encode_values",
                     "iter_batches", "validate_batch"), "segments.batch"),
    "Codec": "segments.compression",
    "LogConfig": "segments.config",
    **dict.fromkeys(("BatchTooLargeError", "CorruptBatchError", "InvalidArgumentError", "InvalidBatchError",
                     "OffsetOutOfRangeError", "StorageError"), "segments.errors"),
    **dict.fromkeys(("AppendInfo", "LogRead", "LogSlice", "PartitionLog", "RecoveryReport"), "segments.log"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'segments' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
