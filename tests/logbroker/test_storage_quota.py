"""The storage ledger against a plain model: this node's recount replaces what appends added, a
peer's sums count until they are older than ``peer_stale_s``, and the check refuses exactly the
writes that would pass the limit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbroker.errors import StorageQuotaExceededError
from logbroker.storage_quota import StorageLedger, check_storage

PAYERS = ("ann", "bob")
STALE_S = 10.0
sums = st.dictionaries(st.sampled_from(PAYERS), st.integers(0, 10**12))
ops = st.one_of(
    st.tuples(st.just("recount"), sums),
    st.tuples(st.just("append"), st.sampled_from(PAYERS), st.integers(0, 10**9)),
    st.tuples(st.just("heard"), st.integers(2, 4), sums),
    st.tuples(st.just("wait"), st.floats(0, 8)),
)


@given(st.lists(ops, max_size=40))
def test_used_is_local_plus_fresh_peers(steps):
    ledger = StorageLedger(peer_stale_s=STALE_S)
    now, local, peers = 0.0, {p: 0 for p in PAYERS}, {}
    for step in steps:
        if step[0] == "recount":
            ledger.recounted(step[1])
            local = {p: step[1].get(p, 0) for p in PAYERS}
        elif step[0] == "append":
            ledger.appended(step[1], step[2])
            local[step[1]] += step[2]
        elif step[0] == "heard":
            ledger.heard(step[1], step[2], now)
            peers[step[1]] = (now, step[2])
        else:
            now += step[1]
            ledger.forget(now)
        for payer in PAYERS:
            fresh = sum(s.get(payer, 0) for at, s in peers.values() if now - at <= STALE_S)
            assert ledger.used(payer, now) == local[payer] + fresh


def test_a_node_tells_its_peers_of_its_largest_payers_only():
    ledger = StorageLedger(peer_stale_s=STALE_S)
    ledger.recounted({f"u{i}": i for i in range(1, 11)})
    assert ledger.local_sums(3) == {"u10": 10, "u9": 9, "u8": 8}
    assert len(ledger.local_sums()) == 10


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000))
def test_the_check_refuses_exactly_what_would_pass_the_limit(limit, used, incoming):
    if limit == 0 or used + incoming <= limit:
        check_storage("ann", "t", limit, used, incoming)
        return
    with pytest.raises(StorageQuotaExceededError) as refused:
        check_storage("ann", "t", limit, used, incoming)
    assert refused.value.extra["limit_value"] == limit and refused.value.retriable is False
