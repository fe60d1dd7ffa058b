"""Topics and queues created on first use on a real etcd cluster (``--auto-create on``): a first
produce through any node creates the topic through the coordinator (placed, replicated, owned by
the sender, seen by every node), a first send creates a queue, and another user gets 403."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_api.test_user_limits import As, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, login
from tests.support.cluster import Cluster, running_cluster, wait_until

RECORD = {"records": [{"value": "first"}]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(str(tmp_path_factory.mktemp("auto-create")), extra=("--auto-create", "on")) as running:
        yield running


def test_a_first_produce_creates_a_replicated_topic_through_any_node(cluster: Cluster) -> None:
    admin = As(cluster.http(1), ADMIN, login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    ann = make_user(cluster.http(1), admin, "ann")
    bob = make_user(cluster.http(1), admin, "bob")
    at_2 = As(cluster.http(2), "ann", ann.token)
    assert at_2.json("POST", "/v1/topics/ann.auto/records?acks=all", body=RECORD)["offsets"][0]["offset"] == 0
    described = admin.json("GET", "/v1/topics/ann.auto")
    assert described["owner"] == "ann" and described["replication_factor"] == 2
    assert len(described["partitions"][0]["in_sync_replicas"]) == 2
    at_3 = As(cluster.http(3), "ann", ann.token)
    page = wait_until(lambda: at_3.json("GET", "/v1/topics/ann.auto/partitions/0/records?offset=0")["records"])
    assert [r["value"] for r in page] == ["first"]
    assert As(cluster.http(3), "bob", bob.token).call("POST", "/v1/topics/ann.auto/records", body=RECORD).status == 403
    assert bob.call("GET", "/v1/topics/bob.never/partitions/0/records?offset=0").status == 403
    assert admin.call("GET", "/v1/topics/bob.never").status == 404, "a read creates nothing"


def test_a_first_send_creates_a_queue_on_a_cluster(cluster: Cluster) -> None:
    admin = As(cluster.http(1), ADMIN, login(cluster.http(1), ADMIN, ADMIN_PASSWORD))
    cleo = make_user(cluster.http(1), admin, "cleo")
    at_3 = As(cluster.http(3), "cleo", cleo.token)
    at_3.json("POST", "/v1/queues/cleo.jobs/messages", body={"records": [{"value": "job-1"}]})
    assert admin.json("GET", "/v1/topics/cleo.jobs")["kind"] == "queue"
    received = wait_until(lambda: cleo.json("POST", "/v1/queues/cleo.jobs/receive",
                                            body={"max_messages": 1})["messages"])
    assert [m["value"] for m in received] == ["job-1"]
