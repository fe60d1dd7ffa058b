"""REPORT.md: LogBroker's ratio to each peer for every figure, and the issue's targets."""

from __future__ import annotations

import pytest

from benchmarks.report import fmt, ratio_rows, render, summary, systems_of, targets
from tests.benchmarks.support import document


def run_documents() -> list[dict]:
    return [
        document("produce", "logbroker", {"produce_100b_records_per_s": [800_000, 900_000, 1_000_000],
                                          "produce_fsync_100b_records_per_s": [500_000, 600_000, 700_000]}),
        document("produce", "nats", {"produce_100b_records_per_s": [50_000, 60_000, 70_000]}),
        document("produce", "rabbitmq", {"produce_100b_records_per_s": [300_000, 400_000, 500_000]}),
        document("consume", "logbroker", {"consume_100b_records_per_s": [1_000_000] * 3}),
        document("consume", "rabbitmq", {"consume_100b_records_per_s": [800_000] * 3}),
        document("latency", "logbroker", {"latency_5000_100b_p99_ms": [2.0, 3.0, 4.0]}),
        document("latency", "nats", {"latency_5000_100b_p99_ms": [2.5, 2.5, 2.5]}),
        document("latency", "rabbitmq", {"latency_5000_100b_p99_ms": [6.0, 6.0, 6.0]}),
        document("queue", "logbroker", {}, status="not available: no receive endpoint"),
        document("queue", "nats", {"queue_receive_ack_100b_records_per_s": [30_000] * 3}),
    ]


def test_logbroker_comes_first_then_peers_by_name():
    assert systems_of(run_documents()) == ["logbroker", "nats", "rabbitmq"]


def test_every_figure_gets_a_ratio_to_every_peer_from_medians():
    rows = {(r.scenario, r.figure): r for r in ratio_rows(run_documents())}
    produce = rows[("produce", "produce_100b_records_per_s")]
    assert produce.ratios == {("logbroker", "nats"): pytest.approx(900_000 / 60_000),
                              ("logbroker", "rabbitmq"): pytest.approx(900_000 / 400_000)}
    assert produce.values["logbroker"].low == 800_000 and produce.values["logbroker"].high == 1_000_000
    fsync = rows[("produce", "produce_fsync_100b_records_per_s")]
    assert fsync.ratios == {("logbroker", "nats"): None, ("logbroker", "rabbitmq"): None}  # only LogBroker has it
    consume = rows[("consume", "consume_100b_records_per_s")]
    assert consume.values["nats"] is None and consume.ratios[("logbroker", "nats")] is None
    assert consume.ratios[("logbroker", "rabbitmq")] == pytest.approx(1.25)
    queue = rows[("queue", "queue_receive_ack_100b_records_per_s")]
    assert queue.values["logbroker"] is None and queue.ratios[("logbroker", "nats")] is None
    assert next(r.scenario for r in ratio_rows(run_documents())) == "produce"


def test_targets_compare_with_the_best_peer_in_the_right_direction():
    by_label = {t.label: t for t in targets(run_documents())}
    produce = by_label["produce 100 B, records/s"]
    assert produce.peer == "rabbitmq" and produce.ratio == pytest.approx(2.25) and produce.met is True
    consume = by_label["consume 100 B, records/s"]
    assert consume.peer == "rabbitmq" and consume.met is False          # 1.25x < 2x
    latency = by_label["p99 at 5,000 records/s, 100 B"]
    assert latency.peer == "nats" and latency.ratio == pytest.approx(3.0 / 2.5)
    assert latency.met is False                                            # 1.2x > 1x
    missing = by_label["p99 at 5,000 records/s, 1 KiB"]
    assert missing.ratio is None and missing.met is None


def test_a_slow_latency_misses_its_target():
    docs = [document("latency", "logbroker", {"latency_5000_100b_p99_ms": [4.0] * 3}),
            document("latency", "nats", {"latency_5000_100b_p99_ms": [2.5] * 3})]
    (latency,) = [t for t in targets(docs) if t.figure == "latency_5000_100b_p99_ms"]
    assert latency.ratio == pytest.approx(1.6) and latency.met is False


