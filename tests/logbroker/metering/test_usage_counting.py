"""The usage ledger, the merge into report rows, and the meter (pure: time passed in).

A model check: any sequence of charges at any times, written by several nodes (each restarting
and seeding from what it stored), merges into per-hour and per-day rows equal to plain sums; the
bounds hold whatever the traffic; the meter charges a quota exactly the bytes it counts; and no
code outside the meter charges a quota (so usage and quotas cannot disagree)."""

from __future__ import annotations

import pathlib
import re
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.auth.quotas import QuotaLimits, Quotas
from logbroker.metering.ledger import (
    DAY_MS,
    HOUR_MS,
    KEYS_PER_HOUR_MAX,
    OTHER,
    OVERFLOW_USERS_MAX,
    TOPICS_PER_USER_HOUR_MAX,
    UsageLedger,
)
from logbroker.metering.meter import Meter
from logbroker.metering.report import merge, to_csv

ROOT = pathlib.Path(__file__).resolve().parents[3]
USERS = ("alice", "bob", "carol")
TOPICS = ("a", "b")

charges = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(USERS), st.sampled_from(TOPICS),
                             st.integers(0, 3 * DAY_MS), st.integers(0, 10_000), st.integers(0, 50),
                             st.booleans(), st.booleans()), max_size=60)


@settings(max_examples=150, deadline=None)
@given(charges=charges)
def test_any_charges_on_any_nodes_merge_into_the_plain_sums(charges) -> None:
    """(node, user, topic, time, bytes, records, produce?, restart before it?): every node writes
    after each charge (replacing its hour's record), and a restarted node starts a new ledger
    that seeds each hour from its stored record before writing it, as ``UsageRecorder`` does."""
    store: dict[tuple[int, int], list[list[object]]] = {}
    ledgers: dict[int, UsageLedger] = {}
    seeded: dict[int, set[int]] = defaultdict(set)
    expected: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for node, user, topic, now, size, records, produce, restart in sorted(charges, key=lambda c: c[3]):
        if restart or node not in ledgers:
            ledgers[node], seeded[node] = UsageLedger(), set()
        ledger = ledgers[node]
        if produce:
            ledger.moved(now, user, topic, bytes_in=size, records_in=records, requests=1)
        else:
            ledger.moved(now, user, topic, bytes_out=size, records_out=records, requests=1)
        for hour in ledger.changed_hours():
            if hour not in seeded[node]:
                ledger.seed(hour, store.get((hour, node), []))
                seeded[node].add(hour)
        for hour, rows in ledger.changed():
            store[(hour, node)] = rows
        sums = expected[(now - now % HOUR_MS, user, topic)]
        sums[0 if produce else 2] += size
        sums[1 if produce else 3] += records
        sums[4] += 1
    records_ = [(hour, node, rows) for (hour, node), rows in store.items()]
    hourly = {(r["start_ms"], r["user"], r["topic"]): [r["bytes_in"], r["records_in"], r["bytes_out"],
                                                       r["records_out"], r["requests"]]
              for r in merge(records_, from_ms=0, to_ms=4 * DAY_MS, by="hour")}
    assert hourly == dict(expected)
    daily = {(r["start_ms"], r["user"], r["topic"]): r["bytes_in"] + r["bytes_out"]
             for r in merge(records_, from_ms=0, to_ms=4 * DAY_MS, by="day")}
    by_day: dict[tuple[int, str, str], int] = defaultdict(int)
    for (hour, user, topic), sums in expected.items():
        by_day[(hour - hour % DAY_MS, user, topic)] += sums[0] + sums[2]
    assert daily == dict(by_day)
    alice = merge(records_, from_ms=0, to_ms=4 * DAY_MS, by="hour", user="alice")
    assert all(r["user"] == "alice" for r in alice)


def test_storage_adds_over_nodes_and_a_day_keeps_its_peak() -> None:
    records = [(0, 1, [["alice", "a", 0, 0, 0, 0, 0, 0, 100]]), (0, 2, [["alice", "a", 0, 0, 0, 0, 0, 0, 100]]),
               (HOUR_MS, 1, [["alice", "a", 0, 0, 0, 0, 0, 1500, 300]])]
    hourly = merge(records, from_ms=0, to_ms=DAY_MS, by="hour")
    assert [r["storage_bytes"] for r in hourly] == [200, 300], "each node counts the replicas it holds"
    (daily,) = merge(records, from_ms=0, to_ms=DAY_MS, by="day")
    assert daily["storage_bytes"] == 300 and daily["stream_seconds"] == 1.5
    assert merge(records, from_ms=HOUR_MS + 1, to_ms=DAY_MS, by="hour")[0]["start_ms"] == HOUR_MS


