"""A subscribe stream's bytes, however the node's messages cut them, decode to the records they
hold, in order, each once (the pure part of ``logbroker.client.subscription``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.client import LogBrokerError
from logbroker.client.subscription import Subscription, whole_batches_end
from segments.batch import ProducerRecord, encode_batch

BATCHES = st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=5), min_size=1, max_size=6)


def _at(values: list[bytes], offset: int) -> bytes:
    return encode_batch([ProducerRecord(value=v) for v in values], base_offset=offset, timestamp_ms=1)


def _stream(batches: list[list[bytes]]) -> tuple[bytes, list[tuple[int, bytes]]]:
    data, records, offset = b"", [], 0
    for values in batches:
        data += _at(values, offset)
        records += [(offset + i, v) for i, v in enumerate(values)]
        offset += len(values)
    return data, records


def _subscription(offset: int = 0) -> Subscription:
    return Subscription(None, "http://node", "t", 0, offset)  # type: ignore[arg-type]


@given(BATCHES, st.lists(st.integers(1, 400), max_size=20), st.data())
def test_messages_cut_anywhere_give_every_record_once_in_order(batches: list[list[bytes]], cuts: list[int],
                                                               data: Any) -> None:
    stream, records = _stream(batches)
    start = data.draw(st.integers(0, len(records) - 1))
    subscription = _subscription(start)
    got: list[tuple[int, bytes | None]] = []
    position = 0
    for size in [*cuts, len(stream)]:
        piece, position = stream[position:position + size], position + size
        if not piece:
            continue
        batch = subscription._take(piece)
        if batch is not None:
            got += list(zip(batch.offsets, batch.values, strict=True))
    assert got == records[start:]
    assert subscription.position == len(records)


def test_the_length_fields_say_where_whole_batches_end() -> None:
    one, two = _at([b"a", b"b"], 0), _at([b"c"], 2)
    assert whole_batches_end(one + two) == len(one) + len(two)
    assert whole_batches_end(one + two[:10]) == len(one)
    assert whole_batches_end(one[:-1]) == 0
    assert whole_batches_end(b"") == 0


def test_a_batch_that_never_ends_is_refused() -> None:
    head = bytearray(_at([b"a"], 0))
    head[8:12] = (1 << 30).to_bytes(4, "little")  # the length field: a batch of a GiB
    subscription = _subscription()
    assert subscription._take(bytes(head)) is None
    with pytest.raises(LogBrokerError, match="a batch of more than"):
        for _ in range(100):
            subscription._take(b"\x00" * (4 * 1024 * 1024))
