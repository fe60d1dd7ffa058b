"""Compression codecs for the records section of a batch.

Codec numbers follow Kafka's (0 none, 1 gzip, 3 lz4, 4 zstd). Decompression is always bounded:
a batch can never expand past ``size_bytes_max``, so a hostile or corrupt batch cannot make the
node allocate without limit. ``decompress`` gives the whole section at once; ``open_section`` a
reader that decompresses only as far as it is read (a reader that wants the first records of a
batch of millions decompresses a few chunks, not the batch).
"""

from __future__ import annotations

import enum
import io
import zlib
from typing import Protocol

import lz4.frame
import zstandard

from segments.errors import InvalidBatchError, RecordsTooLargeError

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
DECOMPRESS_CHUNK_BYTES = 1 << 16
_ERRORS = (zlib.error, RuntimeError, zstandard.ZstdError)


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    LZ4 = 3
    ZSTD = 4


class SectionReader(Protocol):
    def read(self, size: int) -> bytes: ...


def compress(codec: Codec, data: bytes) -> bytes:
    """Compress ``data`` with ``codec`` (NONE returns it unchanged)."""
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == Codec.LZ4:
        packed: bytes = lz4.frame.compress(data)
        return packed
    if codec == Codec.ZSTD:
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    raise InvalidBatchError(f"unknown compression codec {int(codec)}")


def decompress(codec: int, data: bytes | memoryview, size_bytes_max: int) -> bytes | memoryview:
    """Decompress ``data``; raise ``InvalidBatchError`` if it is invalid, ``RecordsTooLargeError``
    if it expands too far. Uncompressed data comes back as it was given, without a copy."""
    if codec == Codec.NONE:
        return data
    try:
        if codec == Codec.GZIP:
            unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = unpacker.decompress(data, size_bytes_max + 1)
            if not unpacker.eof:
                _raise_too_large_or_truncated(len(out), size_bytes_max)
            return _checked(out, size_bytes_max)
        if codec == Codec.LZ4:
            lz4_unpacker = lz4.frame.LZ4FrameDecompressor()
            out = lz4_unpacker.decompress(bytes(data), max_length=size_bytes_max + 1)
            if not lz4_unpacker.eof:
                _raise_too_large_or_truncated(len(out), size_bytes_max)
            return _checked(out, size_bytes_max)
        if codec == Codec.ZSTD:
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(bytes(data)))
            out = reader.read(size_bytes_max + 1)
            return _checked(out, size_bytes_max)
    except _ERRORS as exc:
        raise InvalidBatchError(f"cannot decompress records (codec {codec}): {exc}") from exc
    raise InvalidBatchError(f"unknown compression codec {codec}")


def open_section(codec: int, data: bytes | memoryview, size_bytes_max: int) -> SectionReader:
    """A reader of the decompressed records section that decompresses as it is read and raises
    like ``decompress`` (it yields the same bytes, in pieces)."""
    if codec == Codec.NONE:
        return _Bounded(_Plain(memoryview(data)), codec, size_bytes_max)
    if codec == Codec.GZIP:
        return _Bounded(_Incremental(data, zlib.decompressobj(16 + zlib.MAX_WBITS)), codec, size_bytes_max)
    if codec == Codec.LZ4:
        return _Bounded(_Incremental(data, lz4.frame.LZ4FrameDecompressor()), codec, size_bytes_max)
    if codec == Codec.ZSTD:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(bytes(data)))
        return _Bounded(reader, codec, size_bytes_max)
    raise InvalidBatchError(f"unknown compression codec {codec}")


class _Plain:
    """An uncompressed section read in pieces (a copy of each piece only)."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._position = 0

    def read(self, size: int) -> bytes:
        piece = bytes(self._view[self._position:self._position + size])
        self._position += len(piece)
        return piece


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


class _Incremental:
    """gzip (``zlib.decompressobj``) or lz4 frame, fed the input a chunk at a time and never asked
    for more output than wanted. What is held back is fed again first: zlib returns the input it
    did not consume (``unconsumed_tail``), lz4 keeps it and says so (``needs_input`` False). The end
    of the input before the end of the stream is a truncated section."""

    def __init__(self, data: bytes | memoryview, decompressor: _Decompressor) -> None:
        self._input = memoryview(data)
        self._position = 0
        self._unpacker = decompressor

    def read(self, size: int) -> bytes:
        out = []
        wanted = size
        while wanted > 0 and not self._unpacker.eof:
            piece = self._unpacker.decompress(self._next_input(), wanted)
            out.append(piece)
            wanted -= len(piece)
        return b"".join(out)

    def _next_input(self) -> bytes:
        tail: bytes = getattr(self._unpacker, "unconsumed_tail", b"")
        if tail:
            return tail
        if not getattr(self._unpacker, "needs_input", True):
            return b""
        if self._position >= len(self._input):
            raise InvalidBatchError("compressed records are truncated")
        chunk = bytes(self._input[self._position:self._position + DECOMPRESS_CHUNK_BYTES])
        self._position += len(chunk)
        return chunk


class _Bounded:
    """Counts what is read: past ``size_bytes_max`` is ``RecordsTooLargeError``; the codec's own
    errors become ``InvalidBatchError``."""

    def __init__(self, reader: SectionReader, codec: int, size_bytes_max: int) -> None:
        self._reader = reader
        self._codec = codec
        self._size_bytes_max = size_bytes_max
        self._size_bytes = 0

    def read(self, size: int) -> bytes:
        try:
            piece = self._reader.read(min(size, self._size_bytes_max - self._size_bytes + 1))
        except _ERRORS as exc:
            raise InvalidBatchError(f"cannot decompress records (codec {self._codec}): {exc}") from exc
        self._size_bytes += len(piece)
        if self._size_bytes > self._size_bytes_max:
            _raise_too_large_or_truncated(self._size_bytes, self._size_bytes_max)
        return piece


def _checked(out: bytes, size_bytes_max: int) -> bytes:
    if len(out) > size_bytes_max:
        _raise_too_large_or_truncated(len(out), size_bytes_max)
    return out


def _raise_too_large_or_truncated(size_bytes: int, size_bytes_max: int) -> None:
    if size_bytes > size_bytes_max:
        raise RecordsTooLargeError(f"records expand past the limit of {size_bytes_max} bytes",
                                   limit=size_bytes_max)
    raise InvalidBatchError("compressed records are truncated")
