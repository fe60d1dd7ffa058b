"""Queues end to end: a real node, real worker processes, a node restart in the middle."""

from __future__ import annotations

import collections

import pytest

from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess
from tests.support.processes import ClientProcess, wait_for

WAIT_S = 120
TOTAL = 20_000


def send(http: Http, queue: str, count: int, partitions: int) -> None:
    for start in range(0, count, 1000):
        http.json("POST", f"/v1/queues/{queue}/messages", body={"records": [
            {"value": f"m{i}", "partition": i % partitions} for i in range(start, min(count, start + 1000))]})


def drained(http: Http, queue: str) -> bool:
    state = http.json("GET", f"/v1/queues/{queue}")
    return all(p["in_flight"] == 0 and p["not_yet_delivered"] == 0 and p["done_below"] == p["next_offset"]
               for p in state["partitions"])


def acked_offsets(workers: list[ClientProcess]) -> list[tuple[int, int]]:
    return [(p, o) for w in workers for e in w.events("acked") for p, o in e["offsets"]]


@pytest.mark.slow
def test_four_workers_drain_ten_thousand_each_acked_once(tmp_path):
    with NodeProcess(str(tmp_path / "node")) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "jobs", "partitions": 4, "kind": "queue"})
        workers = [ClientProcess("tests.support.queue_worker", node.url, "jobs", "30000", "ack") for _ in range(4)]
        try:
            wait_for(lambda: all(w.events("ready") for w in workers), WAIT_S, "every worker to start")
            send(http, "jobs", 10_000, 4)
            wait_for(lambda: drained(http, "jobs"), WAIT_S, "the queue to drain")
        finally:
            for worker in workers:
                worker.terminate()
        acked = acked_offsets(workers)
        counts = collections.Counter(acked)
        assert len(counts) == 10_000 and set(counts.values()) == {1}, "every message acked exactly once"
        assert sum(e["acked"] for w in workers for e in w.events("acked")) == 10_000
        assert sum(1 for w in workers if w.events("acked")) >= 2, "the workers shared the queue"


@pytest.mark.slow
def test_killed_worker_messages_are_redelivered(tmp_path):
    with NodeProcess(str(tmp_path / "node")) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "jobs", "partitions": 2, "kind": "queue"})
        send(http, "jobs", 300, 2)
        holder = ClientProcess("tests.support.queue_worker", node.url, "jobs", "1000", "hold")
        worker = None
        try:
            held = wait_for(lambda: holder.events("received"), WAIT_S, "the holder's batch")[0]["messages"]
            holder.kill()
            worker = ClientProcess("tests.support.queue_worker", node.url, "jobs", "30000", "ack")
            wait_for(lambda: drained(http, "jobs"), WAIT_S, "the queue to drain")
        finally:
            holder.kill()
            if worker is not None:
                worker.terminate()
        assert worker is not None
        redelivered = {(p, o): c for e in worker.events("received") for p, o, c in e["messages"]}
        assert all(redelivered[(p, o)] == 2 for p, o, _ in held), "the killed worker's messages came again"
        assert collections.Counter(acked_offsets([worker])) == {(p, o): 1 for p in range(2) for o in range(150)}


