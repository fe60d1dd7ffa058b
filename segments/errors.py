"""Typed storage errors.

Every class carries a stable ``code`` and a ``retriable`` flag so that the HTTP layer and the
internal RPC layer can map it (one table each) without string matching. Corruption errors carry
the numbers that explain them (position, stored and computed checksum).
"""

from __future__ import annotations

import errno


class StorageError(Exception):
    """Base of every error raised by the storage engine."""

    code = "storage_error"
    retriable = False


class InvalidArgumentError(StorageError):
    """A caller passed a value the storage engine cannot accept (negative size, bad config)."""

    code = "invalid_argument"


class InvalidBatchError(StorageError):
    """A record batch is malformed: wrong length, magic, counts or codec."""

    code = "invalid_batch"


class CorruptBatchError(InvalidBatchError):
    """A record batch fails its checksum (or its length points past the data)."""

    code = "corrupt_batch"

    def __init__(self, message: str, *, position: int = -1, stored: int = 0, computed: int = 0):
        super().__init__(message)
        self.position = position
        self.stored = stored
        self.computed = computed


class BatchTooLargeError(InvalidBatchError):
    """A batch is larger than the log accepts (``max_batch_bytes``)."""

    code = "batch_too_large"

    def __init__(self, size_bytes: int, size_bytes_max: int):
        super().__init__(f"batch of {size_bytes} bytes exceeds the limit of {size_bytes_max} bytes")
        self.size_bytes = size_bytes
        self.size_bytes_max = size_bytes_max


class RecordsTooLargeError(InvalidBatchError):
    """A batch holds more records, or its records section decompresses to more bytes, than one
    batch may: what decoding it costs, which its compressed size does not tell."""

    code = "batch_too_large"

    def __init__(self, message: str, *, limit: int):
        super().__init__(message)
        self.limit = limit


class UndecryptableBatchError(StorageError):
    """A batch encrypted at rest cannot be decrypted here: its key is not in the key ring, or its
    authentication tag fails (the ciphertext or its header was altered, or the key is wrong). Not
    an ``InvalidBatchError``: readers never pass over it as an unreadable batch, since the records
    are intact and come back with the right key; the partition's reads fail until then."""

    code = "undecryptable_batch"

    def __init__(self, message: str, *, offset: int = -1, key_id: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.key_id = key_id
        self.extra: dict[str, object] = {"offset": offset} if key_id is None else {"offset": offset,
                                                                                      "key_id": key_id}


class OffsetOutOfRangeError(StorageError):
    """An offset lies below the log start or past the log end."""

    code = "offset_out_of_range"

    def __init__(self, offset: int, earliest: int, latest: int):
        super().__init__(f"offset {offset} is outside [{earliest}, {latest}]")
        self.offset = offset
        self.earliest = earliest
        self.latest = latest


class StaleLeaderEpochError(StorageError):
    """An append carries a leader epoch older than the newest one the log has seen."""

    code = "stale_leader_epoch"

    def __init__(self, epoch: int, latest_epoch: int):
        super().__init__(f"leader epoch {epoch} is older than the log's latest epoch {latest_epoch}")
        self.epoch = epoch
        self.latest_epoch = latest_epoch


class NonSequentialAppendError(StorageError):
    """A replica append does not start at the log end offset."""

    code = "non_sequential_append"

    def __init__(self, base_offset: int, log_end_offset: int):
        super().__init__(f"batch starts at offset {base_offset}, log ends at {log_end_offset}")
        self.base_offset = base_offset
        self.log_end_offset = log_end_offset


class LogClosedError(StorageError):
    """The log (or segment) was closed or deleted while a caller still used it."""

    code = "log_closed"
    retriable = True


class CorruptCheckpointError(StorageError):
    """A checkpoint file cannot be parsed."""

    code = "corrupt_checkpoint"


class StorageBusyError(StorageError):
    """A bounded queue inside the storage engine is full; try again later."""

    code = "storage_busy"
    retriable = True


class StorageFullError(StorageError):
    """The disk is full (ENOSPC/EDQUOT). The failed write was cut back to the last whole batch,
    so nothing partial stays behind; retry once space returns."""

    code = "storage_full"
    retriable = True


class LogOfflineError(StorageError):
    """The log may no longer be trusted in this process: an fsync failed (its dirty pages may be
    gone from the page cache, so a later fsync could succeed without them), or a failed write
    could not be cut back. Appends, flushes and reads are refused; the data stays on disk for the
    recovery that the next start runs."""

    code = "log_offline"

    def __init__(self, directory: str, reason: str) -> None:
        super().__init__(f"log {directory} is offline: {reason}")
        self.directory = directory
        self.reason = reason


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_no_space(exc: BaseException) -> bool:
    """True for an OSError that says the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


class TooManyOpenFilesError(StorageError):
    """The process is out of file descriptors (EMFILE/ENFILE); nothing was written. Retry once
    idle segments' files are closed or connections end."""

    code = "too_many_open_files"
    retriable = True


FD_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def is_fd_limit(exc: BaseException) -> bool:
    """True for an OSError that says the process (or the system) has no descriptor left."""
    return isinstance(exc, OSError) and exc.errno in FD_LIMIT_ERRNOS


def check_int(name: str, value: object) -> None:
    """Raise ``InvalidArgumentError`` unless ``value`` is an ``int`` (a ``bool`` is not)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer, not {value!r}")
