"""Sequence checks of the de-duplication window (pure): a sequenced producer's batches follow each
other without gaps in a partition; retries, other producers and unknown ones are not held to it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.dedup import SEQUENCE_WRAP, DedupWindow
from logbroker.errors import OutOfOrderSequenceError
from logbroker.producer_ids import KEY_EPOCH, SEQUENCED_EPOCH_MIN, Identity, is_sequenced, issue

WINDOW_MS = 1_000


def kafka_producer(seed: int = 1) -> Identity:
    return issue("ann", random.Random(seed), sequenced=True)


def test_kafkas_producers_are_sequenced_and_http_ones_are_not() -> None:
    for seed in range(50):
        assert is_sequenced(issue("ann", random.Random(seed), sequenced=True))
        assert not is_sequenced(issue("ann", random.Random(seed)))
    assert not is_sequenced(Identity(1, KEY_EPOCH, 0)) and is_sequenced(Identity(1, SEQUENCED_EPOCH_MIN, 0))


def test_a_batch_after_a_gap_is_refused_and_the_next_in_line_is_taken() -> None:
    producer = kafka_producer()
    window = DedupWindow(WINDOW_MS)
    window.check_sequence(producer._replace(base_sequence=7), 0)  # unknown producer: may start anywhere
    window.record(producer._replace(base_sequence=7), 100, 102, 0)  # 3 records: 7, 8, 9
    with pytest.raises(OutOfOrderSequenceError, match="starts at sequence 12"):
        window.check_sequence(producer._replace(base_sequence=12), 1)
    with pytest.raises(OutOfOrderSequenceError):
        window.check_sequence(producer._replace(base_sequence=7), 1)  # a retry the window forgot: not in line
    window.check_sequence(producer._replace(base_sequence=10), 1)
    other_epoch = producer._replace(producer_epoch=SEQUENCED_EPOCH_MIN + (producer.producer_epoch + 1) % 100)
    window.check_sequence(other_epoch._replace(base_sequence=99), 1)


def test_sequences_wrap_at_2_to_the_31() -> None:
    producer = kafka_producer()._replace(base_sequence=SEQUENCE_WRAP - 2)
    window = DedupWindow(WINDOW_MS)
    window.record(producer, 0, 3, 0)  # 4 records: 2^31-2, 2^31-1, 0, 1
    window.check_sequence(producer._replace(base_sequence=2), 1)


def test_a_producer_idle_past_the_window_may_start_anywhere() -> None:
    producer = kafka_producer()
    window = DedupWindow(WINDOW_MS)
    window.record(producer, 0, 0, 0)
    window.expire(WINDOW_MS + 1)
    window.check_sequence(producer._replace(base_sequence=500), WINDOW_MS + 1)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=30), st.integers(0, SEQUENCE_WRAP - 1))
def test_batches_in_line_always_pass_and_one_past_the_line_does_not(counts: list[int], start: int) -> None:
    producer = kafka_producer()._replace(base_sequence=start)
    window = DedupWindow(WINDOW_MS)
    offset, sequence = 0, start
    for count in counts:
        key = producer._replace(base_sequence=sequence)
        window.check_sequence(key, 0)
        window.record(key, offset, offset + count - 1, 0)
        offset, sequence = offset + count, (sequence + count) % SEQUENCE_WRAP
    with pytest.raises(OutOfOrderSequenceError):
        window.check_sequence(producer._replace(base_sequence=(sequence + 1) % SEQUENCE_WRAP), 0)
    window.check_sequence(producer._replace(base_sequence=sequence), 0)


def test_http_producers_and_key_writes_are_not_held_to_sequences() -> None:
    window = DedupWindow(WINDOW_MS)
    for key in (issue("ann", random.Random(3)), Identity(5, KEY_EPOCH, 123)):
        window.record(key, 0, 0, 0)
        window.check_sequence(key._replace(base_sequence=key.base_sequence + 50), 1)
