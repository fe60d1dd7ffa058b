"""The direct (segment file) read path over a node's data encrypted at rest, without Spark: the
key ring file opens every batch; without it, or without the batch's key, the read fails and says
so (never ciphertext as records, whatever failOnDataLoss says)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from segments.key_ring import KeyRing, write_ring
from segments.reader import partition_directories
from spark_connector.errors import ReadError
from spark_connector.options import Location
from spark_connector.tasks import ReadTask, read_task
from tests.spark_connector.conftest import create_topic, produce, ring_file, wait_for_checkpoint
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

RING = KeyRing({1: os.urandom(32), 2: os.urandom(32)}, 2)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ring_file(tmp_path_factory, RING)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, keys: str) -> Iterator[NodeProcess]:
    data_dir = str(tmp_path_factory.mktemp("node") / "data")
    process = NodeProcess(data_dir, *SMALL_SEGMENTS, "--encryption-keys-file", keys)
    with process:
        yield process


def _task(directory: str, keys_file: str | None, end: int, *, fail: bool = True) -> ReadTask:
    location = Location(data_dirs=(os.path.dirname(directory),), keys_file=keys_file)
    return ReadTask(location, directory, "sealed", 0, 0, end, fail)


def _values(task: ReadTask) -> list[bytes]:
    return [v for batch in read_task(task) for v in batch.column("value").to_pylist()]


def test_the_direct_reader_opens_sealed_batches_with_the_key_ring(node: NodeProcess, keys: str,
                                                                   tmp_path: Path) -> None:
    create_topic(node, "sealed", 1, {"segment_bytes": 4096})
    sent = [f"secret-{i}" for i in range(200)]
    for i in range(0, 200, 20):
        produce(node, "sealed", [{"value": v, "partition": 0} for v in sent[i:i + 20]])
    end = wait_for_checkpoint(node, "sealed")[0]
    directory = partition_directories(node.data_dir, "sealed")[0]
    assert not any(b"secret-" in Path(directory, n).read_bytes() for n in os.listdir(directory) if n.endswith(".log"))
    assert _values(_task(directory, keys, end)) == [v.encode() for v in sent]
    for fail in (True, False):  # never data loss: the records are there, the key is not given
        with pytest.raises(ReadError, match="encryptionKeysFile"):
            _values(_task(directory, None, end, fail=fail))
    other = str(tmp_path / "other")
    write_ring(other, KeyRing({1: RING.keys[1]}, 1))
    with pytest.raises(ReadError, match="key 2, which is not in"):
        _values(_task(directory, other, end))
    os.chmod(other, 0o644)
    with pytest.raises(ReadError, match="chmod 600"):
        _values(_task(directory, other, end))
