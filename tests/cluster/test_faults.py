"""A bounded fault run on a real cluster: writers with ``acks=all`` keep producing through one node
while the leader of one partition is paused (SIGSTOP, then SIGCONT) and the leader of another is
killed (kill -9) and restarted. Every acknowledged record must be found afterwards exactly at its
acknowledged offset, once; a refused or unanswered write may be absent but never duplicated by the
broker itself (the writers do not resend)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until

WRITERS = 3
RUN_S = 12.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("faults"))) as running:
        yield running


def test_acknowledged_writes_survive_a_paused_and_a_killed_leader(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    created = cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                                   body={"name": "faulty", "partitions": 3, "replication_factor": 1})
    leader_of = {p["partition"]: p["leader"] for p in created["partitions"]}
    assert sorted(leader_of.values()) == [1, 2, 3]
    acked: list[tuple[int, int, str]] = []
    refused: dict[int, int] = {}
    stop = threading.Event()
    lock = threading.Lock()

    def write(writer: int) -> None:
        n = 0
        while not stop.is_set():
            partition, value = n % 3, f"w{writer}-{n}"
            n += 1
            try:
                reply = cluster.http(1).call("POST", "/v1/topics/faulty/records?acks=all", headers=token,
                                             body={"records": [{"value": value, "partition": partition}]})
            except OSError:
                continue
            with lock:
                if reply.status == 200:
                    acked.append((partition, reply.json()["offsets"][0]["offset"], value))
                else:
                    refused[reply.status] = refused.get(reply.status, 0) + 1
                    assert reply.status in (502, 503, 504), reply.data[:300]

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    paused, killed = leader_of[1], leader_of[2]
    try:
        time.sleep(1.5)
        os.kill(cluster.nodes[paused].pid, signal.SIGSTOP)
        time.sleep(3.0)
        os.kill(cluster.nodes[paused].pid, signal.SIGCONT)
        time.sleep(1.0)
        os.kill(cluster.nodes[killed].pid, signal.SIGKILL)
        cluster.nodes[killed].kill()
        time.sleep(LEASE_TTL_MS / 1000 + 1)
        cluster.start(killed)
        time.sleep(max(0.0, RUN_S - 7.5 - LEASE_TTL_MS / 1000))
    finally:
        os.kill(cluster.nodes[paused].pid, signal.SIGCONT)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert refused, "the faults refused no write: they did not bite"
    assert {p for p, _, _ in acked} == {0, 1, 2} and len(acked) > 30

    def everything(partition: int) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        offset = 0
        while True:
            answer = cluster.http(3).json("GET", f"/v1/topics/faulty/partitions/{partition}/records"
                                                 f"?offset={offset}&max_records=10000", headers=token)
            out += [(r["offset"], r["value"]) for r in answer["records"]]
            if answer["next_offset"] >= answer["high_watermark"]:
                return out
            offset = answer["next_offset"]

    stored = {p: wait_until(lambda p=p: everything(p) or [(-1, "")]) for p in range(3)}
    for partition, offset, value in acked:
        assert (offset, value) in stored[partition], f"acknowledged {value} at {partition}/{offset} is lost"
    for partition, records in stored.items():
        assert [o for o, _ in records] == list(range(len(records))), f"offsets of {partition} have gaps"
        values = [v for _, v in records]
        assert len(values) == len(set(values)), f"a record of partition {partition} is stored twice"
    print(f"acked {len(acked)}, refused {refused}, stored {sum(map(len, stored.values()))}")
