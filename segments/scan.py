"""Walk the batches of a segment file, reading whole chunks rather than one call per batch.

``BatchScan`` is the single place that decides where a log's valid data ends. It yields each
batch whose header is sane and (when ``verify``) whose checksum matches, and stops at the first
one that is not. After iteration ``stop`` says why it stopped: the clean end of the data, a torn
tail (a batch that runs past the end, as a crash mid-write leaves), or corruption (with the error).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from typing import Final

from segments.batch import HEADER_SIZE, BatchHeader, check_header, parse_header, verify_checksum
from segments.errors import InvalidBatchError

SCAN_CHUNK_BYTES: Final = 1 << 20


class ScanStop(enum.Enum):
    END = "end"
    TORN = "torn"
    CORRUPT = "corrupt"


class BatchScan:
    """Iterate ``(position, header, batch_bytes)`` from ``start`` up to ``end`` (exclusive).

    ``batch_bytes`` is a memoryview valid until the next iteration; it is None when ``verify`` is
    False (then only headers are read, one ``pread`` each).
    """

    __slots__ = ("_end", "_fd", "_size_bytes_max", "_start", "_verify", "error", "stop", "stopped_at")

    def __init__(self, fd: int, start: int, end: int, *, size_bytes_max: int, verify: bool) -> None:
        assert 0 <= start <= end
        self._fd = fd
        self._start = start
        self._end = end
        self._size_bytes_max = size_bytes_max
        self._verify = verify
        self.stop = ScanStop.END
        self.stopped_at = start
        self.error: InvalidBatchError | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        return self._scan_verified() if self._verify else self._scan_headers()

    def _scan_headers(self) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        position = self._start
        while True:
            self.stopped_at = position
            if self._end - position < HEADER_SIZE:
                self._finish_short(self._end - position)
                return
            header = self._checked_header(os.pread(self._fd, HEADER_SIZE, position), 0, position)
            if header is None:
                return
            if position + header.size_bytes > self._end:
                self.stop = ScanStop.TORN
                return
            yield position, header, None
            position += header.size_bytes

    def _scan_verified(self) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        position = self._start
        buf = memoryview(b"")
        buf_start = position
        while True:
            self.stopped_at = position
            rel = position - buf_start
            if len(buf) - rel < HEADER_SIZE:
                buf, buf_start, rel = self._refill(position, HEADER_SIZE), position, 0
                if len(buf) < HEADER_SIZE:
                    self._finish_short(len(buf))
                    return
            header = self._checked_header(buf, rel, position)
            if header is None:
                return
            size = header.size_bytes
            if position + size > self._end:
                self.stop = ScanStop.TORN
                return
            if len(buf) - rel < size:
                buf, buf_start, rel = self._refill(position, size), position, 0
            batch = buf[rel : rel + size]
            try:
                verify_checksum(batch, header, position=position)
            except InvalidBatchError as exc:
                self.stop, self.error = ScanStop.CORRUPT, exc
                return
            yield position, header, batch
            position += size

    def _refill(self, position: int, need: int) -> memoryview:
        want = min(max(SCAN_CHUNK_BYTES, need), self._end - position)
        return memoryview(os.pread(self._fd, want, position))

    def _checked_header(self, buf: bytes | memoryview, rel: int, position: int) -> BatchHeader | None:
        header = parse_header(buf, rel)
        try:
            check_header(header, size_bytes_max=self._size_bytes_max, position=position)
        except InvalidBatchError as exc:
            self.stop, self.error = ScanStop.CORRUPT, exc
            return None
        return header

    def _finish_short(self, remaining: int) -> None:
        self.stop = ScanStop.END if remaining == 0 else ScanStop.TORN
