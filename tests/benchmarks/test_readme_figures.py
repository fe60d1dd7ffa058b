"""The benchmark figures the documentation quotes (the site's performance page, and the README's
status table) come from the committed result files in ``benchmarks/results`` (the files REPORT.md
is built from), within the rounding of the quote.

The peer table on the performance page must be exactly what ``benchmarks.report.summary`` makes
of those files (after a new ``make bench``, paste the block this test prints); every other quoted
figure is declared below with where it comes from, and a quote that is no longer found where it
is declared fails, so a figure cannot drift away from its file unnoticed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from benchmarks import report, results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
PERFORMANCE = os.path.join(ROOT, "docs", "performance.md")
PEERS = {"rabbitmq": "RabbitMQ", "nats": "NATS"}
NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?[kM]?)"
X = "\u00d7"         # the README's multiplication sign
TO = "\u2013"        # and its en dash in ranges


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def readme() -> str:
    return read(README)


def performance() -> str:
    return read(PERFORMANCE)


def text_of(where: str) -> str:
    """The document a quote is declared in: the README's status table, else the performance page."""
    return readme() if where == "status table" else performance()


def latest() -> list[dict[str, Any]]:
    return results.read_latest(results.DEFAULT_OUT_DIR)


def result(name: str) -> dict[str, float]:
    with open(os.path.join(results.DEFAULT_OUT_DIR, name), encoding="utf-8") as f:
        figures: dict[str, float] = json.load(f)["figures"]
        return figures


def target(figure: str, subject: str = report.SUBJECT) -> Callable[[], float]:
    def ratio() -> float:
        [found] = [t for t in report.targets(latest()) if t.figure == figure and t.subject == subject]
        assert found.ratio is not None, f"no ratio for {figure} in the committed results"
        return found.ratio
    return ratio


def best_peer(figure: str) -> Callable[[], str]:
    def peer() -> str:
        [found] = [t for t in report.targets(latest()) if t.figure == figure and t.subject == report.SUBJECT]
        assert found.peer is not None
        return PEERS[found.peer]
    return peer


def figure(file: str, name: str) -> Callable[[], float]:
    return lambda: result(file)[name]


def value_of(quoted: str) -> tuple[float, float]:
    """A quoted number and the half-unit of its last digit (``17.5M``: 17.5e6, 0.05e6)."""
    scale = {"k": 1e3, "M": 1e6}.get(quoted[-1], 1.0)
    digits = quoted.rstrip("kM").replace(",", "")
    decimals = len(digits.partition(".")[2])
    return float(digits) * scale, 0.5 * 10 ** -decimals * scale


