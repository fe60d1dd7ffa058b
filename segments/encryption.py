"""Encryption at rest of one record batch: AES-256-GCM over its records section (decision 0315).

A sealed batch keeps the batch layout of ``segments.batch``; only its records section changes::

    header (65 bytes, readable)   attributes has ENCRYPTED_FLAG; batch_length counts the 32 bytes more
    key_id      u32               the ring's key that sealed it
    nonce       12 bytes          random, one per sealing
    ciphertext  n bytes           AES-256-GCM of the records section as it was (compressed already)
    tag         16 bytes          GCM authentication tag

The associated data is every header byte that no one rewrites after sealing: ``batch_length``,
``magic`` and the 40 bytes from ``attributes`` to ``record_count``. ``base_offset`` and
``leader_epoch`` are left out because the leader patches them on append (after sealing), and the
checksum because it is computed over the sealed bytes. So recovery, the indexes, retention,
de-duplication and replication read the header and check the checksum as before, and an altered
header (record count, timestamps, producer identity, the flags) fails the tag like altered
ciphertext does.

Compression comes first (ciphertext does not compress). ``open_batch`` gives back the batch as
it was sealed, with its stored offset and epoch, the flag cleared and the checksum recomputed, so
every decoder reads it unchanged. ``open_batches`` does that for a buffer of whole batches and
returns the buffer itself, without a copy, when none is sealed.

Pure: functions over bytes; the nonce comes in as an argument (the caller draws it from
``os.urandom``), no files, no clock.
"""

from __future__ import annotations

import struct
from typing import Final

import xxhash
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from segments.batch import (
    ATTRIBUTES_OFFSET,
    BODY_HEADER,
    CHECKSUM_OFFSET,
    CHECKSUM_STRUCT,
    CHECKSUMMED_FROM,
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    LENGTH_PREFIX_SIZE,
    MAGIC_OFFSET,
    PREFIX,
    BatchHeader,
    parse_header,
)
from segments.errors import InvalidBatchError, UndecryptableBatchError
from segments.key_ring import KeyRing

KEY_ID: Final = struct.Struct("<I")
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
SEAL_PREFIX_BYTES: Final = KEY_ID.size + NONCE_BYTES
SEAL_OVERHEAD_BYTES: Final = SEAL_PREFIX_BYTES + TAG_BYTES
LENGTH_FIELD: Final = struct.Struct("<I")
LENGTH_OFFSET: Final = 8
_checksum = xxhash.xxh3_64_intdigest

assert SEAL_OVERHEAD_BYTES == 32
assert ATTRIBUTES_OFFSET == 25 and MAGIC_OFFSET == 16


def is_sealed(header: BatchHeader) -> bool:
    return bool(header[5] & ENCRYPTED_FLAG)


def _cipher(ring: KeyRing, key_id: int) -> AESGCM:
    cached = ring._ciphers.get(key_id)
    if cached is None:
        cached = AESGCM(ring.keys[key_id])
        ring._ciphers[key_id] = cached
    assert isinstance(cached, AESGCM)
    return cached


def _associated(batch: bytes | bytearray | memoryview, position: int = 0) -> bytes:
    """The associated data of the sealed batch header at ``position``: ``batch_length``, ``magic``
    and the 40 bytes from ``attributes`` to ``record_count``."""
    return b"".join((batch[position + LENGTH_OFFSET:position + LENGTH_OFFSET + LENGTH_FIELD.size],
                     batch[position + MAGIC_OFFSET:position + MAGIC_OFFSET + 1],
                     batch[position + CHECKSUMMED_FROM:position + HEADER_SIZE]))


def seal_batch(batch: bytes | bytearray | memoryview, ring: KeyRing, nonce: bytes) -> bytearray:
    """``batch`` (one whole, plain batch) sealed with the ring's current key and ``nonce``; built
    in one buffer, the ciphertext written into it (no copy of the records besides the cipher's)."""
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"a nonce is {NONCE_BYTES} bytes, not {len(nonce)}")
    header = parse_header(memoryview(batch))
    if is_sealed(header):
        raise InvalidBatchError("the batch is sealed already")
    out = bytearray(header.size_bytes + SEAL_OVERHEAD_BYTES)
    PREFIX.pack_into(out, 0, header.base_offset, header.batch_length + SEAL_OVERHEAD_BYTES, header.leader_epoch)
    out[MAGIC_OFFSET] = header.magic
    BODY_HEADER.pack_into(out, CHECKSUMMED_FROM, header.attributes | ENCRYPTED_FLAG, *header[6:])
    KEY_ID.pack_into(out, HEADER_SIZE, ring.current)
    out[HEADER_SIZE + KEY_ID.size:HEADER_SIZE + SEAL_PREFIX_BYTES] = nonce
    _cipher(ring, ring.current).encrypt_into(nonce, memoryview(batch)[HEADER_SIZE:header.size_bytes],
                                             _associated(out), memoryview(out)[HEADER_SIZE + SEAL_PREFIX_BYTES:])
    CHECKSUM_STRUCT.pack_into(out, CHECKSUM_OFFSET, _checksum(memoryview(out)[CHECKSUMMED_FROM:]))
    return out


