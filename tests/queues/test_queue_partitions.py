"""Partitions added to a queue: receivers take from them at once, their deliveries are tracked
like the others', and all of it survives a restart."""

from __future__ import annotations

import concurrent.futures

from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess


def receive_all(http: Http, count: int) -> list[dict]:
    got: list[dict] = []
    for _ in range(20):
        got += http.json("POST", "/v1/queues/grown/receive", body={"max_messages": 100})["messages"]
        if len(got) >= count:
            break
    return got


def test_a_queue_grows_and_keeps_its_delivery_state_across_a_restart(tmp_path):
    data = str(tmp_path / "node")
    with NodeProcess(data) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "grown", "kind": "queue", "partitions": 1,
                                                          "config": {"visibility_timeout_ms": 60000}})
        http.json("POST", "/v1/queues/grown/messages", body={"records": [{"value": "old"}]})
        leased_before = receive_all(http, 1)
        assert [m["value"] for m in leased_before] == ["old"]

        grown = http.json("POST", "/v1/topics/grown/partitions", body={"partitions": 3})
        assert grown["partition_count"] == 3
        http.json("POST", "/v1/queues/grown/messages",
                  body={"records": [{"value": f"new-{p}", "partition": p} for p in (1, 2, 2)]})
        fresh = receive_all(http, 3)
        assert sorted((m["partition"], m["value"]) for m in fresh) == [(1, "new-1"), (2, "new-2"), (2, "new-2")]
        acked = http.json("POST", "/v1/queues/grown/ack", body={"receipts": [m["receipt"] for m in fresh[:2]]})
        assert acked["acked"] == 2
        described = http.json("GET", "/v1/queues/grown")
        assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    with NodeProcess(data) as node:
        http = Http(node.url)
        described = {p["partition"]: p for p in http.json("GET", "/v1/queues/grown")["partitions"]}
        assert sum(p["in_flight"] for p in described.values()) == 2, "the old lease and the unacked new one"
        left = http.json("POST", "/v1/queues/grown/ack", body={"receipts": [fresh[2]["receipt"],
                                                                           leased_before[0]["receipt"]]})
        assert left["acked"] == 2
        assert http.json("POST", "/v1/queues/grown/receive", body={"max_messages": 10})["messages"] == []
        assert http.json("GET", "/v1/topics/grown")["partition_count"] == 3


def test_concurrent_growths_leave_the_queue_consistent(tmp_path):
    with NodeProcess(str(tmp_path / "node")) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "grown", "kind": "queue", "partitions": 1})
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            statuses = list(pool.map(lambda n: http.call("POST", "/v1/topics/grown/partitions",
                                                         body={"partitions": n}).status, (4, 6, 5)))
        assert statuses.count(200) >= 1 and set(statuses) <= {200, 400}
        assert http.json("GET", "/v1/topics/grown")["partition_count"] == 6
        assert [p["partition"] for p in http.json("GET", "/v1/queues/grown")["partitions"]] == list(range(6))
        http.json("POST", "/v1/queues/grown/messages",
                  body={"records": [{"value": f"p{p}", "partition": p} for p in range(6)]})
        assert sorted(m["value"] for m in receive_all(http, 6)) == [f"p{p}" for p in range(6)]
        too_many = http.call("POST", "/v1/topics/grown/partitions", body={"partitions": 6})
        assert too_many.status == 400 and "6 partitions" in too_many.data.decode()
