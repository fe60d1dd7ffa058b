"""Three real nodes on a real etcd: membership from leases, balanced placement, any node
answers (produce and fetch forwarded to the leader), users and grants cluster-wide, a killed node
seen dead and alive again, etcd restarted under the cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.support.auth import ADMIN, ADMIN_PASSWORD, METRICS_TOKEN, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until
from tests.support.etcd import free_port
from tests.support.metrics import requests_total

BATCH = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("cluster"))) as running:
        yield running



def alive_nodes(cluster: Cluster, via: int, headers: dict[str, str]) -> dict[int, bool]:
    answer = cluster.http(via).json("GET", "/v1/cluster", headers=headers)
    return {n["node_id"]: n["alive"] for n in answer["nodes"]}


def describe(cluster: Cluster, via: int, topic: str, headers: dict[str, str]) -> Any:
    return cluster.http(via).json("GET", f"/v1/topics/{topic}", headers=headers)


def test_every_node_lists_the_three_nodes_alive(cluster: Cluster, token: dict[str, str]):
    for via in (1, 2, 3):
        answer = cluster.http(via).json("GET", "/v1/cluster", headers=token)
        assert answer["node_id"] == via
        assert {n["node_id"]: n["alive"] for n in answer["nodes"]} == {1: True, 2: True, 3: True}
        urls = {n["node_id"]: n["http_url"] for n in answer["nodes"]}
        assert urls == {i: cluster.nodes[i].url for i in (1, 2, 3)}


def test_every_node_says_etcd_coordinates_it_and_reports_its_session(cluster: Cluster, token: dict[str, str]):
    for via in (1, 2, 3):
        assert cluster.http(via).json("GET", "/v1/cluster", headers=token)["coordinator"] == "etcd"
        ready = cluster.http(via).json("GET", "/readyz", headers=token)
        assert ready["coordinator"] == {"kind": "etcd", "session_alive": True}
        assert cluster.http(via).json("GET", "/readyz") == {"ready": True}, "anyone else: the bare status"


def test_an_unauthenticated_group_call_creates_nothing(cluster: Cluster, token: dict[str, str]):
    for path in ("/v1/groups", "/v1/groups/x/members"):
        reply = cluster.http(2).call("GET" if path == "/v1/groups" else "POST", path, body={"topics": ["t"]},
                                     headers={"Authorization": "Bearer forged"})
        assert reply.status == 401
    topics = [t["name"] for t in cluster.http(1).json("GET", "/v1/cluster", headers=token)["topics"]]
    assert "__consumer_offsets" not in topics


def test_a_replicated_topic_is_spread_two_leaders_per_node(cluster: Cluster, token: dict[str, str]):
    created = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "spread", "partitions": 6, "replication_factor": 2})
    partitions = created["partitions"]
    assert len(partitions) == 6
    assert Counter(p["leader"] for p in partitions) == {1: 2, 2: 2, 3: 2}
    for p in partitions:
        assert len(set(p["replicas"])) == 2 and p["leader"] == p["replicas"][0]
    assert Counter(n for p in partitions for n in p["replicas"]) == {1: 4, 2: 4, 3: 4}
    for via in (2, 3):  # every node sees the same placement
        seen = wait_until(lambda v=via: describe(cluster, v, "spread", token))
        assert [p["replicas"] for p in seen["partitions"]] == [p["replicas"] for p in partitions]


def test_produce_and_fetch_through_any_node_reach_the_leader(cluster: Cluster, token: dict[str, str]):
    cluster.http(2).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "anynode", "partitions": 3, "replication_factor": 1})
    expected: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for via in (1, 2, 3):
        for partition in (0, 1, 2):
            value = f"via-{via}-to-{partition}"
            answer = cluster.http(via).json("POST", "/v1/topics/anynode/records?acks=all", headers=token,
                                            body={"records": [{"value": value, "partition": partition}]})
            assert answer["offsets"] == [{"partition": partition, "offset": len(expected[partition])}]
            expected[partition].append(value)
    unkeyed = cluster.http(3).json("POST", "/v1/topics/anynode/records?acks=all", headers=token,
                                   body={"records": [{"value": f"spread-{i}"} for i in range(5)]})
    for entry, i in zip(unkeyed["offsets"], range(5), strict=True):
        assert entry["offset"] == len(expected[entry["partition"]])
        expected[entry["partition"]].append(f"spread-{i}")
    leaders = {p["partition"]: p["leader"] for p in describe(cluster, 1, "anynode", token)["partitions"]}
    for via in (1, 2, 3):
        for partition in (0, 1, 2):
            path = f"/v1/topics/anynode/partitions/{partition}/records?offset=0"
            answer = cluster.http(via).json("GET", path, headers=token)
            assert [r["value"] for r in answer["records"]] == expected[partition]
            assert answer["high_watermark"] == len(expected[partition])
            raw = cluster.http(via).call("GET", path, headers={**token, "Accept": BATCH})
            direct = cluster.http(leaders[partition]).call("GET", path, headers={**token, "Accept": BATCH})
            assert raw.status == 200 and raw.data and raw.data == direct.data
            assert raw.headers["x-logbroker-high-watermark"] == str(len(expected[partition]))
            offsets = cluster.http(via).json("GET", f"/v1/topics/anynode/partitions/{partition}/offsets?at=latest",
                                             headers=token)
            assert offsets == {"partition": partition, "offset": len(expected[partition])}
    described = describe(cluster, 1, "anynode", token)["partitions"]
    assert [p["latest_offset"] for p in described] == [len(expected[p]) for p in (0, 1, 2)]


def test_errors_through_a_forwarding_node_are_the_leaders_errors(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "errs", "partitions": 3, "replication_factor": 1})
    leaders = {p["partition"]: p["leader"] for p in describe(cluster, 1, "errs", token)["partitions"]}
    partition = next(p for p, leader in leaders.items() if leader != 1)
    reply = cluster.http(1).call("GET", f"/v1/topics/errs/partitions/{partition}/records?offset=5", headers=token)
    assert reply.status == 416 and reply.json()["code"] == "offset_out_of_range"
    assert (reply.json()["earliest"], reply.json()["latest"]) == (0, 0)
    assert cluster.http(1).call("GET", "/v1/topics/errs/partitions/7/records?offset=0", headers=token).status == 404
    assert cluster.http(1).call("GET", "/v1/topics/nope/partitions/0/records?offset=0", headers=token).status == 404


def test_a_long_poll_through_another_node_wakes_on_the_leaders_append(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "poll", "partitions": 1, "replication_factor": 1})
    leader = describe(cluster, 1, "poll", token)["partitions"][0]["leader"]
    other = next(n for n in (1, 2, 3) if n != leader)
    result: dict[str, Any] = {}

    def poll() -> None:
        result["answer"] = cluster.http(other).json(
            "GET", "/v1/topics/poll/partitions/0/records?offset=0&wait_ms=10000", headers=token)

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(0.5)
    cluster.http(leader).json("POST", "/v1/topics/poll/records?acks=all", headers=token,
                              body={"records": [{"value": "woke", "partition": 0}]})
    waiter.join(timeout=15)
    assert not waiter.is_alive()
    assert [r["value"] for r in result["answer"]["records"]] == ["woke"]


def test_users_tokens_and_grants_work_on_every_node(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/users", expect=201, headers=token,
                         body={"username": "carol", "password": "carol-password-1", "role": "user"})
    cluster.http(1).json("POST", "/v1/users", expect=201, headers=token,
                         body={"username": "dave", "password": "dave-password-1", "role": "user"})
    carol = bearer(wait_until(lambda: login(cluster.http(2), "carol", "carol-password-1")))
    cluster.http(3).json("POST", "/v1/topics", expect=201, headers=carol,
                         body={"name": "carols", "partitions": 1, "replication_factor": 1})
    dave = bearer(login(cluster.http(3), "dave", "dave-password-1"))
    for via in (1, 2, 3):  # a token from node 3 is good everywhere; dave may not read carol's topic
        assert cluster.http(via).call("GET", "/v1/topics/carols/partitions/0/records?offset=0",
                                      headers=dave).status == 403
    cluster.http(1).json("PUT", "/v1/topics/carols/acl", headers=carol, body={"user": "dave", "permissions": ["read"]})
    for via in (1, 2, 3):
        wait_until(lambda v=via: cluster.http(v).call("GET", "/v1/topics/carols/partitions/0/records?offset=0",
                                                      headers=dave).status == 200, timeout_s=5)


def test_a_write_stored_on_some_partitions_only_is_not_called_retriable(cluster: Cluster, token: dict[str, str]):
    created = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "partial", "partitions": 3, "replication_factor": 1})
    leaders = {p["partition"]: p["leader"] for p in created["partitions"]}
    assert sorted(leaders.values()) == [1, 2, 3]
    os.kill(cluster.nodes[3].pid, signal.SIGSTOP)
    try:
        reply = cluster.http(1).call("POST", "/v1/topics/partial/records?acks=all", headers=token,
                                     body={"records": [{"value": f"v{p}", "partition": p} for p in (0, 1, 2)]})
    finally:
        os.kill(cluster.nodes[3].pid, signal.SIGCONT)
    problem = reply.json()
    assert reply.status == 502 and problem["code"] == "partial_write" and problem["retriable"] is False, problem
    stored = {r["partition"]: r["offset"] for r in problem["results"] if "offset" in r}
    failed = [r for r in problem["results"] if "code" in r]
    assert [r["partition"] for r in failed] == [p for p, n in leaders.items() if n == 3]
    assert failed[0]["code"] == "forward_outcome_unknown"
    assert set(stored) == {p for p, n in leaders.items() if n != 3}
    for p in stored:
        assert values(cluster, 1, "partial", p, token) == [f"v{p}"]
    wait_until(lambda: alive_nodes(cluster, 1, token) == {1: True, 2: True, 3: True} and all(
        p["leader"] != -1 for p in describe(cluster, 1, "partial", token)["partitions"]))


def test_a_killed_node_is_dead_within_the_lease_and_alive_after_a_restart(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "survive", "partitions": 3, "replication_factor": 1})
    for partition in (0, 1, 2):
        cluster.http(1).json("POST", "/v1/topics/survive/records?acks=all", headers=token,
                             body={"records": [{"value": f"kept-{partition}", "partition": partition}]})
    os.kill(cluster.nodes[3].pid, signal.SIGKILL)
    cluster.nodes[3].kill()
    killed = time.monotonic()
    wait_until(lambda: alive_nodes(cluster, 1, token) == {1: True, 2: True, 3: False},
               timeout_s=LEASE_TTL_MS / 1000 + 5)
    assert time.monotonic() - killed <= LEASE_TTL_MS / 1000 + 5
    assert alive_nodes(cluster, 2, token)[3] is False
    on_3 = [p["partition"] for p in describe(cluster, 1, "survive", token)["partitions"] if p["replicas"] == [3]]
    for partition in on_3:  # its partitions have no leader (no replica to take over): a retriable 503
        reply = cluster.http(1).call("GET", f"/v1/topics/survive/partitions/{partition}/records?offset=0",
                                     headers=token)
        assert reply.status == 503 and reply.json()["code"] in ("no_leader", "not_leader")
        assert "retry-after" in reply.headers
    cluster.start(3)
    wait_until(lambda: alive_nodes(cluster, 1, token) == {1: True, 2: True, 3: True})
    for partition in (0, 1, 2):
        answer = wait_until(lambda p=partition: cluster.http(2).json(
            "GET", f"/v1/topics/survive/partitions/{p}/records?offset=0", headers=token))
        assert [r["value"] for r in answer["records"]] == [f"kept-{partition}"]


def test_a_topic_deleted_while_a_node_was_down_leaves_nothing_for_its_successor(cluster: Cluster,
                                                                                token: dict[str, str]):
    created = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "reborn", "partitions": 3, "replication_factor": 1})
    on_3 = next(p["partition"] for p in created["partitions"] if p["leader"] == 3)
    cluster.http(1).json("POST", "/v1/topics/reborn/records?acks=all", headers=token,
                         body={"records": [{"value": "OLD-SECRET", "partition": on_3}]})
    os.kill(cluster.nodes[3].pid, signal.SIGKILL)
    cluster.nodes[3].kill()
    wait_until(lambda: alive_nodes(cluster, 1, token)[3] is False, timeout_s=LEASE_TTL_MS / 1000 + 5)
    assert cluster.http(1).call("DELETE", "/v1/topics/reborn", headers=token).status == 204
    cluster.start(3)
    wait_until(lambda: all(alive_nodes(cluster, v, token) == {1: True, 2: True, 3: True} for v in (1, 2)))
    assert not any(name.startswith("reborn-") for name in os.listdir(cluster.nodes[3].data_dir))
    again = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                 body={"name": "reborn", "partitions": 3, "replication_factor": 1})
    for p in again["partitions"]:
        assert values(cluster, 2, "reborn", p["partition"], token) == []
        assert p["latest_offset"] == 0


def test_the_cluster_keeps_serving_across_an_etcd_restart(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "etcdrestart", "partitions": 3, "replication_factor": 1})
    for partition in (0, 1, 2):
        cluster.http(2).json("POST", "/v1/topics/etcdrestart/records?acks=all", headers=token,
                             body={"records": [{"value": "before", "partition": partition}]})
    leaders = {p["partition"]: p["leader"] for p in describe(cluster, 1, "etcdrestart", token)["partitions"]}
    cluster.etcd.kill()

    def write_refused() -> bool:  # fencing: once its lease may have lapsed, a leader acknowledges nothing
        reply = cluster.http(leaders[0]).call("POST", "/v1/topics/etcdrestart/records?acks=all", headers=token,
                                              body={"records": [{"value": "during", "partition": 0}]})
        return reply.status == 503 and reply.json()["code"] == "not_leader"

    wait_until(write_refused, timeout_s=LEASE_TTL_MS / 1000 + 5)
    for partition in (0, 1, 2):  # reads the leaders can serve go on
        answer = cluster.http(leaders[partition]).json(
            "GET", f"/v1/topics/etcdrestart/partitions/{partition}/records?offset=0", headers=token)
        assert [r["value"] for r in answer["records"]][:1] == ["before"]
    cluster.etcd.restart()
    wait_until(lambda: all(alive_nodes(cluster, v, token) == {1: True, 2: True, 3: True} for v in (1, 2, 3)))
    statuses: list[int] = []

    def create_after() -> bool:  # a first try may be cut short by the reconnect (then it exists: 409)
        reply = cluster.http(3).call("POST", "/v1/topics", headers=token,
                                     body={"name": "after", "partitions": 3, "replication_factor": 1})
        statuses.append(reply.status)
        return reply.status in (201, 409)

    wait_until(create_after)
    assert set(statuses) <= {201, 409, 503}, statuses
    for partition in (0, 1, 2):  # the old topic's leaders write again
        wait_until(lambda p=partition: cluster.http(1).call(
            "POST", "/v1/topics/etcdrestart/records?acks=all", headers=token,
            body={"records": [{"value": "after", "partition": p}]}).status == 200)
    for via in (1, 2):
        wait_until(lambda v=via: describe(cluster, v, "after", token))
        answer = cluster.http(via).json("POST", "/v1/topics/after/records?acks=all", headers=token,
                                        body={"records": [{"value": "x", "partition": 1}]})
        assert answer["offsets"][0]["partition"] == 1


def test_a_node_whose_etcd_cannot_be_reached_never_reports_ready(tmp_path):
    dead = f"etcd://127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "logbroker", "serve", "--auth", "off", "--http-port", "0", "--rpc-port", "0",
         "--data-dir", str(tmp_path), "--coordinator", dead],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=120)
    assert "logbroker ready" not in proc.stdout
    assert proc.returncode != 0
    assert "coordinator" in proc.stderr and dead.removeprefix("etcd://") in proc.stderr


def test_the_python_client_bootstraps_past_a_dead_url_and_reads_back_everything(cluster: Cluster):
    import asyncio

    from logbroker.client import Client, Consumer, Producer
    from tests.support.fake_node import closed_port_url

    async def run() -> dict[int, list[bytes]]:
        urls = [closed_port_url(), cluster.nodes[2].url]
        async with Client(urls, username=ADMIN, password=ADMIN_PASSWORD) as client:
            await client.create_topic("viaclient", partitions=6, replication_factor=2)
            async with Producer(client, linger_ms=1) as producer:
                for i in range(120):
                    await producer.send("viaclient", f"v{i}".encode(), partition=i % 6)
            consumer = Consumer(client, wait_ms=100)
            consumer.assign([("viaclient", p) for p in range(6)])
            seen: dict[int, list[bytes]] = {p: [] for p in range(6)}
            for _ in range(200):
                for record in await consumer.poll():
                    seen[record.partition].append(record.value or b"")
                if sum(map(len, seen.values())) >= 120:
                    break
            await consumer.close()
            return seen

    seen = asyncio.run(run())
    assert seen == {p: [f"v{i}".encode() for i in range(p, 120, 6)] for p in range(6)}


def test_the_cli_shows_the_cluster(cluster: Cluster, token: dict[str, str]):
    proc = subprocess.run(
        [sys.executable, "-m", "logbroker", "cluster", "status", "--url", cluster.nodes[1].url,
         "--user", ADMIN, "--password", ADMIN_PASSWORD],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines() if line.startswith("  node ")]
    assert [(row[0].strip(), row[1]) for row in rows] == [("node 1", "alive"), ("node 2", "alive"),
                                                          ("node 3", "alive")]
    described = cluster.http(1).json("GET", "/v1/cluster", headers=token)
    led = Counter(p["leader"] for t in described["topics"] for p in t["partitions"])
    assert [int(row[4].removeprefix("leaders ")) for row in rows] == [led[1], led[2], led[3]]


def test_a_queue_lives_on_one_node_and_answers_through_every_node(cluster: Cluster, token: dict[str, str]):
    created = cluster.http(2).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "jobs", "partitions": 2, "kind": "queue",
                                         "config": {"max_deliveries": 1, "visibility_timeout_ms": 200}})
    assert {p["leader"] for p in created["partitions"]} == {2}
    for via in (1, 3):
        cluster.http(via).json("POST", "/v1/queues/jobs/messages?acks=all", headers=token,
                               body={"records": [{"value": f"job-{via}-{p}", "partition": p} for p in (0, 1)]})
    got = cluster.http(3).json("POST", "/v1/queues/jobs/receive", headers=token,
                               body={"max_messages": 10, "visibility_timeout_ms": 30000, "wait_ms": 2000})
    values = sorted(m["value"] for m in got["messages"])
    assert values == ["job-1-0", "job-1-1", "job-3-0", "job-3-1"]
    acked = [m["receipt"] for m in got["messages"] if m["value"] != "job-3-1"]
    cluster.http(1).json("POST", "/v1/queues/jobs/ack", headers=token, body={"receipts": acked})
    nacked = [m["receipt"] for m in got["messages"] if m["value"] == "job-3-1"]
    cluster.http(3).json("POST", "/v1/queues/jobs/nack", headers=token, body={"receipts": nacked, "delay_ms": 0})
    # delivered once and not acked, with max_deliveries 1: it goes to the dead-letter topic
    dead = wait_until(lambda: [r["value"] for p in range(1) for r in cluster.http(1).json(
        "GET", f"/v1/topics/jobs.dlq/partitions/{p}/records?offset=0", headers=token)["records"]])
    assert dead == ["job-3-1"]
    again = cluster.http(1).json("POST", "/v1/queues/jobs/receive", headers=token,
                                 body={"max_messages": 10, "wait_ms": 300})
    assert again["messages"] == []
    # a lease that lapses with no nack: the queue's node sweeps it to the dead letters by itself
    cluster.http(1).json("POST", "/v1/queues/jobs/messages?acks=all", headers=token,
                         body={"records": [{"value": "forgotten", "partition": 0}]})
    taken = cluster.http(3).json("POST", "/v1/queues/jobs/receive", headers=token,
                                 body={"max_messages": 1, "visibility_timeout_ms": 100, "wait_ms": 2000})
    assert [m["value"] for m in taken["messages"]] == ["forgotten"]
    wait_until(lambda: [r["value"] for r in cluster.http(3).json(
        "GET", "/v1/topics/jobs.dlq/partitions/0/records?offset=0", headers=token)["records"]]
        == ["job-3-1", "forgotten"])
    reply = cluster.http(1).call("POST", "/v1/topics/jobs/partitions", headers=token, body={"partitions": 3})
    assert reply.status == 400
    os.kill(cluster.nodes[2].pid, signal.SIGKILL)  # the queue's node: its share state comes back from its log
    cluster.nodes[2].kill()
    wait_until(lambda: alive_nodes(cluster, 1, token)[2] is False, timeout_s=LEASE_TTL_MS / 1000 + 5)
    cluster.start(2)
    wait_until(lambda: cluster.http(3).call("POST", "/v1/queues/jobs/messages?acks=all", headers=token,
                                            body={"records": [{"value": "after-restart"}]}).status == 200)
    later = cluster.http(1).json("POST", "/v1/queues/jobs/receive", headers=token,
                                 body={"max_messages": 10, "wait_ms": 2000})
    assert [m["value"] for m in later["messages"]] == ["after-restart"]  # acked and dead ones stay so
    assert cluster.http(3).call("DELETE", "/v1/topics/jobs", headers=token).status == 204
    wait_until(lambda: cluster.http(2).call("POST", "/v1/queues/jobs/receive", headers=token,
                                            body={"max_messages": 1}).status == 404)


def requests_counted(cluster: Cluster, node: int, route: str, status: int) -> float:
    return requests_total(cluster.http(node), "POST", route, status, bearer(METRICS_TOKEN))


def test_a_forged_token_is_refused_by_the_node_it_reaches_not_passed_on(cluster: Cluster, token: dict[str, str]):
    """A queue's calls pass on to the node it lives on, and that node authenticates them again; a
    caller without a valid token is refused by the first node, which calls no peer for it."""
    created = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "guarded", "partitions": 1, "kind": "queue"})
    owner = created["partitions"][0]["leader"]
    other = next(n for n in (1, 2, 3) if n != owner)
    route = "/v1/queues/{name}/receive"
    before = requests_counted(cluster, owner, route, 401)
    for forged in ("Bearer forged", "Bearer a.b.c", "Basic YWRtaW46eA=="):
        reply = cluster.http(other).call("POST", "/v1/queues/guarded/receive", body={"max_messages": 1},
                                         headers={"Authorization": forged})
        assert reply.status == 401
    assert requests_counted(cluster, owner, route, 401) == before, "nothing reached the queue's node"
    served = cluster.http(other).json("POST", "/v1/queues/guarded/receive", headers=token,
                                      body={"max_messages": 1, "wait_ms": 0})
    assert served["messages"] == [], "a valid caller's call is passed on and answered"
    cluster.http(1).call("DELETE", "/v1/topics/guarded", headers=token)  # the placement tests count every leader


def test_a_consumer_group_works_through_any_node(cluster: Cluster, token: dict[str, str]):
    import asyncio

    from logbroker.client import Client, GroupConsumer

    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "grouped", "partitions": 4, "replication_factor": 1})
    for p in range(4):
        cluster.http(1).json("POST", "/v1/topics/grouped/records?acks=all", headers=token,
                             body={"records": [{"value": f"g{p}-{i}", "partition": p} for i in range(10)]})

    async def consume() -> tuple[set[str], list[int]]:
        urls = [cluster.nodes[2].url, cluster.nodes[3].url]
        async with Client(urls, username=ADMIN, password=ADMIN_PASSWORD) as one, \
                Client(urls[::-1], username=ADMIN, password=ADMIN_PASSWORD) as two:
            first = await GroupConsumer(one, "cg", ["grouped"], session_timeout_ms=6000, wait_ms=100).start()
            second = await GroupConsumer(two, "cg", ["grouped"], session_timeout_ms=6000, wait_ms=100).start()
            seen: set[str] = set()
            async with asyncio.timeout(30):
                while len(seen) < 40 or len(first.assignment()) + len(second.assignment()) != 4:
                    for consumer in (first, second):
                        seen.update((r.value or b"").decode() for r in await consumer.poll(timeout_ms=100))
            sizes = sorted([len(first.assignment()), len(second.assignment())])
            for consumer in (first, second):
                await consumer.commit()
                await consumer.close()
            return seen, sizes

    seen, sizes = asyncio.run(consume())
    assert seen == {f"g{p}-{i}" for p in range(4) for i in range(10)} and sizes == [2, 2]
    for via in (1, 2, 3):  # the group as its coordinator keeps it, asked through every node
        described = cluster.http(via).json("GET", "/v1/groups/cg", headers=token)
        assert {o["partition"]: o["committed_offset"] for o in described["offsets"]} == {p: 10 for p in range(4)}
        assert all(o["lag"] in (0, None) for o in described["offsets"])
        assert "cg" in [g["group"] for g in cluster.http(via).json("GET", "/v1/groups", headers=token)["groups"]]
    leader_of = {p["partition"]: p["leader"] for p in describe(cluster, 1, "grouped", token)["partitions"]}
    assert len(set(leader_of.values())) > 1  # the group read partitions led by several nodes


def offsets_of_every_topic(cluster: Cluster, via: int, headers: dict[str, str]) -> dict[tuple[str, int], int]:
    state = cluster.http(via).json("GET", "/v1/cluster", headers=headers)
    out = {}
    for topic in state["topics"]:
        for p in describe(cluster, via, topic["name"], headers)["partitions"]:
            out[(topic["name"], p["partition"])] = p["latest_offset"]
    return out


def values(cluster: Cluster, via: int, topic: str, partition: int, headers: dict[str, str]) -> list[str]:
    answer = cluster.http(via).json("GET", f"/v1/topics/{topic}/partitions/{partition}/records?offset=0",
                                    headers=headers)
    return [r["value"] for r in answer["records"]]


def test_a_fourth_node_gets_partitions_by_rebalance_and_gives_them_back(cluster: Cluster, token: dict[str, str]):
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "grow", "partitions": 6, "replication_factor": 2})
    expected = {p: [f"g{p}-{i}" for i in range(20)] for p in range(6)}
    for p, batch in expected.items():
        cluster.http(1).json("POST", "/v1/topics/grow/records?acks=all", headers=token,
                             body={"records": [{"value": v, "partition": p} for v in batch]})
    before = wait_until(lambda: offsets_of_every_topic(cluster, 1, token))
    assert all(offset is not None for offset in before.values())

    cluster.start(4)
    wait_until(lambda: alive_nodes(cluster, 1, token) == {1: True, 2: True, 3: True, 4: True})
    cluster.http(1).json("POST", "/v1/users", expect=201, headers=token,
                         body={"username": "erin", "password": "erin-password-1", "role": "user"})
    erin = bearer(wait_until(lambda: login(cluster.http(2), "erin", "erin-password-1")))
    reply = cluster.http(2).call("POST", "/v1/cluster/rebalance", headers=erin)
    assert reply.status == 403  # admins only
    moved = cluster.http(2).json("POST", "/v1/cluster/rebalance", headers=token)
    assert moved["moves"] and len(moved["moves"]) == moved["planned"] and moved["failed"] == []
    state = wait_until(lambda: (s := cluster.http(3).json("GET", "/v1/cluster", headers=token))
                       and all(p["leader"] != -1 for t in s["topics"] for p in t["partitions"]) and s)
    user_topics = [t for t in state["topics"] if not t["name"].startswith("__")]
    leaders = Counter(p["leader"] for t in user_topics for p in t["partitions"])
    replicas = Counter(n for t in user_topics for p in t["partitions"] for n in p["replicas"])
    assert leaders[4] >= 1 and replicas[4] >= sum(replicas.values()) // 4 - 1
    assert max(leaders.values()) - min(leaders[n] for n in (1, 2, 3, 4)) <= 1
    assert wait_until(lambda: offsets_of_every_topic(cluster, 4, token) == before and True)
    for via in (1, 4):
        for p in range(6):
            assert values(cluster, via, "grow", p, token) == expected[p]
    for p in range(6):  # the moved partitions take writes where they now live
        cluster.http(4).json("POST", "/v1/topics/grow/records?acks=all", headers=token,
                             body={"records": [{"value": f"after-{p}", "partition": p}]})
        expected[p].append(f"after-{p}")
        assert values(cluster, 3, "grow", p, token) == expected[p]

    assert cluster.http(1).call("POST", "/v1/cluster/decommission", headers=token, body={"node": 4}).status == 400
    left = cluster.http(1).json("POST", "/v1/cluster/decommission", headers=token, body={"node_id": 4})
    assert left["moves"] and left["stays"] == []  # node 4 holds no queue and no group offsets
    state = wait_until(lambda: (s := cluster.http(2).json("GET", "/v1/cluster", headers=token))
                       and all(p["leader"] not in (-1, 4) for t in s["topics"] for p in t["partitions"]) and s)
    assert not any(4 in p["replicas"] for t in state["topics"] for p in t["partitions"])
    for p in range(6):
        assert values(cluster, 4, "grow", p, token) == expected[p]
        assert values(cluster, 1, "grow", p, token) == expected[p]


def test_a_push_stream_through_another_node_follows_the_leaders_appends(cluster: Cluster, token: dict[str, str]):
    import http.client

    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "pushed", "partitions": 1, "replication_factor": 1})
    leader = describe(cluster, 1, "pushed", token)["partitions"][0]["leader"]
    other = next(n for n in (1, 2, 3) if n != leader)
    via = cluster.http(other)
    connection = http.client.HTTPConnection(via.host, via.port, timeout=15)
    try:
        connection.request("GET", "/v1/topics/pushed/partitions/0/stream?offset=0&keepalive_ms=100", headers=token)
        response = connection.getresponse()
        assert response.status == 200
        for i in range(3):
            cluster.http(leader).json("POST", "/v1/topics/pushed/records?acks=all", headers=token,
                                      body={"records": [{"value": f"p{i}", "partition": 0}]})
        seen: list[str] = []
        while len(seen) < 3:
            line = response.readline().decode()
            assert line, "the stream ended"
            if line.startswith("data: "):
                seen.append(json.loads(line[6:])["value"])
        assert seen == ["p0", "p1", "p2"]
    finally:
        connection.close()


def test_a_group_push_stream_passes_through_a_node_that_does_not_coordinate_groups(cluster: Cluster,
                                                                                   token: dict[str, str]):
    import http.client

    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "gstream", "partitions": 2, "replication_factor": 1})
    joined = cluster.http(2).json("POST", "/v1/groups/gs/members", headers=token,
                                  body={"topics": ["gstream"], "session_timeout_ms": 10000})
    assert joined["assignment"] == {"gstream": [0, 1]}
    coordinator = next(p["leader"] for t in cluster.http(1).json("GET", "/v1/cluster", headers=token)["topics"]
                       if t["name"] == "__consumer_offsets" for p in t["partitions"])
    via = cluster.http(next(n for n in (1, 2, 3) if n != coordinator))
    connection = http.client.HTTPConnection(via.host, via.port, timeout=15)
    try:
        connection.request("GET", f"/v1/groups/gs/members/{joined['member_id']}/stream", headers=token)
        response = connection.getresponse()
        assert response.status == 200
        for p in (0, 1):
            cluster.http(3).json("POST", "/v1/topics/gstream/records?acks=all", headers=token,
                                 body={"records": [{"value": f"s{p}", "partition": p}]})
        seen: set[str] = set()
        while len(seen) < 2:
            line = response.readline().decode()
            assert line, "the stream ended"
            if line.startswith("data: ") and '"value"' in line:
                seen.add(json.loads(line[6:])["value"])
        assert seen == {"s0", "s1"}
    finally:
        connection.close()
    cluster.http(3).call("DELETE", f"/v1/groups/gs/members/{joined['member_id']}", headers=token)