def assemble(header: BatchHeader, batch_length: int, body_header: bytes, records: bytes) -> bytes:
    """A batch from its parts, its checksum computed: ``header``'s offset, epoch and magic,
    ``body_header`` (the 40 bytes from ``attributes`` on) and the records section as given (what a
    test forges an altered batch with)."""
    checksum = _checksum(body_header + records)
    return b"".join((PREFIX.pack(header.base_offset, batch_length, header.leader_epoch), bytes((header.magic,)),
                     CHECKSUM_STRUCT.pack(checksum), body_header, records))


def sealing_key(batch: bytes | bytearray | memoryview, position: int = 0) -> int | None:
    """The key id that sealed the batch at ``position``, None when it is plain."""
    header = parse_header(memoryview(batch), position)
    if not is_sealed(header):
        return None
    if header.batch_length + LENGTH_PREFIX_SIZE < HEADER_SIZE + SEAL_OVERHEAD_BYTES:
        raise UndecryptableBatchError(f"the sealed batch at offset {header.base_offset} is too short to hold a "
                                      "key id, a nonce and a tag", offset=header.base_offset)
    key_id: int = KEY_ID.unpack_from(batch, position + HEADER_SIZE)[0]
    return key_id


def open_batch(batch: bytes | bytearray | memoryview, ring: KeyRing | None) -> bytearray:
    """The plain batch ``batch`` (one whole, sealed batch) was, with its stored offset and epoch;
    ``UndecryptableBatchError`` when its key is not in ``ring`` or its tag fails."""
    out = bytearray(parse_header(memoryview(batch)).size_bytes - SEAL_OVERHEAD_BYTES)
    _open_into(memoryview(batch), 0, ring, memoryview(out))
    return out


def _open_into(view: memoryview, position: int, ring: KeyRing | None, out: memoryview) -> None:
    """Write the plain form of the sealed batch at ``position`` of ``view`` into ``out`` (exactly
    its size)."""
    header = parse_header(view, position)
    key_id = sealing_key(view, position)
    assert key_id is not None, "only sealed batches are opened"
    if ring is None or key_id not in ring.keys:
        raise UndecryptableBatchError(
            f"the batch at offset {header.base_offset} is sealed with key {key_id}, which is not in "
            f"{'this node' if ring is None else 'the'} key ring{' (it has none)' if ring is None else ''}",
            offset=header.base_offset, key_id=key_id)
    sealed_at = position + HEADER_SIZE + SEAL_PREFIX_BYTES
    nonce = view[position + HEADER_SIZE + KEY_ID.size:sealed_at]
    try:
        _cipher(ring, key_id).decrypt_into(nonce, view[sealed_at:position + header.size_bytes],
                                           _associated(view, position), out[HEADER_SIZE:])
    except InvalidTag:
        raise UndecryptableBatchError(
            f"the batch at offset {header.base_offset} fails its authentication tag under key {key_id}: its "
            "ciphertext or header was altered, or the key is not the one that sealed it",
            offset=header.base_offset, key_id=key_id) from None
    PREFIX.pack_into(out, 0, header.base_offset, header.batch_length - SEAL_OVERHEAD_BYTES, header.leader_epoch)
    out[MAGIC_OFFSET] = header.magic
    BODY_HEADER.pack_into(out, CHECKSUMMED_FROM, header.attributes & ~ENCRYPTED_FLAG, *header[6:])
    CHECKSUM_STRUCT.pack_into(out, CHECKSUM_OFFSET, _checksum(out[CHECKSUMMED_FROM:]))


def open_batches(data: bytes | bytearray | memoryview, ring: KeyRing | None) -> bytes | bytearray | memoryview:
    """``data`` (whole batches back to back, as a log read gives them) with every sealed batch
    opened, into one buffer; ``data`` itself when none is sealed. A partial trailing batch is kept
    as it is."""
    view = memoryview(data)
    sealed: list[tuple[int, int]] = []
    position = 0
    while len(view) - position >= HEADER_SIZE:
        header = parse_header(view, position)
        end = position + header.size_bytes
        if end > len(view):
            break
        if header[5] & ENCRYPTED_FLAG:
            sealed.append((position, end))
        position = end
    if not sealed:
        return data
    out = bytearray(len(view) - SEAL_OVERHEAD_BYTES * len(sealed))
    target, copied_to = memoryview(out), 0
    written = 0
    for start, end in sealed:
        plain = start - copied_to
        target[written:written + plain] = view[copied_to:start]
        written += plain
        size = end - start - SEAL_OVERHEAD_BYTES
        _open_into(view, start, ring, target[written:written + size])
        written += size
        copied_to = end
    target[written:] = view[copied_to:]
    return out


def reseal_batch(batch: bytes | bytearray | memoryview, ring: KeyRing, nonce: bytes) -> bytes | None:
    """``batch`` sealed with the ring's current key, or None when it needs no change (plain, or
    sealed with the current key already)."""
    key_id = sealing_key(batch)
    if key_id is None or key_id == ring.current:
        return None
    return bytes(seal_batch(open_batch(batch, ring), ring, nonce))

