"""Encryption at rest of a batch: round trips, what a sealed batch exposes, tamper and key errors."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from segments.batch import (
    ENCRYPTED_FLAG,
    HEADER_SIZE,
    PREFIX_SIZE,
    ProducerRecord,
    decode_records,
    encode_batch,
    iter_batches,
    parse_header,
    patch_in_place,
    validate_batch,
)
from segments.compression import Codec
from segments.encryption import (
    SEAL_OVERHEAD_BYTES,
    assemble,
    open_batch,
    open_batches,
    reseal_batch,
    seal_batch,
    sealing_key,
)
from segments.errors import InvalidBatchError, UndecryptableBatchError
from segments.key_ring import KeyRing
from segments.record_reader import iter_records

RECORDS = st.lists(
    st.builds(ProducerRecord, value=st.none() | st.binary(max_size=64), key=st.none() | st.binary(max_size=16),
              headers=st.lists(st.tuples(st.text(max_size=6), st.binary(max_size=8)), max_size=3),
              timestamp=st.none() | st.integers(0, 2**40)),
    min_size=1, max_size=12)
CODECS = st.sampled_from(list(Codec))
NONCES = st.binary(min_size=12, max_size=12)
RING = KeyRing({1: b"\x01" * 32, 2: b"\x02" * 32}, 2)


@given(RECORDS, CODECS, NONCES, st.integers(0, 2**63 - 1), st.integers(0, 2**32 - 1))
def test_sealed_batch_round_trips_with_the_offset_and_epoch_patched_after_sealing(
        records: list[ProducerRecord], codec: Codec, nonce: bytes, base: int, epoch: int) -> None:
    plain = encode_batch(records, codec=codec, timestamp_ms=1)
    sealed = bytearray(seal_batch(plain, RING, nonce))
    assert len(sealed) == len(plain) + SEAL_OVERHEAD_BYTES
    patch_in_place(sealed, base, epoch)  # what the leader does on append
    header = validate_batch(bytes(sealed))  # checksum holds over the ciphertext; header readable
    assert header.attributes & ENCRYPTED_FLAG and header.record_count == len(records)
    assert (header.base_offset, header.leader_epoch) == (base, epoch)
    assert sealing_key(bytes(sealed)) == 2
    opened = open_batch(bytes(sealed), RING)
    expected = bytearray(plain)
    patch_in_place(expected, base, epoch)
    assert opened == bytes(expected)
    assert decode_records(bytes(opened)) == decode_records(bytes(expected))


@given(RECORDS, NONCES)
def test_the_ciphertext_holds_none_of_the_values(records: list[ProducerRecord], nonce: bytes) -> None:
    marked = [r._replace(value=b"PLAINTEXT-" + (r.value or b"")) for r in records]
    sealed = seal_batch(encode_batch(marked, timestamp_ms=1), RING, nonce)
    assert b"PLAINTEXT-" not in sealed


def test_decoders_refuse_a_sealed_batch_rather_than_decode_ciphertext() -> None:
    sealed = bytes(seal_batch(encode_batch([ProducerRecord(b"v")], timestamp_ms=1), RING, os.urandom(12)))
    with pytest.raises(UndecryptableBatchError):
        decode_records(sealed)
    with pytest.raises(UndecryptableBatchError):
        list(iter_records(sealed))


@given(RECORDS, NONCES, st.data())
def test_any_flipped_bit_after_the_prefix_is_detected(records: list[ProducerRecord], nonce: bytes,
                                                       data: st.DataObject) -> None:
    sealed = bytearray(seal_batch(encode_batch(records, timestamp_ms=1), RING, nonce))
    bit = data.draw(st.integers(PREFIX_SIZE * 8, len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises((UndecryptableBatchError, InvalidBatchError)):
        validate_batch(bytes(sealed))  # the checksum or a header check sees most of them
        open_batch(bytes(sealed), RING)  # the tag sees the rest (and one also fixing the checksum)


@given(RECORDS, NONCES, st.data())
def test_a_flipped_ciphertext_bit_with_its_checksum_fixed_fails_the_tag(
        records: list[ProducerRecord], nonce: bytes, data: st.DataObject) -> None:
    """An attacker who rewrites the checksum too (it is no secret) is still caught by the tag."""
    sealed = bytearray(seal_batch(encode_batch(records, timestamp_ms=1), RING, nonce))
    bit = data.draw(st.integers(HEADER_SIZE * 8, len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)
    header = parse_header(bytes(sealed))
    fixed = assemble(header, header.batch_length, bytes(sealed[25:HEADER_SIZE]), bytes(sealed[HEADER_SIZE:]))
    validate_batch(fixed)
    with pytest.raises(UndecryptableBatchError):
        open_batch(fixed, RING)


def test_an_altered_header_field_fails_the_tag() -> None:
    sealed = bytes(seal_batch(encode_batch([ProducerRecord(b"a"), ProducerRecord(b"b")], timestamp_ms=5), RING,
                              os.urandom(12)))
    header = parse_header(sealed)
    body = bytearray(sealed[25:HEADER_SIZE])
    body[6] ^= 1  # first_timestamp
    forged = assemble(header, header.batch_length, bytes(body), sealed[HEADER_SIZE:])
    with pytest.raises(UndecryptableBatchError, match="authentication tag"):
        open_batch(forged, RING)


def test_a_missing_key_and_a_wrong_key_are_clear_errors() -> None:
    sealed = seal_batch(encode_batch([ProducerRecord(b"v")], timestamp_ms=1), RING, os.urandom(12))
    with pytest.raises(UndecryptableBatchError, match="key 2, which is not in") as missing:
        open_batch(sealed, KeyRing({1: b"\x01" * 32}, 1))
    assert missing.value.key_id == 2
    with pytest.raises(UndecryptableBatchError, match="has none"):
        open_batch(sealed, None)
    with pytest.raises(UndecryptableBatchError, match="authentication tag"):
        open_batch(sealed, KeyRing({2: b"\x09" * 32}, 2))


@given(st.lists(st.tuples(RECORDS, st.booleans()), min_size=1, max_size=6), st.data())
def test_open_batches_opens_sealed_ones_and_keeps_plain_ones(batches: list[tuple[list[ProducerRecord], bool]],
                                                             data: st.DataObject) -> None:
    plain, stored, base = [], [], 0
    for records, seal in batches:
        one = bytearray(encode_batch(records, timestamp_ms=1))
        patch_in_place(one, base, 3)
        base += len(records)
        plain.append(bytes(one))
        stored.append(seal_batch(bytes(one), RING, data.draw(NONCES)) if seal else bytes(one))
    joined = b"".join(stored)
    opened = open_batches(joined, RING)
    assert bytes(opened) == b"".join(plain)
    if not any(seal for _, seal in batches):
        assert opened is joined  # no copy when nothing is sealed
    assert [h.base_offset for _, h in iter_batches(memoryview(opened))] == [parse_header(p).base_offset for p in plain]


def test_reseal_moves_a_batch_to_the_current_key_and_leaves_others_alone() -> None:
    old = KeyRing({1: b"\x01" * 32}, 1)
    plain = encode_batch([ProducerRecord(b"v")], timestamp_ms=1)
    under_old = seal_batch(plain, old, os.urandom(12))
    moved = reseal_batch(under_old, RING, os.urandom(12))
    assert moved is not None and sealing_key(moved) == 2
    assert open_batch(moved, KeyRing({2: b"\x02" * 32}, 2)) == plain
    assert reseal_batch(moved, RING, os.urandom(12)) is None
    assert reseal_batch(plain, RING, os.urandom(12)) is None
