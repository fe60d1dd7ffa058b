"""The per-user usage series of ``/metrics`` (``UsageCollector``): each user's running totals as
counters, at most ``USERS_LABELLED_MAX`` users named (the busiest, by bytes moved) and every other
user summed under ``user="*"``, so no user is left out of the sums and the series stay bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from logbroker.metering import metrics
from logbroker.metering.ledger import OTHER, Counts, UsageLedger
from logbroker.metering.metrics import SERIES, UsageCollector

FIELDS = [field for field, _ in SERIES]


def scrape(collector: UsageCollector) -> dict[str, dict[str, float]]:
    """``{field: {user: value}}`` as Prometheus would read it from the text exposition."""
    registry = CollectorRegistry()
    registry.register(collector)
    out: dict[str, dict[str, float]] = {field: {} for field in FIELDS}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[family.name.removeprefix("logbroker_user_")][sample.labels["user"]] = sample.value
    return out


def test_the_ledgers_totals_reach_the_scrape_per_user() -> None:
    ledger = UsageLedger()
    ledger.moved(0, "alice", "a", bytes_in=100, records_in=2, requests=1)
    ledger.moved(3_600_000 * 5, "alice", "b", bytes_out=40, records_out=1, requests=1)
    ledger.moved(7, "bob", "a", bytes_out=9, records_out=3, requests=1)
    seen = scrape(UsageCollector(lambda: ledger.totals))
    assert seen["bytes_in"] == {"alice": 100, "bob": 0} and seen["bytes_out"] == {"alice": 40, "bob": 9}
    assert seen["records_in"] == {"alice": 2, "bob": 0} and seen["records_out"] == {"alice": 1, "bob": 3}
    assert seen["requests"] == {"alice": 2, "bob": 1}


@settings(max_examples=60, deadline=None)
@given(totals=st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                              st.tuples(*[st.integers(0, 10**9)] * len(FIELDS)), max_size=12),
       labelled_max=st.integers(1, 6))
def test_the_busiest_users_are_named_and_the_rest_summed_under_star(totals, labelled_max) -> None:
    counts = {user: Counts(**dict(zip(FIELDS, values, strict=True))) for user, values in totals.items()}
    original = metrics.USERS_LABELLED_MAX
    metrics.USERS_LABELLED_MAX = labelled_max
    try:
        seen = scrape(UsageCollector(lambda: counts))
    finally:
        metrics.USERS_LABELLED_MAX = original
    for field in FIELDS:
        assert len(seen[field]) <= labelled_max + 1, "bounded: the named users and one '*'"
        assert sum(seen[field].values()) == sum(getattr(c, field) for c in counts.values()), "no user left out"
        assert (OTHER in seen[field]) == (len(counts) > labelled_max)
    named = {user for user in seen["bytes_in"] if user != OTHER}
    moved = {user: c.bytes_in + c.bytes_out for user, c in counts.items()}
    if named and len(counts) > labelled_max:
        assert min(moved[u] for u in named) >= max(moved[u] for u in counts if u not in named), \
            "the users named are the ones who moved the most"
