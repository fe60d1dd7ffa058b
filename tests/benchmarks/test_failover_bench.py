"""The failover benchmark end to end on a real etcd and three nodes (tiny plan, one short lease
TTL): the leader is killed and comes back, failover.logbroker.json has every figure with its min
and max, the components add up to the totals, and every process and work dir is gone after.
The timeline arithmetic is also checked on its own."""

from __future__ import annotations

import json

import pytest

from benchmarks import failover_bench
from benchmarks.__main__ import main
from benchmarks.etcd_events import KeyEvent
from benchmarks.failover_bench import Attempt, Outcome, ProducerLog, busy_ms, failover_figures

TINY = failover_bench.Plan(reps=2, steady_s=0.3)
FAILOVER = ("lease_expiry", "election", "election_to_first_ack", "client_backoff", "client_requests",
            "acked_request", "visible_in_cluster", "isr_shrink", "failed_produces_count", "produce_requests_count")
FAILBACK = ("ready", "in_isr", "leader", "first_ack", "catch_up", "handover", "election", "leader_to_first_ack",
            "client_backoff", "longest_ack_gap", "failed_produces_count")


@pytest.mark.slow
def test_failover_benchmark_kills_the_leader_and_brings_it_back(tmp_path, monkeypatch):
    monkeypatch.setattr(failover_bench, "QUICK", TINY)
    monkeypatch.setattr(failover_bench, "TTLS_MS", (2_000,))
    out = tmp_path / "out"
    assert main(["failover", "--quick", "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    document = json.loads((out / "failover.logbroker.json").read_text())
    figures, units, params = document["figures"], document["unit"], document["params"]
    assert document["scenario"] == "failover" and params["reps"] == 2 and params["lease_ttls_ms"] == [2000]
    names = [f"ttl2000_failover_{n}" for n in FAILOVER] + [f"ttl2000_failback_{n}" for n in FAILBACK]
    for name in ["ttl2000_failover_ms", *(n if n.endswith("_count") else n + "_ms" for n in names)]:
        assert figures[f"{name}_min"] <= figures[name] <= figures[f"{name}_max"], name
        assert units[name] == ("count" if name.endswith("_count") else "ms")
    assert figures["ttl2000_failover_ms"] > figures["ttl2000_failover_lease_expiry_ms"] > 0
    assert figures["ttl2000_failback_first_ack_ms"] >= figures["ttl2000_failback_leader_ms"] \
        > figures["ttl2000_failback_in_isr_ms"] > figures["ttl2000_failback_ready_ms"] > 0
    reps = params["repetitions"]
    assert len(reps) == 2 and all(r["victim"] != r["new_leader"] for r in reps)
    assert all(r["epochs"][1] == r["epochs"][0] + 1 for r in reps), "failback is one election after the failover"
    assert "## failover" in (out / "REPORT.md").read_text()
    assert not list(tmp_path.glob("failoverbench-*")), "the work dir is removed"


def test_failover_components_add_up_to_the_failover_time():
    log = ProducerLog()
    url, path = "http://127.0.0.1:1", "/v1/topics/t/records"
    # killed at 10.0; tries at 10.1 (refused) and 12.0 (no leader), backing off until 12.5; acknowledged at 12.52
    log.attempts += [Attempt(10.1, 10.11, "POST", url, path, 0), Attempt(12.0, 12.01, "POST", url, path, 503, "1"),
                     Attempt(12.01, 12.03, "GET", url, "/v1/cluster", 200),
                     Attempt(12.5, 12.515, "POST", url, path, 200)]
    log.outcomes += [Outcome(9.9, 9.95), Outcome(10.05, 12.52)]
    expired, elected = KeyEvent(11.8, "leaders", "t", 0, None), KeyEvent(11.9, "leaders", "t", 0, {"node": 2})
    figures = failover_figures("p", 10.0, expired, elected, KeyEvent(12.1, "partitions", "t", 0, {}), 11.95,
                               log.acks(10.0)[0], log)
    assert figures["p_failover_ms"] == pytest.approx(2520)
    assert figures["p_failover_lease_expiry_ms"] + figures["p_failover_election_ms"] \
        + figures["p_failover_election_to_first_ack_ms"] == pytest.approx(figures["p_failover_ms"])
    assert figures["p_failover_client_requests_ms"] == pytest.approx(30)
    assert figures["p_failover_client_backoff_ms"] == pytest.approx(570)
    assert figures["p_failover_acked_request_ms"] == pytest.approx(20)
    assert figures["p_failover_produce_requests_count"] == 3 and figures["p_failover_failed_produces_count"] == 0
    assert log.produce_answers(10.0, 12.52) == {"0": 1, "503 Retry-After 1": 1, "200": 1}


def test_busy_time_merges_overlapping_requests_within_the_window():
    attempts = [Attempt(0.0, 2.0, "GET", "u", "/", 200), Attempt(1.0, 3.0, "GET", "u", "/", 200),
                Attempt(5.0, 6.0, "GET", "u", "/", 200), Attempt(9.0, 12.0, "GET", "u", "/", 200)]
    assert busy_ms(attempts, 1.5, 10.0) == pytest.approx((1.5 + 1.0 + 1.0) * 1000)
    assert busy_ms(attempts, 3.5, 4.5) == 0