def test_render_shows_tables_ratios_status_and_settings():
    text = render(run_documents(), plots=[("Throughput", "throughput.png")], command="make bench QUICK=1")
    assert "`make bench QUICK=1`" in text
    assert "| produce_100b_records_per_s | records/s | 900,000 (800,000–1,000,000) | 60,000 (50,000–70,000) " \
           "| 400,000 (300,000–500,000) | 15.00× ✓ | 2.25× ✓ |" in text
    assert "| latency_5000_100b_p99_ms | ms | 3 (2–4) | 2.5 | 6 | 1.20× | 0.50× ✓ |" in text
    assert "| produce 100 B, records/s | 2.25× (best peer: rabbitmq) | ≥ 2× | yes |" in text
    assert "| consume 100 B, records/s | 1.25× (best peer: rabbitmq) | ≥ 2× | no |" in text
    assert "not available: no receive endpoint" in text
    assert "| queue_receive_ack_100b_records_per_s | records/s | not available | 30,000 | not run | — | — |" in text
    assert "status = not available: no receive endpoint" in text
    assert "![Throughput](throughput.png)" in text
    assert "run_id" not in text.split("## Targets")[1]


def test_two_documents_for_one_system_and_scenario_are_refused():
    docs = run_documents()
    with pytest.raises(ValueError, match="two documents"):
        render([*docs, docs[0]])
    with pytest.raises(ValueError, match="no result documents"):
        render([])


@pytest.mark.parametrize(("value", "text"), [(1234567.8, "1,234,568"), (123.4, "123"), (12.34, "12.3"),
                                             (0.1234, "0.123"), (0, "0"), (2.0, "2")])
def test_numbers_are_formatted_for_readers(value, text):
    assert fmt(value) == text


def test_the_summary_shows_medians_with_ratios_in_brackets():
    lines = "\n".join(summary(run_documents()))
    assert "| what | logbroker | nats | rabbitmq |" in lines
    assert "| produce 100 B, records/s | 900,000 | 60,000 (15.00×) | 400,000 (2.25×) |" in lines
    assert "| consume 100 B, records/s | 1,000,000 | not run | 800,000 (1.25×) |" in lines
    assert "| queue receive+ack 100 B, records/s | not available | 30,000 | not run |" in lines
    assert "latency at 5,000/s" not in lines     # only p99 was measured: no p50/p99/p99.9 row


def idle_documents(run_id: str = "20261124T090000Z") -> list[dict]:
    params = {"idle_consumers": 500, "idle_memory_consumers": 2000, "command": "python -m benchmarks idle"}
    return [document("idle", "logbroker", {"idle_server_rss_per_consumer_kb": [14.0, 15.0, 16.0],
                                           "idle_produce_100b_records_per_s": [9e5] * 3}, run_id=run_id, **params),
            document("idle", "nats", {"idle_server_rss_per_consumer_kb": [90.0, 92.0, 95.0],
                                      "idle_produce_100b_records_per_s": [5e4] * 3}, run_id=run_id, **params)]


def test_idle_memory_is_reported_per_consumer_with_the_count_measured():
    lines = "\n".join(summary(idle_documents()))
    assert "| server memory per idle consumer (2,000 waiting, fresh server), KB | 15.0 | 92.0 (0.16×) |" in lines
    assert "| produce 100 B with 500 idle consumers, records/s | 900,000 | 50,000 (18.00×) |" in lines
    text = render(idle_documents())
    assert "| idle_server_rss_per_consumer_kb | KB | 15.0 (14.0–16.0) | 92.0 (90.0–95.0) | 0.16× ✓ |" in text
    assert "rss_delta" not in text and "command =" not in text


def test_a_report_of_several_runs_names_each_run_and_its_scenarios():
    text = render([*run_documents(), *idle_documents()])
    assert "Each scenario from its latest run" in text
    assert "| `20261123T090000Z` | 2026-11-23T09:00:00+00:00 | produce, consume, latency, queue | " \
           "`make bench` |" in text
    assert "| `20261124T090000Z` | 2026-11-23T09:00:00+00:00 | idle | `python -m benchmarks idle` |" in text
    single = render(idle_documents())
    assert "Run `20261124T090000Z`, started 2026-11-23T09:00:00+00:00, on" in single
    assert "reproduce with `python -m benchmarks idle`." in single


