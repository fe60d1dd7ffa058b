"""The throughput counters of a real node: records and bytes in, and records out counted from
each read's position (a read from the middle of a batch is sent the whole batch, and counts only
the offsets at or past its position), on the JSON and the zero-copy fetch alike; a single node's
health gauges (no session to lose, nothing offline, its disk's free space)."""

from __future__ import annotations

from tests.support.http import Http
from tests.support.metrics import scrape, value
from tests.support.nodes import NodeProcess

BATCH = "application/vnd.logbroker.batch"


def sample(http: Http, name: str, labels: str = "") -> float:
    return value(scrape(http), name, labels)


def test_records_out_count_from_the_read_position_on_both_fetch_paths(node: NodeProcess):
    http = Http(node.url)
    http.json("POST", "/v1/topics", expect=201, body={"name": "counted", "partitions": 1})
    http.json("POST", "/v1/topics/counted/records", body={"records": [{"value": f"v{i}"} for i in range(5)]})
    topic = '{topic="counted"}'
    assert sample(http, "logbroker_records_in_total", topic) == 5
    records = http.json("GET", "/v1/topics/counted/partitions/0/records?offset=0")["records"]
    assert len(records) == 5
    assert sample(http, "logbroker_records_out_total", topic) == 5
    raw = http.call("GET", "/v1/topics/counted/partitions/0/records?offset=3", headers={"Accept": BATCH})
    assert raw.status == 200 and raw.headers["x-logbroker-next-offset"] == "5"
    assert sample(http, "logbroker_records_out_total", topic) == 5 + 2
    bytes_out = sample(http, "logbroker_bytes_out_total", topic)
    assert bytes_out >= 2 * len(raw.data)
    assert http.json("GET", "/v1/topics/counted/partitions/0/records?offset=5&wait_ms=0")["records"] == []
    assert sample(http, "logbroker_records_out_total", topic) == 7
    assert sample(http, "logbroker_bytes_out_total", topic) == bytes_out


def test_a_single_node_reports_its_session_up_nothing_offline_and_its_disk(node: NodeProcess):
    http = Http(node.url)
    assert sample(http, "logbroker_coordinator_session_up") == 1
    assert sample(http, "logbroker_offline_partitions") == 0
    assert sample(http, "logbroker_under_replicated_partitions") == 0
    assert sample(http, "logbroker_coordinator_session_losses_total") == 0
    assert 0 < sample(http, "logbroker_disk_free_bytes") <= sample(http, "logbroker_disk_total_bytes")
