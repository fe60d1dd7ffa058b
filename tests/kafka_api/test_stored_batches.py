"""Kafka batches stored as Kafka wrote them: what Produce stores, what Fetch gives back, and what is
refused before anything is stored."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_api import record_batch
from kafka_api.stored_batches import kafka_batches, stored_batch
from segments.batch import (
    KAFKA_RECORDS_FLAG,
    ProducerRecord,
    decode_records,
    encode_batch,
    patch_in_place,
    validate_batch,
)
from segments.errors import InvalidBatchError, RecordsTooLargeError
from segments.kafka_records import KafkaHeader
from tests.support.kafka_decoder import decode_batches

MIB = 1 << 20
blobs = st.none() | st.binary(max_size=30)
records_strategy = st.lists(
    st.tuples(st.integers(0, 2**41), blobs, blobs, st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2)),
    min_size=1, max_size=30)


def refit(batch: bytes, **fields: int) -> bytes:
    """``batch`` with header fields replaced and its CRC made right again."""
    names = KafkaHeader._fields
    values = list(struct.unpack_from(">qiibIhiqqqhii", batch))
    for name, value in fields.items():
        values[names.index(name)] = value
    out = bytearray(batch)
    struct.pack_into(">qiibIhiqqqhii", out, 0, *values)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@settings(max_examples=60)
@given(records=records_strategy, codec=st.sampled_from([0, 1, 2, 3, 4]), base=st.integers(0, 2**40),
       producer=st.sampled_from([(-1, -1, -1), (7, 2, 100)]))
def test_a_stored_batch_is_fetched_as_the_batch_the_producer_sent(records: list, codec: int, base: int,
                                                                  producer: tuple[int, int, int]) -> None:
    sent = record_batch.encode_batch(0, records, compression=codec, producer_id=producer[0],
                                     producer_epoch=producer[1], base_sequence=producer[2])
    stored, checked, _ = stored_batch(sent, bytes_max=16 * MIB)
    header = validate_batch(stored)
    assert header.attributes & KAFKA_RECORDS_FLAG and header.codec == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert (checked.timestamp_min, checked.timestamp_max) == (min(r[0] for r in records), max(r[0] for r in records))
    appended = bytearray(stored)
    patch_in_place(appended, base, 3)  # as the leader appends it
    fetched, count = kafka_batches(bytes(appended), base)
    assert count == len(records)
    assert fetched[16:] == sent[16:]  # magic, CRC and everything after: the producer's bytes
    assert struct.unpack_from(">qii", fetched) == (base, len(sent) - 12, 3)
    (decoded,) = decode_batches(fetched, records_max=100, uncompressed_bytes_max=MIB)
    assert [(r.timestamp_ms, r.key, r.value) for r in decoded.records] == [(r[0], r[1], r[2]) for r in records]


def test_the_max_timestamp_is_the_records_greatest_whatever_the_producer_wrote() -> None:
    sent = refit(record_batch.encode_batch(0, [(10, None, b"a", []), (30, None, b"b", [])]), max_timestamp=5)
    stored, checked, _ = stored_batch(sent, bytes_max=MIB)
    assert validate_batch(stored).max_timestamp == 30 == checked.timestamp_max
    fetched, _ = kafka_batches(stored, 0)
    (decoded,) = decode_batches(fetched, records_max=10, uncompressed_bytes_max=MIB)  # CRC right
    assert decoded.max_timestamp == 30


def test_a_producers_log_append_time_bit_is_not_kept() -> None:
    sent = refit(record_batch.encode_batch(0, [(10, None, b"a", [])]), attributes=0x08)
    stored, _, _ = stored_batch(sent, bytes_max=MIB)
    assert decode_records(stored)[0].timestamp == 10


@pytest.mark.parametrize(("change", "error", "message"), [
    (lambda b: b + b, record_batch.RecordBatchError, "exactly one record batch"),
    (lambda b: refit(b, attributes=0x10), record_batch.UnsupportedBatch, "transactional"),
    (lambda b: refit(b, attributes=0x20), record_batch.UnsupportedBatch, "control"),
    (lambda b: refit(b, last_offset_delta=3), record_batch.RecordBatchError, "last_offset_delta"),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), record_batch.RecordBatchError, "CRC mismatch"),
    (lambda b: b[:40], record_batch.RecordBatchError, "truncated"),
])
def test_bytes_that_are_not_one_valid_batch_are_refused(change, error: type, message: str) -> None:
    sent = record_batch.encode_batch(0, [(10, None, b"a", [])])
    with pytest.raises(error, match=message):
        stored_batch(change(sent), bytes_max=MIB)


def test_records_no_reader_would_take_are_refused() -> None:
    with pytest.raises(InvalidBatchError, match="x-logbroker-"):
        stored_batch(record_batch.encode_batch(0, [(10, None, b"a", [("X-LogBroker-Key", b"1")])]), bytes_max=MIB)
    with pytest.raises(InvalidBatchError, match="timestamps must lie"):
        stored_batch(record_batch.encode_batch(0, [(2**62 + 1, None, b"a", [])]), bytes_max=MIB)


def test_a_compressed_section_is_bounded_by_the_budget_given() -> None:
    sent = record_batch.encode_batch(0, [(10, None, b"x" * 100_000, [])], compression=4)
    with pytest.raises(RecordsTooLargeError):
        stored_batch(sent, bytes_max=50_000)
    _, _, unpacked = stored_batch(sent, bytes_max=MIB)
    assert unpacked > 100_000


def test_a_fetch_of_both_formats() -> None:
    """A batch in the broker's own format is converted (records before the fetch offset left out);
    a Kafka batch goes whole (Kafka clients skip what precedes their offset)."""
    own = bytearray(encode_batch([ProducerRecord(b"a"), ProducerRecord(b"b"), ProducerRecord(b"c")]))
    patch_in_place(own, 0, 1)
    kafka = bytearray(stored_batch(record_batch.encode_batch(0, [(5, None, b"d", []), (6, None, b"e", [])]),
                                   bytes_max=MIB)[0])
    patch_in_place(kafka, 3, 1)
    fetched, count = kafka_batches(bytes(own + kafka), 1)
    assert count == 4
    batches = decode_batches(fetched, records_max=10, uncompressed_bytes_max=MIB)
    assert [(b.base_offset, [r.value for r in b.records]) for b in batches] == [(1, [b"b", b"c"]), (3, [b"d", b"e"])]
    _, count = kafka_batches(bytes(own + kafka), 4)
    assert count == 1