def kafka_documents() -> list[dict]:
    """A run with LogBroker through its Kafka listener too, where NATS produces faster than RabbitMQ."""
    return [
        document("produce", "logbroker", {"produce_100b_records_per_s": [900_000] * 3}),
        document("produce", "logbroker-kafka", {"produce_100b_records_per_s": [500_000, 600_000, 700_000]}),
        document("produce", "nats", {"produce_100b_records_per_s": [1_000_000] * 3}),
        document("produce", "rabbitmq", {"produce_100b_records_per_s": [200_000] * 3}),
        document("latency", "logbroker", {"latency_5000_100b_p99_ms": [3.0] * 3}),
        document("latency", "logbroker-kafka", {"latency_5000_100b_p99_ms": [5.0] * 3}),
        document("latency", "nats", {"latency_5000_100b_p99_ms": [4.0] * 3}),
        document("latency", "rabbitmq", {"latency_5000_100b_p99_ms": [2.0] * 3}),
    ]


def test_logbroker_through_kafka_is_a_subject_with_its_own_ratios():
    assert systems_of(kafka_documents()) == ["logbroker", "logbroker-kafka", "nats", "rabbitmq"]
    produce = next(r for r in ratio_rows(kafka_documents()) if r.figure == "produce_100b_records_per_s")
    assert produce.ratios[("logbroker-kafka", "rabbitmq")] == pytest.approx(3.0)
    assert produce.ratios[("logbroker", "nats")] == pytest.approx(0.9)
    assert not any(peer == "logbroker-kafka" for _subject, peer in produce.ratios)   # never a peer


def test_the_kafka_listeners_targets_name_their_peer():
    by_label = {t.label: t for t in targets(kafka_documents())}
    produce = by_label["Kafka listener: produce 100 B, records/s"]    # against RabbitMQ, though NATS is faster
    assert (produce.subject, produce.peer, produce.best) == ("logbroker-kafka", "rabbitmq", False)
    assert produce.ratio == pytest.approx(3.0) and produce.met is True
    latency = by_label["Kafka listener: p99 at 5,000 records/s, 100 B"]  # against NATS, though RabbitMQ is lower
    assert latency.peer == "nats" and latency.ratio == pytest.approx(1.25) and latency.met is False
    assert by_label["Kafka listener: consume 100 B, records/s"].ratio is None           # not run
    assert by_label["produce 100 B, records/s"].peer == "nats"                          # LogBroker's: the best peer
    assert [t.subject for t in targets(run_documents())].count("logbroker-kafka") == 0  # not run: no goals


def test_render_gives_the_kafka_listener_its_column_ratios_and_targets():
    text = render(kafka_documents())
    assert "| figure | unit | logbroker | logbroker-kafka | nats | rabbitmq | logbroker ÷ nats | " \
           "logbroker ÷ rabbitmq | logbroker-kafka ÷ nats | logbroker-kafka ÷ rabbitmq |" in text
    assert "| produce_100b_records_per_s | records/s | 900,000 | 600,000 (500,000–700,000) | 1,000,000 | 200,000 " \
           "| 0.90× | 4.50× ✓ | 0.60× | 3.00× ✓ |" in text
    assert "| Kafka listener: produce 100 B, records/s | 3.00× (logbroker-kafka ÷ rabbitmq) | ≥ 2× | yes |" in text
    assert "| Kafka listener: p99 at 5,000 records/s, 100 B | 1.25× (logbroker-kafka ÷ nats) | ≤ 1× | no |" in text
    assert "| Kafka listener: consume 100 B, records/s | not measured | ≥ 2× | — |" in text
    assert "| produce 100 B, records/s | 900,000 | 600,000 | 1,000,000 (logbroker 0.90×; logbroker-kafka 0.60×) " \
           "| 200,000 (logbroker 4.50×; logbroker-kafka 3.00×) |" in text
    assert "## Targets" not in render([d for d in kafka_documents() if d["system"] in ("nats", "rabbitmq")])
