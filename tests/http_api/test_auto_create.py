"""Topics and queues created on first use (``--auto-create on``) through real nodes with auth on:
off by default (a missing name is 404/403 as before); on, a produce creates a topic and a send a
queue, owned by the sender (another user gets 403 on it), a fetch or receive creates nothing,
the sender's quotas and the node's ``auto_create_owned_max`` refuse with 429 and create nothing,
a bad name is 400 and creates nothing, and two users racing for one name create it once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import InvalidTopicError
from coordinator.models import validate_name
from logbroker import launcher
from tests.http_api.conftest import Http
from tests.http_api.test_user_limits import As, assert_limit, make_user
from tests.support.auth import ADMIN, ADMIN_PASSWORD, AUTH_ARGS, login
from tests.support.grpc_calls import pb, publish, subscribe
from tests.support.nodes import NodeProcess

OWNED_MAX = 3
RECORD = {"records": [{"value": "first"}]}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[launcher.NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("auto")), *AUTH_ARGS, "--auto-create", "on",
                     "--auto-create-owned-max", str(OWNED_MAX), "--quota-topics-max", "5") as process:
        yield process


@pytest.fixture(scope="module")
def admin(http: Http) -> As:
    return As(http, ADMIN, login(http, ADMIN, ADMIN_PASSWORD))


def names(admin: As) -> set[str]:
    return {t["name"] for t in admin.json("GET", "/v1/topics")["topics"]}


def test_off_by_default_a_missing_name_is_not_created(tmp_path_factory: pytest.TempPathFactory) -> None:
    with NodeProcess(str(tmp_path_factory.mktemp("plain")), *AUTH_ARGS) as plain:
        http = Http(plain.url)
        admin = As(http, ADMIN, login(http, ADMIN, ADMIN_PASSWORD))
        ann = make_user(http, admin, "ann")
        assert admin.call("POST", "/v1/topics/nope/records", body=RECORD).status == 404
        assert ann.call("POST", "/v1/topics/nope/records", body=RECORD).status == 403
        assert admin.call("POST", "/v1/queues/nope.q/messages", body=RECORD).status == 404
        assert names(admin) == set()


def test_a_first_produce_creates_a_topic_owned_by_the_sender(http: Http, admin: As) -> None:
    ann, bob = make_user(http, admin, "ann"), make_user(http, admin, "bob")
    assert ann.json("POST", "/v1/topics/ann.auto/records", body=RECORD)["offsets"][0]["offset"] == 0
    described = admin.json("GET", "/v1/topics/ann.auto")
    assert described["owner"] == "ann" and described["kind"] == "topic" and described["partition_count"] == 1
    assert bob.call("POST", "/v1/topics/ann.auto/records", body=RECORD).status == 403
    assert bob.call("GET", "/v1/topics/ann.auto/partitions/0/records?offset=0").status == 403
    page = ann.json("GET", "/v1/topics/ann.auto/partitions/0/records?offset=0")
    assert [r["value"] for r in page["records"]] == ["first"]
    assert ann.json("POST", "/v1/topics/ann.auto/records", body=RECORD)["offsets"][0]["offset"] == 1


def test_reads_and_bad_bodies_create_nothing(http: Http, admin: As) -> None:
    carl = make_user(http, admin, "carl")
    before = names(admin)
    assert carl.call("GET", "/v1/topics/carl.read/partitions/0/records?offset=0").status == 403
    assert carl.call("GET", "/v1/topics/carl.read").status == 403
    assert carl.call("POST", "/v1/queues/carl.rq/receive", body={}).status == 403
    assert carl.call("POST", "/v1/topics/carl.bad/records", body={"records": "not a list"}).status == 400
    assert carl.call("POST", "/v1/topics/carl.bad/records", raw=b"{", headers={
        "Content-Type": "application/json"}).status == 400
    assert names(admin) == before


def test_a_first_send_creates_a_queue_with_its_dead_letters(http: Http, admin: As) -> None:
    dora = make_user(http, admin, "dora")
    dora.json("POST", "/v1/queues/dora.jobs/messages", body={"records": [{"value": "job-1"}]})
    assert admin.json("GET", "/v1/topics/dora.jobs")["kind"] == "queue"
    assert admin.json("GET", "/v1/topics/dora.jobs.dlq")["owner"] == "dora"
    received = dora.json("POST", "/v1/queues/dora.jobs/receive", body={"max_messages": 1})
    assert [m["value"] for m in received["messages"]] == ["job-1"]
    # A topic's name is not a queue: a send to it stays 409, nothing else is made.
    dora.json("POST", "/v1/topics/dora.plain/records", body=RECORD)
    assert dora.call("POST", "/v1/queues/dora.plain/messages", body=RECORD).status == 409


def test_the_allowance_and_the_quotas_refuse_and_create_nothing(http: Http, admin: As) -> None:
    erin = make_user(http, admin, "erin")
    for n in range(OWNED_MAX):
        erin.json("POST", f"/v1/topics/erin.{n}/records", body=RECORD)
    assert_limit(erin.call("POST", "/v1/topics/erin.more/records", body=RECORD), "auto_create_owned_max", OWNED_MAX)
    assert "erin.more" not in names(admin)
    erin.json("POST", "/v1/topics", 201, body={"name": "erin.explicit"})  # explicit creates: quota_topics_max
    frank = make_user(http, admin, "frank")
    admin.json("PUT", "/v1/users/frank/quotas", body={"topics_max": 1})
    assert_limit(frank.call("POST", "/v1/queues/frank.q/messages", body=RECORD), "topics_max", 1)
    assert not {"frank.q", "frank.q.dlq"} & names(admin), "a queue and its dead letters are two names"


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="ab._-~!*é ", min_size=1, max_size=8).filter(lambda name: name not in (".", "..")))
def test_a_name_is_checked_as_an_explicit_create_checks_it(http: Http, admin: As, name: str) -> None:
    try:
        validate_name(name)
    except InvalidTopicError:
        valid = False
    else:
        valid = True
    reply = admin.call("POST", f"/v1/topics/{quote(name, safe='')}/records", body=RECORD)
    assert reply.status == (200 if valid else 400), (name, reply.status, reply.data[:200])
    assert (name in names(admin)) == valid


def test_path_tricks_and_reserved_names_are_400(http: Http, admin: As) -> None:
    before = names(admin)
    for bad in ("%2E%2E", "__consumer_offsets.x", "__x", "a" * 201, "a%2Fb"):
        assert admin.call("POST", f"/v1/topics/{bad}/records", body=RECORD).status in (400, 404), bad
        assert admin.call("POST", f"/v1/topics/{bad}/records", body=RECORD).status != 200, bad
    assert names(admin) == before


def test_a_first_grpc_publish_creates_a_topic_and_a_subscribe_does_not(node: launcher.NodeProcess, http: Http,
                                                                         admin: As) -> None:
    ivy, jon = make_user(http, admin, "ivy"), make_user(http, admin, "jon")
    record = pb.PublishRequest(topic="ivy.grpc", records=[pb.Record(value=b"over grpc")])
    answer = asyncio.run(publish(node.grpc_address, record, (("authorization", f"Bearer {ivy.token}"),)))
    assert [(p.partition, p.offset) for p in answer.positions] == [(0, 0)]
    assert admin.json("GET", "/v1/topics/ivy.grpc")["owner"] == "ivy"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(publish(node.grpc_address, record, (("authorization", f"Bearer {jon.token}"),)))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as reserved:
        asyncio.run(publish(node.grpc_address, pb.PublishRequest(topic="__ivy", records=[pb.Record(value=b"x")]),
                            (("authorization", f"Bearer {ivy.token}"),)))
    assert reserved.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError):
        asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="ivy.sub", partition=0, offset=0),
                              (("authorization", f"Bearer {ivy.token}"),), 1))
    assert not {"ivy.sub", "__ivy"} & names(admin)


def test_two_users_racing_for_a_name_create_it_once(http: Http, admin: As) -> None:
    gail, hal = make_user(http, admin, "gail"), make_user(http, admin, "hal")
    for n in range(OWNED_MAX):
        name = f"race.{n}"
        start = threading.Barrier(2)

        def send(user: As, name: str = name, start: threading.Barrier = start) -> Any:
            start.wait(timeout=10)
            return user.call("POST", f"/v1/topics/{name}/records", body=RECORD).status

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            statuses = dict(zip(("gail", "hal"), pool.map(send, (gail, hal)), strict=True))
        winners = [user for user, status in statuses.items() if status == 200]
        assert sorted(statuses.values()) == [200, 403], statuses
        assert admin.json("GET", f"/v1/topics/{name}")["owner"] == winners[0]
        assert len(admin.json("GET", f"/v1/topics/{name}/partitions/0/records?offset=0")["records"]) == 1


def test_a_bad_acks_is_refused_alike_over_http_and_grpc_and_creates_nothing(node: launcher.NodeProcess, http: Http,
                                                                             admin: As) -> None:
    kim = make_user(http, admin, "kim")
    before = names(admin)
    refused = kim.call("POST", "/v1/topics/kim.acks/records?acks=most", body=RECORD)
    assert refused.status == 400, refused.data[:300]
    assert refused.json()["detail"] == "acks must be 0, 1 or all, not 'most'"
    request = pb.PublishRequest(topic="kim.acks", acks="most", records=[pb.Record(value=b"x")])
    with pytest.raises(grpc.aio.AioRpcError) as invalid:
        asyncio.run(publish(node.grpc_address, request, (("authorization", f"Bearer {kim.token}"),)))
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert invalid.value.details() == refused.json()["detail"]
    assert names(admin) == before