# (where the quote is, its pattern with one group per figure, where each figure comes from)
QUOTES: Sequence[tuple[str, str, Sequence[Callable[[], float | str]]]] = (
    ("status table", r"produce " + NUMBER + X + r", consume " + NUMBER + X + r" the best peer; p99 at 5,000/s " + NUMBER
     + X + r" (NATS|RabbitMQ)", (target("produce_100b_records_per_s"), target("consume_100b_records_per_s"),
                     target("latency_5000_100b_p99_ms"), best_peer("latency_5000_100b_p99_ms"))),
    ("status table", r"direct batch reads through the JVM reader are " + NUMBER + X + r" \(" + NUMBER + TO + NUMBER
     + r"\) the HTTP read", (figure("spark.json", "jvm_direct_over_http"),
                             figure("spark.json", "jvm_direct_over_http_min"),
                             figure("spark.json", "jvm_direct_over_http_max"))),
    ("targets", r"produce at 100 B is \*\*" + NUMBER + X + r"\*\* the best peer \((NATS|RabbitMQ)",
     (target("produce_100b_records_per_s"), best_peer("produce_100b_records_per_s"))),
    ("targets", r"consume at 100 B is \*\*" + NUMBER + X + r"\*\* (NATS|RabbitMQ)",
     (target("consume_100b_records_per_s"), best_peer("consume_100b_records_per_s"))),
    ("targets", r"p99 at 5,000 records/s is \*\*" + NUMBER + X + r"\*\*\s+(NATS|RabbitMQ) at 100 B and " + NUMBER
     + X + r" the best peer at 1 KiB", (target("latency_5000_100b_p99_ms"), best_peer("latency_5000_100b_p99_ms"),
                                     target("latency_5000_1024b_p99_ms"))),
    ("targets", r"and p50 \*\*" + NUMBER + X + r"\*\* (NATS|RabbitMQ) at 100 B",
     (target("latency_5000_100b_p50_ms"), best_peer("latency_5000_100b_p50_ms"))),
    ("status table", r"NATS \(p50 " + NUMBER + X + r"\) in the latest committed run",
     (target("latency_5000_100b_p50_ms"),)),
    ("status table", r"librdkafka " + NUMBER + X + " / " + NUMBER + X + r" RabbitMQ streams' produce / consume and p99 "
     r"at 5,000/s " + NUMBER + X + " NATS in one `make bench` run",
     (target("produce_100b_records_per_s", "logbroker-kafka"), target("consume_100b_records_per_s", "logbroker-kafka"),
      target("latency_5000_100b_p99_ms", "logbroker-kafka"))),
    ("LogBroker alone", r"JVM reader \(`logbroker-segments`\) \| " + NUMBER + r" records/s \(" + NUMBER + TO
     + NUMBER + r"\); JVM direct / HTTP \*\*" + NUMBER + r" \(" + NUMBER + TO + NUMBER + r"\)\*\*",
     (figure("spark.json", "jvm_direct_records_per_s"), figure("spark.json", "jvm_direct_records_per_s_min"),
      figure("spark.json", "jvm_direct_records_per_s_max"), figure("spark.json", "jvm_direct_over_http"),
      figure("spark.json", "jvm_direct_over_http_min"), figure("spark.json", "jvm_direct_over_http_max"))),
    ("LogBroker alone", r"`os.write` loop of the same bytes \| ratio " + NUMBER + r" \(" + NUMBER + TO + NUMBER,
     (figure("log.json", "append_ratio"), figure("log.json", "append_ratio_min"),
      figure("log.json", "append_ratio_max"))),
    ("LogBroker alone", r"`pread` loop of the same bytes \| ratio " + NUMBER + r" \(" + NUMBER + TO + NUMBER,
     (figure("log.json", "read_ratio"), figure("log.json", "read_ratio_min"), figure("log.json", "read_ratio_max"))),
    ("LogBroker alone", r"4 partitions \(Python client\) \| " + NUMBER + r" records/s \(" + NUMBER + TO + NUMBER,
     (figure("node.json", "produce_records_per_s"), figure("node.json", "produce_records_per_s_min"),
      figure("node.json", "produce_records_per_s_max"))),
    ("LogBroker alone", r"every record decoded \| " + NUMBER + r" records/s \(" + NUMBER + TO + NUMBER,
     (figure("node.json", "consume_records_per_s"), figure("node.json", "consume_records_per_s_min"),
      figure("node.json", "consume_records_per_s_max"))),
    ("LogBroker alone", r"one process\), p50 / p99 / p99.9 \| " + NUMBER + " / " + NUMBER + " / " + NUMBER + " ms",
     (figure("node.json", "latency_p50_ms"), figure("node.json", "latency_p99_ms"),
      figure("node.json", "latency_p999_ms"))),
    ("LogBroker alone", r"librdkafka produce \(`produce_batch` of 1000, `acks=1`\) / consume \| " + NUMBER
     + r" records/s \(" + NUMBER + TO + NUMBER + r"\) / " + NUMBER + r" records/s \(" + NUMBER + TO + NUMBER
     + r"\); ÷ the binary HTTP path in the same run " + NUMBER + " / " + NUMBER,
     (figure("kafka.json", "kafka_produce"), figure("kafka.json", "kafka_produce_min"),
      figure("kafka.json", "kafka_produce_max"), figure("kafka.json", "kafka_consume"),
      figure("kafka.json", "kafka_consume_min"), figure("kafka.json", "kafka_consume_max"),
      figure("kafka.json", "kafka_over_http_produce_ratio"), figure("kafka.json", "kafka_over_http_consume_ratio"))),
    ("LogBroker alone", r"`linger.ms` 1\), p50 / p99 / p99.9 \| " + NUMBER + " / " + NUMBER + " / " + NUMBER + " ms",
     (figure("kafka.json", "kafka_latency_5000_p50_ms"), figure("kafka.json", "kafka_latency_5000_p99_ms"),
      figure("kafka.json", "kafka_latency_5000_p999_ms"))),
    ("LogBroker alone", r"commit after every poll \| " + NUMBER + r" records/s \(" + NUMBER + TO + NUMBER,
     (figure("groups.json", "consume_records_per_s"), figure("groups.json", "consume_records_per_s_min"),
      figure("groups.json", "consume_records_per_s_max"))),
    ("LogBroker alone", r"batches of 100, 4 partitions \| " + NUMBER + r" messages/s \(" + NUMBER + TO + NUMBER,
     (figure("queue.json", "messages_per_s"), figure("queue.json", "messages_per_s_min"),
      figure("queue.json", "messages_per_s_max"))),
    ("LogBroker alone", r"produce batches of 1000 / of 10, raw consume \| " + NUMBER + " / " + NUMBER + " / "
     + NUMBER, (figure("auth.json", "produce_batch1000_records_per_s_ratio"),
                figure("auth.json", "produce_batch10_records_per_s_ratio"),
                figure("auth.json", "consume_raw_records_per_s_ratio"))),
    ("LogBroker alone", r"2 replicas " + NUMBER + r" records/s, 3 replicas " + NUMBER + r" = " + NUMBER + " / "
     + NUMBER + r" of a lone node at `acks=1` \(" + NUMBER,
     (figure("replication.logbroker.json", "produce_r2_records_per_s"),
      figure("replication.logbroker.json", "produce_r3_records_per_s"),
      figure("replication.logbroker.json", "produce_r2_over_single_throughput_ratio"),
      figure("replication.logbroker.json", "produce_r3_over_single_throughput_ratio"),
      figure("replication.logbroker.json", "produce_single_records_per_s"))),
)


