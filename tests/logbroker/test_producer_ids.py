"""Producer identities (``logbroker.producer_ids``) and the de-duplication window's shares
(``logbroker.dedup``), pure: who an identity belongs to, and that one writer's flood of keys
never evicts another writer's entries."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.dedup import DedupWindow
from logbroker.errors import ForbiddenError, InvalidRequestError
from logbroker.producer_ids import (
    KEY_EPOCH,
    Identity,
    check_writer,
    issue,
    key_identity,
    writer_of,
    writer_tag,
)
from segments.batch import NO_PRODUCER_ID, ProducerRecord, encode_batch, parse_header

names = st.text(min_size=1, max_size=40)
keys = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=200)


def _header(producer_id: int, epoch: int):
    return parse_header(encode_batch([ProducerRecord(b"v")], producer_id=producer_id, producer_epoch=epoch,
                                     base_sequence=0))


@given(names, st.integers(min_value=0))
def test_an_issued_identity_carries_its_writers_tag_and_passes_only_for_that_writer(user, seed):
    issued = issue(user, random.Random(seed))
    assert issued.producer_id >= 0 and writer_of(issued.producer_id) == writer_tag(user)
    assert 0 <= issued.producer_epoch < KEY_EPOCH and issued.base_sequence == 0
    check_writer(_header(issued.producer_id, issued.producer_epoch), user)
    other = user + "-other"
    if writer_tag(other) != writer_tag(user):
        with pytest.raises(ForbiddenError):
            check_writer(_header(issued.producer_id, issued.producer_epoch), other)


@given(names, names, keys)
def test_a_key_names_one_identity_per_writer(user, other, key):
    mine = key_identity(user, key)
    assert mine == key_identity(user, key), "deterministic: a retry finds the first write"
    assert mine.producer_epoch == KEY_EPOCH and writer_of(mine.producer_id) == writer_tag(user)
    assert 0 <= mine.base_sequence < 2**31, "fits the header's i32"
    if writer_tag(other) != writer_tag(user):
        assert key_identity(other, key) != mine


def test_distinct_keys_of_one_writer_spread_over_62_bits():
    identities = {key_identity("u", f"k-{n}") for n in range(20_000)}
    assert len(identities) == 20_000
    assert len({i.producer_id for i in identities}) > 19_000 and len({i.base_sequence for i in identities}) > 19_000


def test_batches_without_an_id_pass_and_forged_or_bad_ids_are_refused():
    check_writer(_header(NO_PRODUCER_ID, -1), "anyone")
    own = key_identity("u", "k")
    with pytest.raises(ForbiddenError, match="reserved"):
        check_writer(_header(own.producer_id, KEY_EPOCH), "u")
    with pytest.raises(InvalidRequestError):
        check_writer(_header(-7, 0), "u")
    with pytest.raises(InvalidRequestError, match="printable"):
        key_identity("u", "a key with spaces")


def _id(writer: str, serial: int) -> Identity:
    return Identity((writer_tag(writer) << 31) | serial, 0, 0)


def test_a_writers_flood_evicts_its_own_entries_never_a_smaller_writers():
    window = DedupWindow(window_ms=60_000, entries_max=100)
    for n in range(10):
        window.record(_id("a", n), n, n, now_ms=1_000)
    for n in range(10_000):  # user-b floods keys
        window.record(_id("b", n), 100 + n, 100 + n, now_ms=2_000)
    assert len(window) == 100
    assert all(window.find(_id("a", n), now_ms=2_000) is not None for n in range(10)), "user-a keeps every entry"
    assert window.held_by(_id("b", 0).producer_id) == 90
    assert window.find(_id("b", 9_999), now_ms=2_000) is not None and window.find(_id("b", 0), 2_000) is None


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 50)), max_size=300))
def test_the_window_keeps_its_bound_and_its_per_writer_counts(writes):
    window = DedupWindow(window_ms=60_000, entries_max=20)
    for offset, (writer, serial) in enumerate(writes):
        window.record(_id(writer, serial), offset, offset, now_ms=offset)
        assert len(window) <= 20
        assert sum(window.held_by(_id(w, 0).producer_id) for w in "abcd") == len(window)
    window.expire(now_ms=10**9)
    assert len(window) == 0 and all(window.held_by(_id(w, 0).producer_id) == 0 for w in "abcd")