def test_nacked_max_deliveries_times_lands_in_the_dead_letter_topic(tmp_path):
    with NodeProcess(str(tmp_path / "node")) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "jobs", "kind": "queue",
                                                          "config": {"max_deliveries": 3}})
        http.json("POST", "/v1/queues/jobs/messages", body={"records": [{"key": "k", "value": "poison"},
                                                                        {"value": "fine"}]})
        for delivery in (1, 2, 3):
            messages = http.json("POST", "/v1/queues/jobs/receive", body={"max_messages": 10, "wait_ms": 2000})
            poison = [m for m in messages["messages"] if m["value"] == "poison"]
            assert len(poison) == 1 and poison[0]["delivery_count"] == delivery
            fine = [m["receipt"] for m in messages["messages"] if m["value"] == "fine"]
            if fine:
                assert http.json("POST", "/v1/queues/jobs/ack", body={"receipts": fine})["acked"] == 1
            assert http.json("POST", "/v1/queues/jobs/nack", body={"receipts": [poison[0]["receipt"]]})["nacked"] == 1
        dead = http.json("GET", "/v1/topics/jobs.dlq/partitions/0/records?offset=0")["records"]
        assert [(r["key"], r["value"]) for r in dead] == [("k", "poison")]
        headers = {h["name"]: h["value"] for h in dead[0]["headers"]}
        assert headers["x-logbroker-queue"] == "jobs" and headers["x-logbroker-delivery-count"] == "3"
        assert http.json("POST", "/v1/queues/jobs/receive", body={"wait_ms": 200})["messages"] == []
        assert drained(http, "jobs")


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_restart_loses_no_ack_and_no_message(tmp_path, how):
    data = str(tmp_path / "node")
    node = NodeProcess(data).start()
    try:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "jobs", "partitions": 3, "kind": "queue"})
        send(http, "jobs", 900, 3)
        got = http.json("POST", "/v1/queues/jobs/receive", body={"max_messages": 500,
                                                                 "visibility_timeout_ms": 1500})["messages"]
        assert len(got) == 500
        acked = got[:300]
        receipts = [m["receipt"] for m in acked]
        assert http.json("POST", "/v1/queues/jobs/ack", body={"receipts": receipts})["acked"] == 300
        in_flight = {(m["partition"], m["offset"]) for m in got[300:]}
        if how == "sigkill":
            node.kill()
        else:
            assert node.stop() == 0
        node = NodeProcess(data).start()
        http = Http(node.url)
        seen: dict[tuple[int, int], int] = {}
        while len(seen) < 600:
            batch = http.json("POST", "/v1/queues/jobs/receive", body={"max_messages": 100, "wait_ms": 3000})
            assert batch["messages"], f"only {len(seen)} of 600 messages came back"
            for m in batch["messages"]:
                assert (m["partition"], m["offset"]) not in seen
                seen[(m["partition"], m["offset"])] = m["delivery_count"]
            http.json("POST", "/v1/queues/jobs/ack", body={"receipts": [m["receipt"] for m in batch["messages"]]})
        assert not {(m["partition"], m["offset"]) for m in acked} & set(seen), "an acked message came back"
        everything = {(p, o) for p in range(3) for o in range(300)}
        assert set(seen) | {(m["partition"], m["offset"]) for m in acked} == everything
        assert all(seen[k] == 2 for k in in_flight), "in-flight leases survived the restart"
        assert drained(http, "jobs")
    finally:
        node.stop()
        node.kill()


@pytest.mark.slow
def test_workers_across_a_node_kill_lose_no_ack_and_no_message(tmp_path):
    """Four workers drain a queue while the node is killed (SIGKILL) and restarted on the same
    port: every message is acked, none is confirmed acked twice, and none is delivered again
    after an ack was confirmed."""
    data = str(tmp_path / "node")
    node = NodeProcess(data).start()
    workers: list[ClientProcess] = []
    acked_before_kill = 0
    try:
        port = node.url.rsplit(":", 1)[1]
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "jobs", "partitions": 4, "kind": "queue"})
        send(http, "jobs", TOTAL, 4)
        workers = [ClientProcess("tests.support.queue_worker", node.url, "jobs", "2000", "ack") for _ in range(4)]
        wait_for(lambda: len(acked_offsets(workers)) >= 1000, WAIT_S, "the first messages acked")
        node.kill()
        acked_before_kill = len(acked_offsets(workers))
        node = NodeProcess(data, "--http-port", port).start()
        http = Http(node.url)
        wait_for(lambda: drained(http, "jobs"), WAIT_S, "the queue to drain after the restart")
    finally:
        for worker in workers:
            worker.terminate()
        node.stop()
        node.kill()
    confirmed = collections.Counter(acked_offsets(workers))
    assert set(confirmed.values()) == {1}, "no message confirmed acked twice"
    received = [(e["at"], p, o) for w in workers for e in w.events("received") for p, o, _ in e["messages"]]
    assert {(p, o) for _, p, o in received} == {(p, o) for p in range(4) for o in range(TOTAL // 4)}, "nothing lost"
    acked_at = {(p, o): e["at"] for w in workers for e in w.events("acked") for p, o in e["offsets"]}
    late = [(p, o) for at, p, o in received if (p, o) in acked_at and at > acked_at[(p, o)]]
    assert not late, f"delivered again after a confirmed ack: {late[:5]}"
    assert acked_before_kill < TOTAL, "the kill came in the middle of the drain"
    assert len(confirmed) >= TOTAL - 4 * 100, "at most the acks in flight at the kill went unconfirmed"
    assert any(w.events("retry") for w in workers), "the workers saw the node go away"