def test_a_flood_of_names_stays_bounded() -> None:
    ledger = UsageLedger()
    for i in range(KEYS_PER_HOUR_MAX + OVERFLOW_USERS_MAX + 500):
        ledger.moved(0, f"user{i}", f"topic{i}", bytes_in=1)  # one pair per user: the global bound
    ((_, rows),) = list(ledger.changed())
    assert len(rows) <= KEYS_PER_HOUR_MAX + OVERFLOW_USERS_MAX + 1
    assert sum(int(r[2]) for r in rows) == KEYS_PER_HOUR_MAX + OVERFLOW_USERS_MAX + 500, "nothing is lost"
    assert [OTHER, OTHER] in [r[:2] for r in rows]
    for hour in range(1, 6):
        ledger.moved(hour * HOUR_MS, "alice", "a", bytes_in=1)
    assert len(ledger._hours) <= 3


def test_one_users_flood_of_names_fills_only_their_own_share() -> None:
    ledger = UsageLedger()
    for i in range(TOPICS_PER_USER_HOUR_MAX + 300):
        ledger.moved(0, "mallory", f"made-up-{i}", bytes_in=1)
    ledger.moved(0, "alice", "orders", bytes_in=5)
    ((_, rows),) = list(ledger.changed())
    mallory = [r for r in rows if r[0] == "mallory"]
    assert len(mallory) == TOPICS_PER_USER_HOUR_MAX + 1 and ["mallory", OTHER] in [r[:2] for r in mallory]
    assert sum(int(r[2]) for r in mallory) == TOPICS_PER_USER_HOUR_MAX + 300
    assert ["alice", "orders", 5] in [r[:3] for r in rows], "another user keeps their own rows"


def test_a_clock_that_goes_back_hours_loses_that_count_and_breaks_nothing() -> None:
    ledger = UsageLedger()
    for hour in (10, 11, 12):
        ledger.moved(hour * HOUR_MS, "alice", "a", bytes_in=1)
    ledger.moved(2 * HOUR_MS, "alice", "a", bytes_in=1)  # older than every hour kept
    assert [hour for hour, _ in ledger.changed()] == [10 * HOUR_MS, 11 * HOUR_MS, 12 * HOUR_MS]


def test_the_meter_charges_a_quota_exactly_what_it_counts() -> None:
    quotas = Quotas(lambda: 0.0)
    meter = Meter(quotas, clock_ms=lambda: 5 * HOUR_MS + 7)
    limits = QuotaLimits(produce_bytes_per_s=1000, fetch_bytes_per_s=1000)
    meter.charge("alice", "produce", limits, 600, topic="a", records=3)
    meter.charge("alice", "fetch", limits, 1500, topic="a", records=2)
    meter.charge("bob", "fetch", None, 99, topic="b")  # quotas off: counted, not charged
    assert quotas.delay_s("alice", "produce", limits) == 0 and quotas.delay_s("alice", "fetch", limits) == 0.5
    assert quotas.delay_s("bob", "fetch", limits) == 0
    rows = {(r[0], r[1]): r[2:] for _, rows in meter.ledger.changed() for r in rows}
    assert rows[("alice", "a")][:5] == [600, 3, 1500, 2, 2]
    assert rows[("bob", "b")][:5] == [0, 0, 99, 0, 1]


def test_a_stream_is_counted_as_a_request_and_its_time_credited_as_it_goes() -> None:
    now = [HOUR_MS - 1000]
    meter = Meter(Quotas(lambda: 0.0), clock_ms=lambda: now[0])
    with meter.streaming("alice", "a"):
        now[0] = HOUR_MS + 500
        meter.credit_streams()
        now[0] = HOUR_MS + 2500
    rows = {hour: {(r[0], r[1]): r for r in rows} for hour, rows in meter.ledger.changed()}
    assert rows[HOUR_MS][("alice", "a")][7] == 1500 + 2000 and rows[0][("alice", "a")][6] == 1


@pytest.mark.parametrize("name", ["=cmd", "+1", "-2", "@x"])
def test_csv_cells_that_look_like_formulas_are_quoted(name: str) -> None:
    text = to_csv(merge([(0, 1, [[name, "t", 1, 0, 0, 0, 0, 0, 0]])], from_ms=0, to_ms=HOUR_MS, by="hour"))
    assert f"'{name},t,0," in text


def test_only_the_meter_charges_quotas() -> None:
    """One place charges quotas and counts usage: a quota charged anywhere else would be usage not
    counted (or counted twice)."""
    offenders = [str(path.relative_to(ROOT)) for package in ("logbroker", "http_api", "grpc_api")
                 for path in (ROOT / package).rglob("*.py")
                 if re.search(r"quotas\.charge\(", path.read_text()) and path.name != "meter.py"]
    assert offenders == []
