"""A bounded chaos run (the CI one): etcd and three nodes, each in a network namespace where the
machine allows it, 80 s of faults (kills, pauses past the lease, etcd kills, slow disks, and network
cuts where namespaces work) under producers, a consumer, a consumer group, a queue and keyed writers
on a compacted topic. It must end with no acknowledged record lost, none stored twice, the other
checks clean (the compacted topic's replicas agreeing by key, no acknowledged update lost),
compaction seen at work, every kind of process fault dealt and at least 10 leader changes of the
data topic's partitions; the summary is printed. Where namespaces are refused, the summary says the
partition faults were skipped, and so does this test's output (it never counts them as exercised)."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

import pytest

from chaos.nemesis import PROCESS_FAULTS
from chaos.run import COMPACTED, TOPIC, Options, format_summary, run, write_results

FAULT_S = 80.0  # the deck's first round (every kind of fault once) fits in it
ENCRYPTED_FAULT_S = 40.0
# The data topic's values (chaos/workload.py: "<producer>-<partition>-<n>"), as they would show in
# a plain segment file; a chance match in ciphertext is about one in 10^12 per position.
PLAIN_VALUE = re.compile(rb"p[0-9]+-[0-9]+-[0-9]+")


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_bounded_chaos_run_loses_and_duplicates_nothing(tmp_path):
    outcome = run(Options(root=str(tmp_path / "cluster"), duration_s=FAULT_S, seed=17))
    paths = write_results(outcome, str(tmp_path / "results"))
    summary = outcome.summary
    print(format_summary(summary))
    print(f"history and node logs: {paths['history']}, {summary['node_logs']}")
    assert summary["anomalies"]["lost"] == 0, summary["examples"]["lost"]
    assert summary["anomalies"]["duplicated"] == 0, summary["examples"]["duplicated"]
    assert outcome.result.valid, summary["anomalies"]
    assert summary["records_acked"] > 500 and summary["records_in_log"] >= summary["records_acked"]
    assert summary["leader_changes_data_topic"] >= 10, summary["leader_changes_by_partition"]
    assert summary["fault_window_s"][1] - summary["fault_window_s"][0] >= FAULT_S
    assert sum(summary["faults"].values()) >= 10, summary["faults"]
    assert set(PROCESS_FAULTS) <= set(summary["faults"]), summary["faults"]
    assert summary["settled_at_end"] and not summary["workload_errors"] and not summary["workload_stuck"]
    assert set(summary["availability"]["seconds_with_ack"]) == {"0", "1", "2"}, summary["availability"]
    assert summary["queue_drained"] and summary["commits_acked"] > 0 and summary["queue_acked"] > 0
    compacted = summary["compacted_topic"]
    assert compacted["checked"] and compacted["writes_acked"] > 200 and compacted["tombstones_acked"] > 0, compacted
    assert compacted["keys_compared"] > 100 and compacted["replicas_compared"] == 3, compacted
    assert compacted["compaction_passes_seen"] > 0 and compacted["records_in_log"] < compacted[
        "offsets_below_high_watermark"], compacted
    if summary["disk_faults"].startswith("SKIPPED"):
        print(f"WARNING: this run did not exercise slow disks: {summary['disk_faults']}")
    else:
        assert "slow_disk" in summary["faults"], summary["faults"]
    if not summary["partition_faults"].startswith("exercised"):
        assert "SKIPPED" in summary["partition_faults"], summary["partition_faults"]
        print(f"WARNING: this run did not exercise network partitions: {summary['partition_faults']}")


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_chaos_run_with_encryption_at_rest_loses_nothing_and_stores_no_plaintext(tmp_path):
    """Every node with one key ring: followers copy the leaders' ciphertext, a new leader opens what
    an old one sealed, every reader of the workload gets records, and the checker reads each
    replica's files with the ring."""
    root = tmp_path / "cluster"
    outcome = run(Options(root=str(root), duration_s=ENCRYPTED_FAULT_S, seed=23, encryption=True))
    summary = outcome.summary
    print(format_summary(summary))
    assert summary["encryption"] == "on"
    assert summary["anomalies"]["lost"] == 0, summary["examples"]["lost"]
    assert summary["anomalies"]["duplicated"] == 0, summary["examples"]["duplicated"]
    assert outcome.result.valid, summary["anomalies"]
    assert summary["records_acked"] > 200 and summary["records_in_log"] >= summary["records_acked"]
    assert summary["leader_changes_data_topic"] >= 1, summary["leader_changes_by_partition"]
    assert summary["settled_at_end"] and not summary["workload_errors"] and not summary["workload_stuck"]
    assert summary["queue_drained"] and summary["commits_acked"] > 0 and summary["queue_acked"] > 0
    assert summary["compacted_topic"]["replicas_compared"] == 3, summary["compacted_topic"]
    assert len(summary["replicas_read"]) == 3 and all(summary["replicas_read"].values())
    assert glob.glob(os.path.join(root, "node-*", f"{COMPACTED}-*", "*.log"))
    files = glob.glob(os.path.join(root, "node-*", f"{TOPIC}-*", "*.log"))
    assert files
    plain = [f for f in files if PLAIN_VALUE.search(Path(f).read_bytes())]
    assert not plain, f"plaintext records in {plain}"
