"""Result files round-trip through disk by run; plots are real PNG files."""

from __future__ import annotations

import json

import pytest

from benchmarks.plots import latency_plot, throughput_plot, write_plots
from benchmarks.results import read_latest, read_run, write_document
from benchmarks.schema import ResultSchemaError
from tests.benchmarks.support import document

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_latest_run_is_read_back_whole(tmp_path):
    old = document("produce", "nats", {"produce_100b_records_per_s": [1.0]}, run_id="20261122T000000Z")
    new = [document("produce", s, {"produce_100b_records_per_s": [2.0]}, run_id="20261123T000000Z")
           for s in ("logbroker", "nats")]
    write_document(str(tmp_path), old, per_system=True)   # overwritten by the newer nats file
    paths = [write_document(str(tmp_path), d, per_system=True) for d in new]
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == ["produce.logbroker.json", "produce.nats.json"]
    assert read_run(str(tmp_path)) == new
    assert read_run(str(tmp_path), "20261122T000000Z") == []
    write_document(str(tmp_path), document("consume", "rabbitmq", {"consume_100b_records_per_s": [3.0]},
                                           run_id="20261122T000000Z"), per_system=True)
    assert [d["system"] for d in read_run(str(tmp_path), "20261122T000000Z")] == ["rabbitmq"]
    assert read_run(str(tmp_path / "empty")) == []


def test_each_scenario_is_read_from_its_latest_run(tmp_path):
    full = [document(scenario, system, {f"{scenario}_100b_records_per_s": [1.0]}, run_id="20261123T000000Z")
            for scenario in ("produce", "idle") for system in ("logbroker", "nats")]
    rerun = document("idle", "logbroker", {"idle_server_rss_per_consumer_kb": [15.0]}, run_id="20261124T000000Z")
    for d in [*full, rerun]:
        write_document(str(tmp_path), d, per_system=True)
    latest = read_latest(str(tmp_path))
    assert sorted((d["scenario"], d["system"], d["params"]["run_id"]) for d in latest) == [
        ("idle", "logbroker", "20261124T000000Z"),          # the rerun of idle, alone: NATS's idle figure
        ("produce", "logbroker", "20261123T000000Z"),       # is from another run and never beside it
        ("produce", "nats", "20261123T000000Z")]
    assert read_latest(str(tmp_path / "empty")) == []


def test_figures_keep_the_order_they_were_measured_in(tmp_path):
    names = ["latency_1000_100b_p50_ms", "latency_1000_100b_p99_ms", "latency_1000_100b_p999_ms"]
    write_document(str(tmp_path), document("latency", "nats", {n: [1.0] for n in names}), per_system=True)
    (read,) = read_latest(str(tmp_path))
    assert [n for n in read["figures"] if not n.endswith(("_min", "_max"))] == names


def test_a_malformed_result_file_stops_the_report(tmp_path):
    d = document("produce", "nats", {"produce_100b_records_per_s": [1.0, 2.0, 3.0]})
    d["figures"]["produce_100b_records_per_s"] = 10.0
    (tmp_path / "produce.nats.json").write_text(json.dumps(d))
    with pytest.raises(ResultSchemaError, match="outside"):
        read_run(str(tmp_path))


def test_an_invalid_document_is_never_written(tmp_path):
    d = document("produce", "nats", {"produce_100b_records_per_s": [1.0]})
    d["unit"].pop("produce_100b_records_per_s")
    with pytest.raises(ResultSchemaError):
        write_document(str(tmp_path), d, per_system=True)
    assert list(tmp_path.iterdir()) == []


def plotted_run() -> list[dict]:
    lat = {f"latency_{rate}_{size}b_{p}_ms": [0.5 * (i + 1)] * 3
           for rate in (1000, 5000) for size in (100, 1024) for i, p in enumerate(("p50", "p90", "p99", "p999"))}
    return [document("produce", "logbroker", {"produce_100b_records_per_s": [9e5, 1e6, 1.1e6]}),
            document("produce", "nats", {"produce_100b_records_per_s": [6e4] * 3}),
            document("latency", "logbroker", lat), document("latency", "rabbitmq", lat)]


def test_plots_are_png_files(tmp_path):
    made = write_plots(plotted_run(), str(tmp_path), rates=[1000, 5000])
    assert made == [("Throughput", "throughput.png"), ("Latency percentiles", "latency.png")]
    for _, name in made:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000


def test_nothing_to_plot_writes_nothing(tmp_path):
    docs = [document("idle", "logbroker", {"idle_connect_s": [0.1]})]
    assert throughput_plot(docs, str(tmp_path / "t.png")) is None
    assert latency_plot(docs, str(tmp_path / "l.png"), rates=[1000]) is None
    assert write_plots(docs, str(tmp_path), rates=[1000]) == []
    assert list(tmp_path.iterdir()) == []
