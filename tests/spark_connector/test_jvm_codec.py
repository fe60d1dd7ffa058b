"""The JVM reader's pure parts against Python's: XXH3-64 on random inputs of every length class, and
the decoding of whole batches (records, and hand-made records sections that may be invalid), called
one value at a time through Spark's JVM gateway (``io.logbroker.spark.Probe``)."""

from __future__ import annotations

import base64
import json
import os
import random
from typing import Any

import msgpack
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError

from segments.batch import HEADER_SIZE, ProducerRecord, decode_records, encode_batch, parse_header
from segments.compression import Codec
from segments.encryption import assemble, seal_batch
from segments.errors import InvalidBatchError
from segments.key_ring import KeyRing, format_ring
from tests.spark_connector.conftest import require_segments_jar

U64 = (1 << 64) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class JvmProbe:
    """``io.logbroker.spark.Probe`` behind a plain Python object (py4j answers any attribute name)."""

    def __init__(self, spark: Any) -> None:
        self._probe = spark._jvm.io.logbroker.spark.Probe

    def xxh3(self, data: bytearray) -> int:
        return int(self._probe.xxh3(data))

    def decodeBatch(self, raw: bytearray) -> str:
        return str(self._probe.decodeBatch(raw))

    def split(self, ranges: str, min_partitions: int) -> str:
        return str(self._probe.split(ranges, min_partitions))


@pytest.fixture(scope="module")
def probe(spark: Any) -> JvmProbe:
    require_segments_jar()
    return JvmProbe(spark)


def _jvm_xxh3(probe: Any, data: bytes) -> int:
    return int(probe.xxh3(bytearray(data))) & U64


def test_xxh3_matches_python_on_every_length_class(probe):
    rng = random.Random(3)
    lengths = list(range(0, 260)) + [rng.randint(241, 2100) for _ in range(300)] + [1024, 1025, 2048, 4096, 65537]
    for length in lengths:
        data = rng.randbytes(length)
        assert _jvm_xxh3(probe, data) == xxhash.xxh3_64_intdigest(data), f"length {length}"
    for length in (0, 3, 8, 16, 17, 128, 129, 240, 241, 1000):  # not only random bytes
        for fill in (b"\x00", b"\xff"):
            assert _jvm_xxh3(probe, fill * length) == xxhash.xxh3_64_intdigest(fill * length)


def _jvm_records(probe: Any, raw: bytes) -> list[tuple[Any, ...]] | None:
    from py4j.protocol import Py4JJavaError

    try:
        text = probe.decodeBatch(bytearray(raw))
    except Py4JJavaError as exc:
        assert "CorruptDataException" in str(exc.java_exception.getClass().getName())
        return None
    return [(r["offset"], r["timestamp"], _b64(r["key"]), _b64(r["value"]),
             [(n, base64.b64decode(v)) for n, v in r["headers"]]) for r in json.loads(text)]


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _python_records(raw: bytes) -> list[tuple[Any, ...]] | None:
    """What the Python reader makes of a batch: None when it refuses it (timestamps must fit 64 bits)."""
    try:
        records = decode_records(raw)
    except InvalidBatchError:
        return None
    if any(not I64_MIN <= r.timestamp <= I64_MAX for r in records):
        return None
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]


blobs = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=6), st.binary(max_size=6)), max_size=3)
records = st.builds(ProducerRecord, blobs, blobs, headers, st.integers(-(2**50), 2**50))


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(records, min_size=1, max_size=30), st.sampled_from(list(Codec)), st.integers(0, 2**40))
def test_batches_decode_to_the_same_records_as_python(probe, group, codec, base):
    raw = encode_batch(group, base_offset=base, codec=codec)
    expected = _python_records(raw)
    assert expected is not None
    assert _jvm_records(probe, raw) == expected


scalars = st.one_of(st.integers(-(2**63), 2**64 - 1), st.booleans(), st.none(), st.binary(max_size=8),
                    st.text(max_size=4), st.floats(allow_nan=False))
rows = st.lists(st.one_of(scalars, st.lists(st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=4)),
                max_size=6)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows, min_size=1, max_size=6), st.integers(0, 8), st.booleans())
def test_any_records_section_decodes_the_same_or_is_refused_by_both(probe, section_rows, count, truncate):
    """Hand-made sections (wrong shapes, strings, bools, big ints, deltas out of order, cut short)."""
    from segments.batch import _assemble

    section = msgpack.packb(section_rows, use_bin_type=True)
    if truncate:
        section = section[: len(section) // 2]
    raw = _assemble(section, count=max(1, count), first_ts=1000, max_ts=1000, base_offset=7, leader_epoch=0,
                    codec=Codec.NONE, producer=(-1, -1, -1))
    assert _jvm_records(probe, raw) == _python_records(raw)


def test_well_formed_hand_made_sections_agree_too(probe):
    """The property above mostly finds refusals; these sections are valid, with every int width."""
    from segments.batch import _assemble

    sections = [
        [[0, 0, None, b"v", []], [1, -1, b"k", None, [["a", b"1"], ["a", b"2"]]]],
        [[0, 2**31, b"", b"", []], [1, -(2**40), None, None, [["\u00e9", b""]]], [2, 2**63 - 10, None, b"", []]],
        [[0, 127, b"x" * 300, b"y" * 70000, []]],
    ]
    for section in sections:
        packed = msgpack.packb(section, use_bin_type=True)
        for count in (len(section), len(section) + 1):  # the right count, and one the section does not hold
            raw = _assemble(packed, count=count, first_ts=5, max_ts=5, base_offset=10, leader_epoch=0,
                            codec=Codec.NONE, producer=(-1, -1, -1))
            expected = _python_records(raw)
            assert (expected is not None) == (count == len(section))
            assert _jvm_records(probe, raw) == expected


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**7)), min_size=1, max_size=8),
       st.integers(1, 64))
