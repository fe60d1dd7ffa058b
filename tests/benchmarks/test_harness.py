"""The harness end to end against LogBroker alone (no peers needed), and its small pieces."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from benchmarks import harness, plan
from benchmarks.__main__ import main
from benchmarks.harness import SYSTEMS, document_for, make_server, rotated
from benchmarks.scenarios import Outcome, points
from benchmarks.servers import LogBrokerKafkaServer
from tests.benchmarks.support import STARTED
from tests.conftest import ROOT

TINY = dataclasses.replace(plan.QUICK, reps=3, records=((100, 3000), (1024, 1000)), latency_rates=(1000,),
                           latency_seconds=0.2, idle_consumers=5, idle_records=((100, 1000), (1024, 500)),
                           idle_window_s=0.1, idle_memory_consumers=20, idle_memory_hold_s=0.1,
                           idle_memory_window_s=0.5, queue_records=((100, 100), (1024, 100)))


def test_every_system_goes_first_in_turn():
    systems = ["logbroker", "nats", "rabbitmq"]
    assert [rotated(systems, rep)[0] for rep in range(4)] == ["logbroker", "nats", "rabbitmq", "logbroker"]
    assert sorted(rotated(systems, 2)) == sorted(systems)


def test_points_cover_sizes_rates_and_fsync():
    assert points("produce", plan.FULL) == [(100, False), (100, True), (1024, False), (1024, True)]
    assert len(points("latency", plan.FULL)) == 6 + 2  # rates x sizes, then one publish at a time per size
    assert points("latency", plan.FULL)[-2:] == [("publish", 100), ("publish", 1024)]
    with pytest.raises(ValueError):
        points("nothing", plan.FULL)


def test_a_document_keeps_the_settings_its_scenario_uses():
    outcome = Outcome(samples={"produce_100b_records_per_s": [1.0, 3.0, 2.0]}, params={"records": {"100": 3}})
    settings = {"client": "c", "durability": "d", "produce": "p", "queue": "q", "tail": "t"}
    d = document_for("produce", "nats", "2.9", STARTED, "20261123T000000Z", True, outcome, settings)
    assert d["figures"]["produce_100b_records_per_s"] == 2.0
    assert d["params"]["produce"] == "p" and "queue" not in d["params"] and "tail" not in d["params"]
    assert d["params"]["run_id"] == "20261123T000000Z"
    status = Outcome(status="not available: none")
    d = document_for("queue", "logbroker", "0.1.0", STARTED, "r", False, status, settings)
    assert d["figures"] == {} and d["params"]["status"] == "not available: none"


def test_unknown_systems_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["produce", "--systems", "logbroker,kafka"])
    assert exc.value.code == 2
    assert "comma-separated subset" in capsys.readouterr().err


def test_the_standard_set_runs_logbroker_through_its_kafka_listener_beside_the_peers(tmp_path, monkeypatch):
    """And several scenarios go in one run."""
    assert SYSTEMS == ("logbroker", "logbroker-kafka", "nats", "rabbitmq")
    server = make_server("logbroker-kafka", str(tmp_path))
    assert isinstance(server, LogBrokerKafkaServer) and server.system == "logbroker-kafka"
    server.stop()
    asked = {}
    monkeypatch.setattr(harness, "run", lambda scenarios, systems, *_a, **_k: asked.update(scenarios=scenarios,
                                                                                            systems=systems))
    assert main(["all", "--quick"]) == 0                   # what `make bench` runs
    assert asked["systems"] == list(SYSTEMS)
    assert main(["produce", "consume", "queues", "produce", "--systems", "logbroker-kafka,rabbitmq"]) == 0
    assert asked == {"scenarios": ("produce", "consume", "queue"), "systems": ["logbroker-kafka", "rabbitmq"]}
    assert main(["latency", "--quick"]) == 0 and asked["scenarios"] == ("latency",)
    with pytest.raises(SystemExit):                        # the replicated clusters have no Kafka variant
        main(["replication", "--systems", "logbroker-kafka"])


def test_the_harness_modules_import_without_peer_clients():
    blocked = "import sys\nfor m in ('nats', 'rstream', 'aio_pika', 'rich', 'tqdm'): sys.modules[m] = None\n"
    code = blocked + ("import benchmarks.__main__, benchmarks.harness, benchmarks.report, benchmarks.plots, "
                      "benchmarks.rabbitmq_server, benchmarks.drivers.logbroker_driver\n"
                      "from benchmarks.progress import Progress\n"
                      "with Progress(1) as p: p.advance('step')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr
    assert "(1/1) step" in result.stderr


@pytest.mark.slow
def test_the_standard_set_runs_against_logbroker_and_writes_results(tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "QUICK", TINY)
    out = tmp_path / "out"
    assert main(["all", "--quick", "--systems", "logbroker", "--out", str(out), "--work-dir", str(tmp_path)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["REPORT.md", "consume.logbroker.json", "idle.logbroker.json", "latency.logbroker.json",
                     "latency.png", "produce.logbroker.json", "queue.logbroker.json", "throughput.png"]
    produce = json.loads((out / "produce.logbroker.json").read_text())
    assert produce["figures"]["produce_100b_records_per_s"] > 0
    assert produce["figures"]["produce_fsync_1024b_records_per_s"] > 0
    consume = json.loads((out / "consume.logbroker.json").read_text())
    assert consume["figures"]["consume_1024b_records_per_s"] > 0
    latency = json.loads((out / "latency.logbroker.json").read_text())
    f = latency["figures"]
    assert 0 < f["latency_1000_100b_p50_ms"] <= f["latency_1000_100b_p99_ms"] <= f["latency_1000_100b_max_ms"]
    assert latency["params"]["incomplete"] == "none: every record sent was received"
    idle = json.loads((out / "idle.logbroker.json").read_text())
    assert idle["params"]["idle_consumers"] == 5 and idle["figures"]["idle_produce_100b_records_per_s"] > 0
    assert idle["params"]["idle_memory_consumers"] == 20 and "fresh server" in idle["params"]["idle_memory"]
    assert idle["unit"]["idle_server_rss_per_consumer_kb"] == "KB"          # measured apart, per consumer
    assert not any("rss_delta" in name for name in idle["figures"])       # never on the shared node
    assert idle["params"]["command"] == "make bench QUICK=1"
    queue = json.loads((out / "queue.logbroker.json").read_text())
    if queue["figures"]:      # the node offers queues with acks: real figures
        assert queue["figures"]["queue_receive_ack_100b_records_per_s"] > 0
    else:                     # it does not: said so, never a made-up figure
        assert queue["params"]["status"].startswith("not available")
    report = (out / "REPORT.md").read_text()
    assert "| produce_100b_records_per_s | records/s |" in report
    assert "| idle_server_rss_per_consumer_kb | KB |" in report
    assert "server memory per idle consumer (20 waiting, fresh server), KB" in report
    assert [p for p in tmp_path.iterdir() if p.name.startswith("bench-")] == []


@pytest.mark.slow
def test_logbroker_through_kafka_is_measured_beside_logbroker_over_http(tmp_path, monkeypatch):
    monkeypatch.setattr(plan, "QUICK", TINY)
    out = tmp_path / "out"
    for scenario in ("produce", "latency"):
        assert main([scenario, "--quick", "--systems", "logbroker,logbroker-kafka", "--out", str(out),
                     "--work-dir", str(tmp_path)]) == 0
    produce = json.loads((out / "produce.logbroker-kafka.json").read_text())
    assert produce["figures"]["produce_100b_records_per_s"] > 0
    assert produce["figures"]["produce_fsync_1024b_records_per_s"] > 0
    assert "librdkafka" in produce["params"]["client"]
    latency = json.loads((out / "latency.logbroker-kafka.json").read_text())
    f = latency["figures"]
    assert 0 < f["latency_1000_100b_p50_ms"] <= f["latency_1000_100b_p99_ms"] <= f["latency_1000_100b_max_ms"]
    assert f["publish_1024b_p50_ms"] > 0
    assert latency["params"]["incomplete"] == "none: every record sent was received"
    report = (out / "REPORT.md").read_text()
    assert "| figure | unit | logbroker | logbroker-kafka |" in report   # its own column, no ratio to itself
    assert "| Kafka listener: produce 100 B, records/s | not measured |" in report   # no RabbitMQ in this run
    assert [p for p in tmp_path.iterdir() if p.name.startswith("bench-")] == []
