"""``is_costly_read``: which fetched reads are rendered on the event loop (small, uncompressed) and
which go to the decode pool (large, or holding any compressed batch)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from logbroker.batch_limits import READ_INLINE_BYTES_MAX, is_costly_read
from segments.batch import HEADER_SIZE, ProducerRecord, encode_batch, encode_values
from segments.compression import Codec


def plain(count: int, size: int = 100) -> bytes:
    return encode_values([b"v" * size] * count)


def test_a_few_small_uncompressed_batches_are_rendered_on_the_loop() -> None:
    assert not is_costly_read(b"")
    assert not is_costly_read(plain(5))
    assert not is_costly_read(plain(5) + plain(3) + plain(1))


def test_a_read_past_the_inline_bound_goes_to_the_pool() -> None:
    data = b"".join(plain(10) for _ in range(READ_INLINE_BYTES_MAX // len(plain(10)) + 1))
    assert len(data) > READ_INLINE_BYTES_MAX
    assert is_costly_read(data)


def test_one_compressed_batch_among_plain_ones_sends_the_read_to_the_pool() -> None:
    squeezed = encode_batch([ProducerRecord(None, b"\0" * 1000)] * 100, codec=Codec.ZSTD)
    assert len(squeezed) < 1024  # a few bytes that stand for 100 kB of records
    assert is_costly_read(squeezed)
    assert is_costly_read(plain(2) + squeezed)
    assert is_costly_read(memoryview(plain(2) + squeezed + plain(1)))


def test_a_trailing_piece_of_a_header_ends_the_walk() -> None:
    assert not is_costly_read(plain(2) + plain(1)[:HEADER_SIZE - 1])


@given(st.binary(max_size=READ_INLINE_BYTES_MAX + 64))
def test_any_bytes_get_an_answer_without_an_error(data: bytes) -> None:
    assert is_costly_read(data) in (True, False)
    if len(data) > READ_INLINE_BYTES_MAX:
        assert is_costly_read(data)
