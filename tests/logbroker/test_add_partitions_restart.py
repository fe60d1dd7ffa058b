"""Added partitions survive a restart with their records."""

from __future__ import annotations

from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess


def test_added_partitions_survive_a_restart(tmp_path):
    data = str(tmp_path / "node")
    with NodeProcess(data) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "grow", "partitions": 1})
        http.json("POST", "/v1/topics/grow/records", body={"records": [{"value": "old", "partition": 0}]})
        http.json("POST", "/v1/topics/grow/partitions", body={"partitions": 3})
        http.json("POST", "/v1/topics/grow/records", body={"records": [{"value": "new", "partition": 2}]})
    with NodeProcess(data) as node:
        http = Http(node.url)
        described = http.json("GET", "/v1/topics/grow")
        assert described["partition_count"] == 3
        assert [p["latest_offset"] for p in described["partitions"]] == [1, 0, 1]
        records = http.json("GET", "/v1/topics/grow/partitions/2/records?offset=0")["records"]
        assert [r["value"] for r in records] == ["new"]
