"""Re-encrypt a stopped node's segments under the ring's current key (``logbroker keys reencrypt``).

Why: a key leaves the ring only once no stored batch needs it. This rewrites every segment that
holds a batch sealed with another key, batch by batch, each resealed with the current key and a
fresh nonce; plain batches and batches under the current key are copied as they are.

Crash safety: a segment is rewritten aside (``<segment>.log.reencrypt.tmp``, which a log's open
deletes), fsynced, renamed over the segment, and the directory fsynced. A resealed batch has the
size of the one it replaces (same plaintext, same 32 bytes of key id, nonce and tag), so every
position is unchanged and the offset and time indexes stay valid. So at any instant each segment
is either the old file or the new one, both whole and readable with the ring: a ``kill -9`` at any
point loses nothing, and running the command again finishes the work.

The node must be stopped: the data directory's lock is held while this runs, so neither a node
nor a second re-encryption can open it meanwhile. Reads are bounded: one batch at a time, at most
``BATCH_BYTES_MAX``. A segment's tail that is not a whole, valid batch (a torn write the node's
recovery will cut) is copied unchanged and ends the walk of that segment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO, Final, NamedTuple

from logbroker.data_dir_lock import DataDirLock
from segments.batch import DEFAULT_RECORDS_BYTES_MAX, HEADER_SIZE, check_header, parse_header, verify_checksum
from segments.checkpoint import TMP_SUFFIX
from segments.encryption import NONCE_BYTES, reseal_batch, sealing_key
from segments.errors import InvalidBatchError
from segments.key_ring import KeyRing
from segments.segment import LOG_SUFFIX

ASIDE_SUFFIX: Final = ".reencrypt" + TMP_SUFFIX
BATCH_BYTES_MAX: Final = DEFAULT_RECORDS_BYTES_MAX
COPY_CHUNK_BYTES: Final = 1 << 20


class Report(NamedTuple):
    segments_seen: int
    segments_rewritten: int
    batches_resealed: int


def segment_paths(data_dir: str) -> Iterator[str]:
    """Every segment file of every partition directory, in a stable order."""
    for entry in sorted(os.listdir(data_dir)):
        directory = os.path.join(data_dir, entry)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            stem = name[:-len(LOG_SUFFIX)]
            if name.endswith(LOG_SUFFIX) and len(stem) == 20 and stem.isdigit():
                yield os.path.join(directory, name)


def reencrypt_data_dir(data_dir: str, ring: KeyRing, random_bytes: Callable[[int], bytes] = os.urandom,
                       fsync: Callable[[int], None] = os.fsync) -> Report:
    """Rewrite the segments of ``data_dir`` that need it (see the module docstring)."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"no data directory {data_dir}")
    seen = rewritten = resealed = 0
    with DataDirLock(data_dir):
        for path in segment_paths(data_dir):
            seen += 1
            count = reencrypt_segment(path, ring, random_bytes, fsync)
            if count:
                rewritten += 1
                resealed += count
    return Report(seen, rewritten, resealed)


def reencrypt_segment(path: str, ring: KeyRing, random_bytes: Callable[[int], bytes] = os.urandom,
                      fsync: Callable[[int], None] = os.fsync) -> int:
    """Reseal the batches of one segment that another key sealed; the count resealed (0: the file
    was left alone)."""
    with open(path, "rb") as source:
        if not any(reseal_needed(batch, ring) for batch in _batches(source)):
            return 0
        source.seek(0)
        aside = path + ASIDE_SUFFIX
        try:
            count = _write_aside(source, aside, ring, random_bytes, fsync)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(aside)
            raise
    os.replace(aside, path)
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return count


def _write_aside(source: BinaryIO, aside: str, ring: KeyRing, random_bytes: Callable[[int], bytes],
                 fsync: Callable[[int], None]) -> int:
    count = 0
    with open(aside, "wb") as out:
        for batch in _batches(source):
            new = reseal_batch(batch, ring, random_bytes(NONCE_BYTES))
            count += new is not None
            out.write(batch if new is None else new)
        while chunk := source.read(COPY_CHUNK_BYTES):  # a torn tail, as it is
            out.write(chunk)
        out.flush()
        fsync(out.fileno())
    return count


def reseal_needed(batch: bytes, ring: KeyRing) -> bool:
    key_id = sealing_key(batch)
    return key_id is not None and key_id != ring.current


def _batches(source: BinaryIO) -> Iterator[bytes]:
    """Whole valid batches from the file's current position; stops before the first that is not
    (the file is then positioned at its start)."""
    while True:
        start = source.tell()
        head = source.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            source.seek(start)
            return
        header = parse_header(head)
        try:
            check_header(header, size_bytes_max=BATCH_BYTES_MAX, position=start)
        except InvalidBatchError:
            source.seek(start)
            return
        batch = head + source.read(header.size_bytes - HEADER_SIZE)
        try:
            if len(batch) < header.size_bytes:
                raise InvalidBatchError("torn")
            verify_checksum(batch, header, position=start)
        except InvalidBatchError:
            source.seek(start)
            return
        yield batch