def test_the_peer_table_is_the_summary_of_the_committed_results() -> None:
    block = "\n".join(report.summary(latest()))
    assert block in performance(), f"docs/performance.md's peer table should read, from benchmarks/results:\n{block}"


def test_the_runs_the_performance_page_names_are_the_runs_of_the_committed_results() -> None:
    text = performance()
    match = re.search(r"Latest runs \(([^)]*)\)", text)
    assert match, ("the performance page names the runs its peer table comes from: "
                   "'Latest runs (scenario, ...: `run`; ...)'")
    named: dict[str, str] = {}
    for part in match.group(1).split(";"):
        scenarios, _, run = part.partition(":")
        run_id = run.strip().strip("`")
        for scenario in scenarios.split(","):
            named[scenario.strip()] = run_id
    in_table = {scenario for _label, scenario, _figure in report.SUMMARY}
    committed = {d["scenario"]: d["params"]["run_id"] for d in latest() if d["scenario"] in in_table}
    assert named == committed


@pytest.mark.parametrize(("where", "pattern", "sources"), QUOTES, ids=[f"{w}: {p[:40]}" for w, p, _ in QUOTES])
def test_each_quoted_figure_is_its_result_file_rounded(where, pattern, sources):
    found = re.findall(pattern, text_of(where))
    assert len(found) == 1, f"{where}: the quote /{pattern}/ is there {len(found)} times, not once"
    groups = found[0] if isinstance(found[0], tuple) else (found[0],)
    assert len(groups) == len(sources)
    for quoted, source in zip(groups, sources, strict=True):
        expected = source()
        if isinstance(expected, str):
            assert quoted == expected, f"{where}: the documentation says {quoted}, the results say {expected}"
            continue
        value, half = value_of(quoted)
        assert abs(value - expected) <= half * 1.0001, \
            f"{where}: the documentation quotes {quoted}, the committed results say {expected:.4g}"


def test_a_quote_is_checked_to_the_rounding_it_shows():
    assert value_of("0.56") == (0.56, pytest.approx(0.005))
    assert value_of("17.5M") == (17.5e6, pytest.approx(0.05e6))
    assert value_of("1,615,800") == (1615800.0, 0.5)
    assert value_of("118k") == (118e3, 500.0)
