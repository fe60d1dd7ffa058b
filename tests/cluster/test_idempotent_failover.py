"""De-duplication survives a leader failover (DESIGN §4): a produce retried with the same
``Idempotency-Key``, and a producer's batch sent again, after the leader that stored them was
killed, answer the first offsets from the new leader and are stored once (the new leader rebuilt
its window from the replicated log). The Python ``Producer`` (idempotent by default) keeps
writing through the failover without a duplicate."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from logbroker.client import Client, Producer
from segments.batch import ProducerRecord, encode_batch
from tests.support.auth import ADMIN, ADMIN_PASSWORD, bearer, login
from tests.support.cluster import LEASE_TTL_MS, Cluster, running_cluster, wait_until

BATCH = "application/vnd.logbroker.batch"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("idempotent"))) as running:
        yield running


def _partition(cluster: Cluster, via: int, token: dict[str, str]) -> dict[str, Any]:
    answer: dict[str, Any] = cluster.http(via).json("GET", "/v1/topics/once", headers=token)["partitions"][0]
    return answer


def _values(cluster: Cluster, via: int, token: dict[str, str]) -> list[str]:
    answer = cluster.http(via).json("GET", "/v1/topics/once/partitions/0/records?offset=0", headers=token)
    return [r["value"] for r in answer["records"]]


def test_a_retry_after_a_failover_is_stored_once(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "once", "partitions": 1, "replication_factor": 3})
    wait_until(lambda: _partition(cluster, 1, token)["leader"] != -1)
    leader = _partition(cluster, 1, token)["leader"]
    via = next(n for n in (1, 2, 3) if n != leader)
    keyed = {"records": [{"value": "keyed-1"}, {"value": "keyed-2"}]}
    first = cluster.http(via).json("POST", "/v1/topics/once/records?acks=all", headers={**token,
                                   "Idempotency-Key": "payment-42"}, body=keyed)
    issued = cluster.http(via).json("POST", "/v1/producers", headers=token)
    batch = encode_batch([ProducerRecord(b"batched")], producer_id=issued["producer_id"],
                         producer_epoch=issued["producer_epoch"], base_sequence=0)
    reply = cluster.http(via).call("POST", "/v1/topics/once/records?partition=0&acks=all",
                                   headers={**token, "Content-Type": BATCH}, raw=batch)
    assert reply.status == 200 and reply.headers["x-logbroker-leader"] == str(leader), "forwarded: a hint"
    stored = reply.json()

    os.kill(cluster.nodes[leader].pid, signal.SIGKILL)
    cluster.nodes[leader].kill()
    wait_until(lambda: _partition(cluster, via, token)["leader"] not in (-1, leader),
               timeout_s=LEASE_TTL_MS / 1000 + 10)
    again = wait_until(lambda: (r := cluster.http(via).call(
        "POST", "/v1/topics/once/records?acks=all", headers={**token, "Idempotency-Key": "payment-42"},
        body=keyed)).status == 200 and r.json())
    assert again == first, "the new leader answers the first offsets"
    assert cluster.http(via).json("POST", "/v1/topics/once/records?partition=0&acks=all",
                                  headers={**token, "Content-Type": BATCH}, raw=batch) == stored
    assert _values(cluster, via, token) == ["keyed-1", "keyed-2", "batched"], "each stored once"

    cluster.start(leader)
    wait_until(lambda: _partition(cluster, via, token)["leader"] == leader, timeout_s=60)  # failback
    assert cluster.http(via).json("POST", "/v1/topics/once/records?acks=all", headers={**token,
                                  "Idempotency-Key": "payment-42"}, body=keyed) == first
    assert _values(cluster, leader, token) == ["keyed-1", "keyed-2", "batched"]


def test_the_producer_writes_through_a_failover_without_duplicates(cluster: Cluster):
    token = bearer(login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cluster.http(1).json("POST", "/v1/topics", expect=201, headers=token,
                         body={"name": "steady", "partitions": 1, "replication_factor": 3})
    wait_until(lambda: cluster.http(1).json("GET", "/v1/topics/steady", headers=token)["partitions"][0]["leader"] != -1)
    leader = cluster.http(1).json("GET", "/v1/topics/steady", headers=token)["partitions"][0]["leader"]
    others = [n for n in (1, 2, 3) if n != leader]
    sent = [f"r{i}" for i in range(300)]

    async def produce() -> list[int]:
        urls = [cluster.nodes[n].url for n in others]
        async with Client(urls, username=ADMIN, password=ADMIN_PASSWORD) as client, \
                Producer(client, acks="all", linger_ms=2, retries=10, retry_backoff_ms=200) as producer:
            offsets = []
            for i, value in enumerate(sent):
                if i == 100:
                    os.kill(cluster.nodes[leader].pid, signal.SIGKILL)
                    cluster.nodes[leader].kill()
                offsets.append((await producer.send_and_wait("steady", value.encode(), partition=0)).offset)
            return offsets

    offsets = asyncio.run(produce())
    assert offsets == list(range(len(sent))), "every record acknowledged once, in order"
    via = others[0]
    got = cluster.http(via).json("GET", "/v1/topics/steady/partitions/0/records?offset=0&max_records=1000",
                                 headers=token)
    assert [r["value"] for r in got["records"]] == sent
    cluster.start(leader)
