"""A node keeps every topic and record across a graceful restart (SIGTERM) and across SIGKILL."""

from __future__ import annotations

import pytest

from tests.http_api.conftest import Http
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess


def produce_some(http: Http, topic: str, start: int, count: int) -> None:
    for i in range(start, start + count, 50):
        records = [{"key": f"k{j % 7}", "value": f"v{j}"} for j in range(i, min(i + 50, start + count))]
        http.json("POST", f"/v1/topics/{topic}/records", body={"records": records})


def everything(http: Http, topic: str, partitions: int) -> dict[int, list[str]]:
    out = {}
    for p in range(partitions):
        values, offset = [], 0
        while True:
            body = http.json("GET", f"/v1/topics/{topic}/partitions/{p}/records?offset={offset}")
            values += [r["value"] for r in body["records"]]
            if body["next_offset"] == offset:
                break
            offset = body["next_offset"]
        out[p] = values
    return out


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_keeps_topics_and_records(tmp_path, how):
    data_dir = str(tmp_path / "data")
    with NodeProcess(data_dir, *SMALL_SEGMENTS) as first:
        http = Http(first.url)
        http.json("POST", "/v1/topics", 201, body={"name": "keep", "partitions": 3, "config": {"segment_bytes": 4096}})
        http.json("POST", "/v1/topics", 201, body={"name": "jobs", "kind": "queue"})
        produce_some(http, "keep", 0, 600)
        before = everything(http, "keep", 3)
        if how == "sigterm":
            assert first.stop() == 0
            assert any('"stopped"' in line for line in first.stderr_lines)
        else:
            first.kill()
    assert sum(len(v) for v in before.values()) == 600
    with NodeProcess(data_dir, *SMALL_SEGMENTS) as second:
        http = Http(second.url)
        names = {t["name"] for t in http.json("GET", "/v1/topics")["topics"]}
        assert names == {"keep", "jobs", "jobs.dlq"}
        assert everything(http, "keep", 3) == before
        produce_some(http, "keep", 600, 100)
        after = everything(http, "keep", 3)
        assert sum(len(v) for v in after.values()) == 700
