"""Both Spark segment readers over a node's data encrypted at rest, with a real SparkSession: the
Python ``logbroker`` source and the JVM ``logbroker-segments`` source (``javax.crypto``) read the
same rows with ``encryptionKeysFile`` for every codec; without it, or without a batch's key, the
query fails naming the reason (never ciphertext as rows, whatever failOnDataLoss says)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logbroker.client import Client
from segments.batch import ProducerRecord, encode_batch
from segments.compression import Codec
from segments.key_ring import KeyRing, write_ring
from tests.spark_connector.conftest import (
    collected_rows,
    create_topic,
    require_segments_jar,
    ring_file,
    wait_for_checkpoint,
)
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

TOPIC = "sealed-orders"
JVM = "logbroker-segments"
RING = KeyRing({3: os.urandom(32), 4: os.urandom(32)}, 4)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ring_file(tmp_path_factory, RING)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, keys: str) -> Iterator[NodeProcess]:
    require_segments_jar()
    data_dir = str(tmp_path_factory.mktemp("node") / "data")
    process = NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys)
    with process:
        yield process


@pytest.fixture(scope="module")
def produced(node: NodeProcess) -> int:
    create_topic(node, TOPIC, 2, {"segment_bytes": 8192})
    batches = [(p, encode_batch([ProducerRecord(f"v-{codec.name}-{i}".encode() * 3, f"k{i}".encode(),
                                                [("h", b"x")] if i % 3 == 0 else [], 1_700_000_000_000 + i)
                                 for i in range(20)], codec=codec))
               for p in range(2) for codec in Codec for _ in range(3)]
    asyncio.run(_send(node.url, batches))
    wait_for_checkpoint(node, TOPIC)
    return 20 * len(batches)


async def _send(url: str, batches: list[tuple[int, bytes]]) -> None:
    async with Client(url) as client:
        for partition, batch in batches:
            await client.produce_batch(TOPIC, partition, batch)


def _read(spark: Any, fmt: str, path: str, **options: str) -> Any:
    reader = spark.read.format(fmt).option("topic", TOPIC).option("path", path)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_both_readers_read_the_same_rows_with_the_key_ring(spark: Any, node: NodeProcess, keys: str,
                                                           produced: int) -> None:
    stored = b"".join(p.read_bytes() for p in Path(node.data_dir).glob(f"{TOPIC}-*/*.log"))
    assert b"v-NONE-" not in stored  # the uncompressed values are not on disk in the clear
    jvm = collected_rows(_read(spark, JVM, node.data_dir, encryptionKeysFile=keys))
    python = collected_rows(_read(spark, "logbroker", node.data_dir, encryptionKeysFile=keys))
    assert len(jvm) == produced and jvm == python
    assert jvm[(0, 0)][1] == b"v-NONE-0" * 3


def test_without_the_ring_or_a_key_both_readers_fail_the_query(spark: Any, node: NodeProcess, produced: int,
                                                               tmp_path: Path) -> None:
    lacking = str(tmp_path / "lacking")
    write_ring(lacking, KeyRing({3: RING.keys[3]}, 3))
    for fmt in (JVM, "logbroker"):
        for options, reason in (({}, "encryptionKeysFile"), ({"encryptionKeysFile": lacking}, "key 4, which is not in"),
                                ({"failOnDataLoss": "false"}, "encryptionKeysFile")):
            with pytest.raises(Exception, match=reason):
                _read(spark, fmt, node.data_dir, **options).collect()
