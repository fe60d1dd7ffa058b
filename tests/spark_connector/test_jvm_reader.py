"""The JVM segment reader (``format("logbroker-segments")``) against the Python direct reader, with a
real SparkSession and a real node: the same rows for every codec, key, header and timestamp shape;
offset ranges, minPartitions, the high watermark and data loss; corrupt files and bad options."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import struct
import threading
import time
from typing import Any

import pytest
import xxhash

from logbroker.client import Client
from segments.batch import CHECKSUMMED_FROM, TIMESTAMP_TYPE_LOG_APPEND, ProducerRecord, encode_batch
from segments.compression import Codec
from segments.reader import partition_directories
from tests.spark_connector.conftest import (
    aged_topic,
    collected_rows,
    create_topic,
    produce,
    require_segments_jar,
    wait_for_checkpoint,
)
from tests.support.poison import RowUncheckedNode

TOPIC = "jvm-orders"
PARTITIONS = 4
JVM = "logbroker-segments"
LARGE = 9000
DEADLINE_S = 30.0


@pytest.fixture(scope="module", autouse=True)
def _jar_built() -> None:
    require_segments_jar()


def _records(rng: random.Random, partition: int, codec: Codec) -> list[ProducerRecord]:
    out = []
    for i in range(25):
        key = None if i % 3 == 0 else f"k{partition}-{codec.name}-{i}".encode()
        value = None if i == 7 else rng.randbytes(rng.choice([0, 1, 50, 300]))
        headers: list[tuple[str, bytes]] = []
        if i % 4 == 0:
            headers = [("trace", rng.randbytes(4)), ("ünïcode", b"x")]
        if i % 10 == 5:
            headers = [("dup", b"first"), ("other", b""), ("dup", b"last")]
        stamp = 1_700_000_000_000 + list(Codec).index(codec) * 10_000 + rng.randint(-5000, 5000)
        out.append(ProducerRecord(value, key, headers, stamp))
    return out


def _log_append_batch(records: list[ProducerRecord]) -> bytes:
    """A batch whose attributes say log-append time (every record takes the batch's max timestamp)."""
    raw = bytearray(encode_batch(records, codec=Codec.LZ4))
    attributes = struct.unpack_from("<H", raw, CHECKSUMMED_FROM)[0] | TIMESTAMP_TYPE_LOG_APPEND
    struct.pack_into("<H", raw, CHECKSUMMED_FROM, attributes)
    struct.pack_into("<Q", raw, 17, xxhash.xxh3_64_intdigest(bytes(raw[CHECKSUMMED_FROM:])))
    return bytes(raw)


async def _produce_batches(url: str, batches: list[tuple[int, bytes]]) -> None:
    async with Client(url) as client:
        for partition, batch in batches:
            await client.produce_batch(TOPIC, partition, batch)


@pytest.fixture(scope="module")
def produced(node: Any) -> int:
    """Four partitions, one batch of each codec per partition, and a log-append-time batch."""
    create_topic(node, TOPIC, PARTITIONS)
    rng = random.Random(7)
    batches = [(p, encode_batch(_records(rng, p, codec), codec=codec)) for codec in Codec for p in range(PARTITIONS)]
    batches.append((0, _log_append_batch(_records(rng, 0, Codec.LZ4))))
    # A large batch: the JVM reader shows its records in place (more than one columnar batch's worth).
    large = [ProducerRecord(None if i % 5 == 0 else rng.randbytes(i % 40), None if i % 7 else b"k%d" % i,
                            [("n", b"%d" % i)] if i % 1000 == 0 else (), 1_700_000_000_000 + i) for i in range(LARGE)]
    batches.append((1, encode_batch(large)))
    asyncio.run(_produce_batches(node.url, batches))
    wait_for_checkpoint(node, TOPIC)
    return 25 * (len(batches) - 1) + LARGE


def _read(spark: Any, fmt: str, path: str, topic: str = TOPIC, **options: str) -> Any:
    reader = spark.read.format(fmt).option("topic", topic).option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _both(spark: Any, node: Any, **options: str) -> tuple[dict[Any, Any], dict[Any, Any]]:
    return (collected_rows(_read(spark, JVM, node.data_dir, **options)),
            collected_rows(_read(spark, "logbroker", node.data_dir, **options)))


def test_the_jvm_reader_returns_the_python_direct_readers_rows_for_every_codec(spark, node, produced):
    df = _read(spark, JVM, node.data_dir)
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,headers:map<string,binary>>")
    jvm, python = _both(spark, node)
    assert len(jvm) == produced
    assert jvm == python
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert {r[6]["dup"] for r in jvm.values() if "dup" in r[6]} == {b"last"}
    # The log-append batch: every record carries the batch's max timestamp.
    appended = [r for (p, o), r in jvm.items() if p == 0 and o >= 100]
    assert len(appended) == 25 and len({r[5] for r in appended}) == 1
    # Only some columns (pruned in the JVM reader) and an aggregate give the same answers too.
    assert _read(spark, JVM, node.data_dir).select("offset", "value").orderBy("offset", "value").collect() == \
        _read(spark, "logbroker", node.data_dir).select("offset", "value").orderBy("offset", "value").collect()
    assert _read(spark, JVM, node.data_dir).count() == produced


def test_offset_ranges_timestamps_and_min_partitions_are_honoured(spark, node, produced):
    starting = f'{{"{TOPIC}": {{"0": 5, "2": -2, "3": 29}}}}'
    ending = f'{{"{TOPIC}": {{"0": 60, "1": 3, "3": -1}}}}'
    jvm, python = _both(spark, node, startingOffsets=starting, endingOffsets=ending)
    assert jvm == python
    assert {p: sorted(o for q, o in jvm if q == p) for p in range(PARTITIONS)} == {
        0: list(range(5, 60)), 1: [0, 1, 2], 2: list(range(100)), 3: list(range(29, 100))}
    inside = f'{{"{TOPIC}": {{"1": 150}}}}', f'{{"{TOPIC}": {{"1": 9050}}}}'  # inside the large batch
    jvm, python = _both(spark, node, startingOffsets=inside[0], endingOffsets=inside[1])
    assert jvm == python
    assert sorted(o for q, o in jvm if q == 1) == list(range(150, 9050))
    df = _read(spark, JVM, node.data_dir, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    assert collected_rows(df) == collected_rows(_read(spark, "logbroker", node.data_dir))
    jvm, python = _both(spark, node, startingTimestamp=str(1_700_000_000_000 + 20_000))
    assert jvm == python and 0 < len(jvm) < produced


def test_a_read_never_goes_past_the_checkpointed_high_watermark(spark, node, tmp_path):
    create_topic(node, "jvm-torn", 1)
    produce(node, "jvm-torn", [{"value": f"v{i}", "partition": 0} for i in range(30)])
    wait_for_checkpoint(node, "jvm-torn")
    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(node.data_dir, "jvm-torn-0"), copy / "jvm-torn-0")
    shutil.copy(os.path.join(node.data_dir, "high-watermark-checkpoint"), copy)
    segment = sorted(n for n in os.listdir(copy / "jvm-torn-0") if n.endswith(".log"))[-1]
    more = encode_batch([ProducerRecord(b"appended but not committed")], base_offset=30)
    torn = encode_batch([ProducerRecord(b"being appended")], base_offset=31)
    with open(copy / "jvm-torn-0" / segment, "ab") as f:
        f.write(more)
        f.write(torn[: len(torn) // 2])
    rows = _read(spark, JVM, str(copy), topic="jvm-torn").collect()
    assert sorted(r.offset for r in rows) == list(range(30))
    assert sorted(r.value for r in rows) == sorted(f"v{i}".encode() for i in range(30))
    ending = '{"jvm-torn": {"0": 1000}}'  # endingOffsets past the high watermark are capped at it
    assert _read(spark, JVM, str(copy), topic="jvm-torn", endingOffsets=ending).count() == 30


def test_a_read_while_the_node_appends_returns_exactly_the_planned_range(spark, node):
    create_topic(node, "jvm-busy", 1, {"segment_bytes": 4096})
    produce(node, "jvm-busy", [{"value": "x" * 50, "partition": 0} for _ in range(200)])
    planned = wait_for_checkpoint(node, "jvm-busy")[0]
    stop = threading.Event()

    def keep_producing() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not stop.is_set() and time.monotonic() < deadline:
            produce(node, "jvm-busy", [{"value": "y" * 50, "partition": 0} for _ in range(20)])

    producer = threading.Thread(target=keep_producing)
    producer.start()
    try:
        ending = f'{{"jvm-busy": {{"0": {planned}}}}}'
        for _ in range(3):
            rows = _read(spark, JVM, node.data_dir, topic="jvm-busy", endingOffsets=ending).collect()
            assert sorted(r.offset for r in rows) == list(range(planned))
        latest = _read(spark, JVM, node.data_dir, topic="jvm-busy").collect()  # up to the checkpoint, whole
        assert sorted(r.offset for r in latest) == list(range(len(latest))) and len(latest) >= planned
    finally:
        stop.set()
        producer.join(DEADLINE_S)


def test_fail_on_data_loss_decides_about_records_deleted_by_retention(spark, node):
    earliest, latest = aged_topic(node, "jvm-aging")
    starting = '{"jvm-aging": {"0": 0}}'
    with pytest.raises(Exception, match="failOnDataLoss=false"):
        _read(spark, JVM, node.data_dir, topic="jvm-aging", startingOffsets=starting).collect()
    rows = _read(spark, JVM, node.data_dir, topic="jvm-aging", startingOffsets=starting,
                 failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(earliest, latest))


def test_a_segment_missing_in_the_middle_is_data_loss(spark, node, tmp_path):
    create_topic(node, "jvm-gap", 1, {"segment_bytes": 2048})
    for _ in range(6):
        produce(node, "jvm-gap", [{"value": "g" * 100, "partition": 0} for _ in range(10)])
    wait_for_checkpoint(node, "jvm-gap")
    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(node.data_dir, "jvm-gap-0"), copy / "jvm-gap-0")
    shutil.copy(os.path.join(node.data_dir, "high-watermark-checkpoint"), copy)
    logs = sorted(n for n in os.listdir(copy / "jvm-gap-0") if n.endswith(".log"))
    assert len(logs) >= 3
    os.unlink(copy / "jvm-gap-0" / logs[1])
    with pytest.raises(Exception, match=r"offsets \d+\.\.\d+ cannot be read \(a segment was deleted"):
        _read(spark, JVM, str(copy), topic="jvm-gap").collect()
    rows = _read(spark, JVM, str(copy), topic="jvm-gap", failOnDataLoss="false").collect()
    python = _read(spark, "logbroker", str(copy), topic="jvm-gap", failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == sorted(r.offset for r in python)
    assert 0 < len(rows) < 60


def _copy_topic(node: Any, topic: str, dest: Any) -> str:
    directory = partition_directories(node.data_dir, topic)[0]
    shutil.copytree(directory, dest / os.path.basename(directory))
    shutil.copy(os.path.join(node.data_dir, "high-watermark-checkpoint"), dest)
    return str(dest / os.path.basename(directory))


def test_a_flipped_byte_in_a_segment_is_an_error_naming_the_file_and_position(spark, node, tmp_path):
    create_topic(node, "jvm-flip", 1)
    produce(node, "jvm-flip", [{"value": "f" * 100, "partition": 0} for _ in range(20)])
    produce(node, "jvm-flip", [{"value": "f" * 100, "partition": 0} for _ in range(20)])
    wait_for_checkpoint(node, "jvm-flip")
    directory = _copy_topic(node, "jvm-flip", tmp_path)
    segment = os.path.join(directory, sorted(n for n in os.listdir(directory) if n.endswith(".log"))[0])
    with open(segment, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(size - 10)  # inside the second batch's records
        byte = f.read(1)
        f.seek(size - 10)
        f.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(Exception, match=rf"{segment}: corrupt batch at position \d+: batch checksum mismatch") as info:
        _read(spark, JVM, str(tmp_path), topic="jvm-flip").collect()
    assert "CorruptDataException" in str(info.value)
    # The first batch is intact and is all a read of its offsets touches.
    ending = '{"jvm-flip": {"0": 20}}'
    assert sorted(r.offset for r in _read(spark, JVM, str(tmp_path), topic="jvm-flip", endingOffsets=ending)
                  .collect()) == list(range(20))


@pytest.mark.parametrize("source", ["jvm", "python-direct", "python-http"])
def test_a_stored_batch_whose_records_cannot_be_decoded_is_data_loss_in_every_reader(spark, tmp_path, source):
    """A batch whose checksum holds but whose records section is not what the format says (produce
    refuses one since decision 0220; a node before that stored it, so its files may hold one): as
    for every other reader, it is data loss: an error naming its offsets and failOnDataLoss, or,
    with failOnDataLoss=false, passed over while the records around it are read."""
    from segments.batch import _assemble

    junk = _assemble(b"\x92\x95\x00\x00\xc0\xc4\x02ok\x90", count=2, first_ts=1, max_ts=1, base_offset=0,
                     leader_epoch=0, codec=Codec.NONE, producer=(-1, -1, -1))  # the second record is missing
    batches = [encode_batch([ProducerRecord(b"before")]), junk, encode_batch([ProducerRecord(b"after")])]
    with RowUncheckedNode(str(tmp_path / "unchecked")) as node:
        create_topic(node, "junk", 1)
        asyncio.run(_produce_topic(node.url, "junk", batches))
        wait_for_checkpoint(node, "junk")

        def read(**options: str) -> Any:
            if source == "python-http":
                reader = spark.read.format("logbroker").option("topic", "junk").option("url", node.url)
                for name, value in options.items():
                    reader = reader.option(name, value)
                return reader.load()
            return _read(spark, JVM if source == "jvm" else "logbroker", node.data_dir, topic="junk", **options)

        with pytest.raises(Exception, match=r"offsets 1\.\.2 cannot be read \(their batch's records cannot be "
                                            r"decoded: .*records section .*failOnDataLoss=false"):
            read().collect()
        rows = read(failOnDataLoss="false").collect()
        assert [(r["offset"], bytes(r["value"])) for r in rows] == [(0, b"before"), (3, b"after")]
        assert read(endingOffsets='{"junk": {"0": 1}}').count() == 1


async def _produce_topic(url: str, topic: str, batches: list[bytes]) -> None:
    async with Client(url) as client:
        for batch in batches:
            await client.produce_batch(topic, 0, batch)


BAD_OPTIONS = [
    ({"path": ""}, "say where the records are: path"),
    ({"topic": ""}, "the option topic is required"),
    ({"url": "http://127.0.0.1:1"}, 'is for reading over HTTP: use format("logbroker") with url'),
    ({"startingOffsets": "yesterday"}, "startingOffsets must be earliest, latest or JSON"),
    ({"startingOffsets": '{"other": {"0": 1}}'}, f"naming exactly the topic '{TOPIC}'"),
    ({"startingOffsets": f'{{"{TOPIC}": {{"9": 1}}}}'}, "partition(s) [9] that the topic does not have"),
    ({"startingOffsets": f'{{"{TOPIC}": {{"0": 1.5}}}}'}, "must be a partition number -> an offset"),
    ({"endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
    ({"startingOffsets": f'{{"{TOPIC}": {{"0": 1000}}}}'}, "is after the ending offset"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
    ({"minPartitions": "0"}, "minPartitions must be at least 1"),
    ({"minPartitions": "many"}, "minPartitions must be an integer"),
    ({"startingTimestamp": "5", "startingOffsets": "earliest"}, "either startingOffsets or startingTimestamp"),
    ({"subscribe": TOPIC}, "unknown option(s) for reading: subscribe"),
    ({"topic": "missing"}, "topic 'missing' has no partition directory"),
    ({"topic": "bad/name"}, "is not a valid topic name"),
    ({"path": "/nonexistent/dir"}, "'/nonexistent/dir' is not a directory"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_options_fail_with_a_clear_message(spark, node, produced, options, message):
    import re

    options = {"topic": TOPIC, "path": node.data_dir, **options}
    reader = spark.read.format(JVM)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=re.escape(message)):
        reader.load().collect()