def test_offset_ranges_split_as_the_python_source_splits_them(probe, spans, min_partitions):
    from spark_connector.offsets import OffsetRange, split

    ranges = [OffsetRange(p, start, start + size) for p, (start, size) in enumerate(spans)]
    text = ",".join(f"{r.partition}:{r.start}:{r.end}" for r in ranges)
    expected = ",".join(f"{r.partition}:{r.start}:{r.end}" for r in split(ranges, min_partitions))
    assert probe.split(text, min_partitions) == expected


RING = KeyRing({1: os.urandom(32), 7: os.urandom(32)}, 7)


def _jvm_sealed(probe: Any, raw: bytes, ring_text: str) -> list[tuple[Any, ...]] | str:
    """The JVM's records of a sealed batch, or the name and message of the exception it raised."""
    try:
        text = str(probe._probe.decodeSealedBatch(bytearray(raw), ring_text))
    except Py4JJavaError as exc:
        return f"{exc.java_exception.getClass().getName()}: {exc.java_exception.getMessage()}"
    return [(r["offset"], r["timestamp"], _b64(r["key"]), _b64(r["value"]),
             [(n, base64.b64decode(v)) for n, v in r["headers"]]) for r in json.loads(text)]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(records, min_size=1, max_size=20), st.sampled_from(list(Codec)), st.integers(0, 2**40),
       st.binary(min_size=12, max_size=12))
def test_sealed_batches_open_with_javax_crypto_to_the_same_records_as_python(
        probe: JvmProbe, group: list[ProducerRecord], codec: Codec, base: int, nonce: bytes) -> None:
    plain = encode_batch(group, base_offset=base, codec=codec)
    sealed = seal_batch(plain, RING, nonce)
    assert _jvm_sealed(probe, sealed, format_ring(RING)) == _python_records(plain)


def test_the_jvm_refuses_a_sealed_batch_it_cannot_open(probe: JvmProbe) -> None:
    sealed = seal_batch(encode_batch([ProducerRecord(b"secret")]), RING, b"\x01" * 12)
    name = "io.logbroker.spark.UndecryptableBatchException"
    assert _jvm_sealed(probe, sealed, format_ring(KeyRing({1: RING.keys[1]}, 1))) == \
        f"{name}: the batch at offset 0 is sealed with key 7, which is not in the key ring"
    flipped = bytearray(sealed)
    flipped[HEADER_SIZE + 20] ^= 1
    header = parse_header(bytes(flipped))
    forged = assemble(header, header.batch_length, bytes(flipped[25:HEADER_SIZE]), bytes(flipped[HEADER_SIZE:]))
    found = _jvm_sealed(probe, forged, format_ring(RING))
    assert isinstance(found, str) and found.startswith(name) and "authentication tag" in found
    with pytest.raises(Py4JJavaError, match="encryptionKeysFile"):
        probe.decodeBatch(bytearray(sealed))  # no ring: never ciphertext decoded as records


kafka_records = st.lists(st.tuples(st.integers(0, 2**50), blobs, blobs,
                                   st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)),
                                            max_size=3)), min_size=1, max_size=30)


def _kafka_stored(records: list[tuple[Any, ...]], codec: int, base: int) -> bytes:
    """A stored batch in Kafka's record format, as the Kafka listener writes it."""
    from kafka_api.record_batch import encode_batch as kafka_batch
    from segments.batch import KAFKA_RECORDS_FLAG, wrap_section

    section = kafka_batch(0, records, compression=codec)[61:]
    return wrap_section(section, attributes=codec | KAFKA_RECORDS_FLAG, count=len(records), first_ts=records[0][0],
                        max_ts=max(r[0] for r in records), producer=(-1, -1, -1), base_offset=base)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kafka_records, st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 2**40))
def test_kafka_format_batches_decode_to_the_same_records_as_python(probe, group, codec, base):
    """Every codec a Kafka producer may use, snappy included (xerial-framed here)."""
    raw = _kafka_stored(group, codec, base)
    expected = _python_records(raw)
    assert expected is not None
    assert _jvm_records(probe, raw) == expected


def test_a_raw_snappy_kafka_section_as_librdkafka_writes_it(probe):
    import cramjam

    from kafka_api.record_batch import encode_batch as kafka_batch
    from segments.batch import KAFKA_RECORDS_FLAG, wrap_section

    plain = kafka_batch(0, [(5, b"k", b"v" * 300, [("h", None)])])[61:]
    raw = wrap_section(bytes(cramjam.snappy.compress_raw(plain)), attributes=2 | KAFKA_RECORDS_FLAG, count=1,
                       first_ts=5, max_ts=5, producer=(-1, -1, -1))
    assert _jvm_records(probe, raw) == _python_records(raw) == [(0, 5, b"k", b"v" * 300, [("h", b"")])]


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kafka_records, st.data())
def test_changed_kafka_sections_produce_accepts_decode_the_same(probe, group, data):
    from segments import kafka_records as stored_format
    from segments.batch import KAFKA_RECORDS_FLAG, wrap_section

    raw = bytearray(_kafka_stored([(abs(r[0]) % 1000, *r[1:]) for r in group], 0, 3))
    section = raw[HEADER_SIZE:]
    for _ in range(data.draw(st.integers(1, 3))):
        section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
    try:
        stored_format.produced_facts(bytes(section), len(group), 0)
    except InvalidBatchError:
        return  # refused at produce, never stored
    changed = wrap_section(bytes(section), attributes=KAFKA_RECORDS_FLAG, count=len(group), first_ts=0, max_ts=0,
                           producer=(-1, -1, -1), base_offset=3)
    assert _jvm_records(probe, changed) == _python_records(changed)
