"""Consumer groups end to end: a real node and several real client processes.

Three members split six partitions 2/2/2; a member killed without leaving loses its partitions to
the others once its session times out; every record is consumed, none by two members in the same
generation; after the members stop and the node restarts, a new member resumes from the committed
offsets.
"""

from __future__ import annotations

import collections
import time

import pytest

from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess
from tests.support.processes import ClientProcess, wait_for

SESSION_MS = 1500
PARTITIONS = 6
WAIT_S = 60


def produce(http: Http, per_partition: int, tag: str) -> None:
    for p in range(PARTITIONS):
        http.json("POST", "/v1/topics/t/records", body={
            "records": [{"value": f"{tag}-{p}-{i}", "partition": p} for i in range(per_partition)]})


def consumed(workers: list[ClientProcess]) -> list[tuple[str, int, int, int]]:
    """(member, generation, partition, offset) of every record every worker printed."""
    return [(e["member"], e["generation"], p, o) for w in workers for e in w.events("records") for p, o in e["records"]]


def assignment_sizes(http: Http) -> list[int]:
    reply = http.call("GET", "/v1/groups/g")
    if reply.status == 404:
        return []
    described = reply.json()
    return sorted(len(m["assignment"].get("t", [])) for m in described["members"])


def check_no_double_consumption(records: list[tuple[str, int, int, int]]) -> None:
    owners = collections.defaultdict(set)
    for member, generation, partition, offset in records:
        owners[(generation, partition, offset)].add(member)
    doubled = {k: v for k, v in owners.items() if len(v) > 1}
    assert not doubled, f"records consumed by two members in one generation: {list(doubled.items())[:5]}"


@pytest.mark.slow
def test_group_of_three_processes(tmp_path):
    node = NodeProcess(str(tmp_path / "node")).start()
    workers: list[ClientProcess] = []
    try:
        http = Http(node.url)
        http.json("POST", "/v1/topics", expect=201, body={"name": "t", "partitions": PARTITIONS})
        produce(http, 50, "a")
        for _ in range(3):
            workers.append(ClientProcess("tests.support.group_worker", node.url, "g", "t", str(SESSION_MS)))
        wait_for(lambda: assignment_sizes(http) == [2, 2, 2], WAIT_S, "a 2/2/2 split")
        expected = {(p, o) for p in range(PARTITIONS) for o in range(50)}
        wait_for(lambda: {(p, o) for _, _, p, o in consumed(workers)} >= expected, WAIT_S, "the first records")

        wait_for(lambda: all(w.events("joined") for w in workers), WAIT_S, "every worker's start to return")
        victim = workers[0]
        victim_id = victim.events("joined")[0]["member"]
        before = http.json("GET", "/v1/groups/g")
        lost = set(before["assignment"][victim_id]["t"])
        victim.kill()
        killed_at = time.monotonic()

        def moved() -> bool:
            described = http.json("GET", "/v1/groups/g")
            owners = {o["partition"]: o["member_id"] for o in described["offsets"]}
            return len(described["members"]) == 2 and all(owners[p] not in (None, victim_id) for p in lost)

        wait_for(moved, SESSION_MS / 1000 * 3, "the killed member's partitions to move")
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5
        assert assignment_sizes(http) == [3, 3]

        produce(http, 50, "b")
        expected |= {(p, o) for p in range(PARTITIONS) for o in range(50, 100)}
        wait_for(lambda: {(p, o) for _, _, p, o in consumed(workers)} >= expected, WAIT_S, "every record")
        records = consumed(workers)
        assert {(p, o) for _, _, p, o in records} == expected
        check_no_double_consumption(records)

        for worker in workers[1:]:
            assert worker.terminate() == 0, worker.stderr[-10:]
        described = http.json("GET", "/v1/groups/g")
        assert described["state"] == "empty"
        assert {o["partition"]: o["committed_offset"] for o in described["offsets"]} == {p: 100 for p in range(6)}
        assert all(o["lag"] == 0 for o in described["offsets"])
        generation = described["generation"]

        node.stop()
        node = NodeProcess(str(tmp_path / "node")).start()
        http = Http(node.url)
        described = http.json("GET", "/v1/groups/g")
        assert {o["partition"]: o["committed_offset"] for o in described["offsets"]} == {p: 100 for p in range(6)}
        assert described["generation"] >= generation

        produce(http, 10, "c")
        resumed = ClientProcess("tests.support.group_worker", node.url, "g", "t", str(SESSION_MS))
        workers.append(resumed)
        wait_for(lambda: len({(p, o) for _, _, p, o in consumed([resumed])}) >= 60, WAIT_S, "the new records")
        assert {(p, o) for _, _, p, o in consumed([resumed])} == {(p, o) for p in range(6) for o in range(100, 110)}
        assert min(g for _, g, _, _ in consumed([resumed])) > generation
    finally:
        for worker in workers:
            worker.kill()
        node.stop()
        node.kill()
