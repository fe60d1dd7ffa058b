"""The node's encryption-at-rest policy alone: which topics seal, opening what a log read gives,
and telling from a slice's headers that it can still be sent from the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logbroker.at_rest import HEADER_PEEKS_MAX, AtRest
from logbroker.errors import InvalidRequestError
from segments.batch import ProducerRecord, decode_records, encode_batch, iter_batches
from segments.config import LogConfig
from segments.errors import UndecryptableBatchError
from segments.key_ring import KeyRing, format_ring, write_ring
from segments.log import LogSlice, PartitionLog

RING = KeyRing({1: os.urandom(32)}, 1)


def test_which_topics_seal() -> None:
    keyed, bare = AtRest(RING), AtRest(None)
    assert keyed.wants({}) and keyed.wants(None) and keyed.wants({"encryption": "on"})
    assert not keyed.wants({"encryption": "off"})
    assert not bare.wants({}) and bare.wants({"encryption": "on"})
    with pytest.raises(UndecryptableBatchError, match="no key ring"):
        bare.seal(encode_batch([ProducerRecord(b"v")]))


def test_a_missing_ring_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="encryption_keys_file"):
        AtRest.from_file(str(tmp_path / "absent"))
    path = str(tmp_path / "ring")
    write_ring(path, RING)
    assert AtRest.from_file(path).ring == RING and AtRest.from_file("").ring is None
    assert AtRest.from_file("", format_ring(RING)).ring == RING  # the ring's text, from the environment
    with pytest.raises(InvalidRequestError, match="encryption_keys: LOGBROKER_ENCRYPTION_KEYS"):
        AtRest.from_file("", "current 1\n")


def test_open_names_the_partition_and_leaves_plain_reads_alone() -> None:
    plain = encode_batch([ProducerRecord(b"v")], timestamp_ms=1)
    assert AtRest(RING).open(plain, "t", 3) is plain
    sealed = AtRest(RING).seal(plain)
    assert decode_records(memoryview(AtRest(RING).open(sealed, "t", 3)))[0].value == b"v"
    with pytest.raises(UndecryptableBatchError, match="partition 3 of 't'"):
        AtRest(KeyRing({2: os.urandom(32)}, 2)).open(sealed, "t", 3)


def _log(tmp_path: Path, batches: list[bytes | memoryview]) -> PartitionLog:
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig())
    for batch in batches:
        log.append(batch, leader_epoch=0)
    return log


def _slice(log: PartitionLog, offset: int, size_bytes_max: int, *, offset_max: int | None = None) -> LogSlice:
    piece = log.slice(offset, size_bytes_max, offset_max=offset_max)
    assert piece is not None
    return piece


def test_a_slice_of_plain_batches_is_sent_from_the_file_and_one_with_a_sealed_batch_is_not(tmp_path: Path) -> None:
    at_rest = AtRest(RING)
    plain: list[bytes | memoryview] = [encode_batch([ProducerRecord(b"p%d" % i)]) for i in range(3)]
    log = _log(tmp_path, [*plain, at_rest.seal(encode_batch([ProducerRecord(b"s")])), plain[0]])
    try:
        with _slice(log, 0, 3 * len(plain[0]), offset_max=3) as first:
            assert at_rest.slice_is_plain(first)
        with _slice(log, 0, 1 << 20) as whole:
            assert [h.base_offset for _, h in iter_batches(whole.read())] == [0, 1, 2, 3, 4]
            assert not at_rest.slice_is_plain(whole)
        with _slice(log, 4, 1 << 20) as after:
            assert at_rest.slice_is_plain(after)
    finally:
        log.close()


def test_a_slice_of_more_batches_than_it_peeks_at_is_read(tmp_path: Path) -> None:
    log = _log(tmp_path, [memoryview(encode_batch([ProducerRecord(b"p")])) for _ in range(HEADER_PEEKS_MAX + 1)])
    try:
        with _slice(log, 0, 1 << 20) as whole:
            assert not AtRest(RING).slice_is_plain(whole)
        with _slice(log, 1, 1 << 20) as fewer:
            assert AtRest(RING).slice_is_plain(fewer)
    finally:
        log.close()
