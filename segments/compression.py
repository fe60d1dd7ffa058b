"""Compression codecs for the records section of a batch.

Codec numbers follow Kafka's (0 none, 1 gzip, 3 lz4, 4 zstd). Decompression is always bounded:
a batch can never expand past ``size_bytes_max``, so a hostile or corrupt batch cannot make the
node allocate without limit.
"""

from __future__ import annotations

import enum
import io
import zlib

import lz4.frame
import zstandard

from segments.errors import InvalidBatchError

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
DECOMPRESS_CHUNK_BYTES = 1 << 16


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    LZ4 = 3
    ZSTD = 4


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
    """Decompress ``data``; raise ``InvalidBatchError`` if it is invalid or expands too far.
    Uncompressed data comes back as it was given, without a copy."""
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
    except (zlib.error, RuntimeError, zstandard.ZstdError) as exc:
        raise InvalidBatchError(f"cannot decompress records (codec {codec}): {exc}") from exc
    raise InvalidBatchError(f"unknown compression codec {codec}")


def _checked(out: bytes, size_bytes_max: int) -> bytes:
    if len(out) > size_bytes_max:
        raise InvalidBatchError(f"records expand past the limit of {size_bytes_max} bytes")
    return out


def _raise_too_large_or_truncated(size_bytes: int, size_bytes_max: int) -> None:
    if size_bytes > size_bytes_max:
        raise InvalidBatchError(f"records expand past the limit of {size_bytes_max} bytes")
    raise InvalidBatchError("compressed records are truncated")
