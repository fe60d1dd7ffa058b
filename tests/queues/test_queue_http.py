"""The queue endpoints over real HTTP: concurrent receivers, bad input, bad and forged receipts."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.processes import wait_for


@pytest.fixture(scope="module")
def queue(http):
    http.json("POST", "/v1/topics", expect=201, body={"name": "work", "partitions": 3, "kind": "queue",
                                                      "config": {"visibility_timeout_ms": 60000}})
    http.json("POST", "/v1/topics", expect=201, body={"name": "plain"})
    return "work"


def state(http, name="work"):
    return http.json("GET", f"/v1/queues/{name}")


async def receive_concurrently(url: str, receivers: int, rounds: int) -> list[list[tuple[int, int]]]:
    async with aiohttp.ClientSession() as session:
        async def receiver() -> list[tuple[int, int]]:
            got = []
            for _ in range(rounds):
                async with session.post(f"{url}/v1/queues/work/receive", json={"max_messages": 7}) as response:
                    assert response.status == 200
                    got += [(m["partition"], m["offset"]) for m in (await response.json())["messages"]]
            return got

        return await asyncio.gather(*(receiver() for _ in range(receivers)))


def test_concurrent_receivers_never_share_a_message(http, node, queue):
    http.json("POST", "/v1/queues/work/messages", body={"records": [{"value": str(i), "partition": i % 3}
                                                                    for i in range(300)]})
    results = asyncio.run(receive_concurrently(node.url, 8, 6))
    everything = [m for got in results for m in got]
    assert len(everything) == len(set(everything)) == 300
    assert sum(p["in_flight"] for p in state(http)["partitions"]) == 300
    metrics = http.call("GET", "/metrics").data.decode()
    assert 'logbroker_queue_in_flight{partition="0",queue="work"} 100.0' in metrics


def test_forged_and_malformed_receipts_change_nothing(http, queue):
    http.json("POST", "/v1/queues/work/messages", body={"records": [{"value": "x", "partition": 0}]})
    message = http.json("POST", "/v1/queues/work/receive", body={"max_messages": 1})["messages"][0]
    before = state(http)
    partition, offset, token = message["receipt"].split(".")
    forged = [f"{partition}.{offset}.{int(token, 16) ^ 1:x}", f"{partition}.{int(offset) + 1}.{token}",
              f"9.{offset}.{token}", f"{partition}.99999.{token}"]
    for path in ("ack", "nack"):
        result = http.json("POST", f"/v1/queues/work/{path}", body={"receipts": forged})
        assert [f["receipt"] for f in result["failed"]] == forged and result[path + "ed"] == 0
        assert all(f["code"] == "invalid_receipt" for f in result["failed"])
    assert state(http) == before
    for bad in (["nonsense"], [message["receipt"], "1.2"], ["0.0.0"], [f"{partition}.{offset}.{'f' * 17}"],
                [message["receipt"], message["receipt"]], [7], []):
        reply = http.call("POST", "/v1/queues/work/ack", body={"receipts": bad})
        assert reply.status == 400, (bad, reply.data)
    assert state(http) == before
    assert http.json("POST", "/v1/queues/work/ack", body={"receipts": [message["receipt"]]})["acked"] == 1
    again = http.json("POST", "/v1/queues/work/ack", body={"receipts": [message["receipt"]]})
    assert again["acked"] == 0 and len(again["failed"]) == 1


def test_a_receipt_whose_lease_ran_out_is_refused_with_409_and_the_message_comes_again(http, queue):
    http.json("POST", "/v1/topics", expect=201, body={"name": "short-leases", "partitions": 1, "kind": "queue"})
    http.json("POST", "/v1/queues/short-leases/messages", body={"records": [{"value": "a"}, {"value": "b"}]})
    leased = http.json("POST", "/v1/queues/short-leases/receive",
                       body={"max_messages": 2, "visibility_timeout_ms": 300})["messages"]
    assert [m["value"] for m in leased] == ["a", "b"]
    assert http.json("POST", "/v1/queues/short-leases/ack", body={"receipts": [leased[0]["receipt"]]})["acked"] == 1
    time.sleep(0.5)
    for path in ("ack", "nack"):  # nobody received "b" again yet: the receipt is still refused
        late = http.call("POST", f"/v1/queues/short-leases/{path}", body={"receipts": [leased[1]["receipt"]]})
        assert late.status == 409, late.data
        problem = late.json()
        assert problem["code"] == "lease_expired" and not problem["retriable"]
        assert [f["code"] for f in problem["failed"]] == ["lease_expired"]
    again = http.json("POST", "/v1/queues/short-leases/receive", body={"max_messages": 2, "wait_ms": 2000})
    assert [(m["value"], m["delivery_count"]) for m in again["messages"]] == [("b", 2)]
    mixed = http.json("POST", "/v1/queues/short-leases/ack",
                      body={"receipts": [leased[1]["receipt"], again["messages"][0]["receipt"]]})
    assert mixed["acked"] == 1 and [f["code"] for f in mixed["failed"]] == ["invalid_receipt"]


BAD = [
    ("/v1/queues/work/receive", {"max_messages": 0}, 400),
    ("/v1/queues/work/receive", {"max_messages": 1001}, 400),
    ("/v1/queues/work/receive", {"visibility_timeout_ms": 1}, 400),
    ("/v1/queues/work/receive", {"wait_ms": -1}, 400),
    ("/v1/queues/work/receive", {"other": 1}, 400),
    ("/v1/queues/work/receive", [], 400),
    ("/v1/queues/work/nack", {"receipts": ["0.0.1"], "delay_ms": -5}, 400),
    ("/v1/queues/work/ack", {"receipts": ["0.0.1"], "delay_ms": 5}, 400),
    ("/v1/queues/work/ack", {}, 400),
    ("/v1/queues/work/messages", {"records": []}, 400),
    ("/v1/queues/work/messages", {"records": [{"value": 1}]}, 400),
    ("/v1/queues/nope/receive", {}, 404),
    ("/v1/queues/nope/messages", {"records": [{"value": "x"}]}, 404),
    ("/v1/queues/plain/receive", {}, 409),
    ("/v1/queues/plain/messages", {"records": [{"value": "x"}]}, 409),
    ("/v1/queues/__x/receive", {}, 404),
    ("/v1/queues/a..b%2F/receive", {}, 400),
]


@pytest.mark.parametrize(("path", "body", "status"), BAD)
def test_bad_requests_are_refused_and_change_nothing(http, queue, path, body, status):
    before = state(http)
    plain_end = http.json("GET", "/v1/topics/plain/partitions/0/offsets")["offset"]
    reply = http.call("POST", path, body=body)
    assert reply.status == status, reply.data
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert state(http) == before
    assert http.json("GET", "/v1/topics/plain/partitions/0/offsets")["offset"] == plain_end


def test_wrong_content_types(http, queue):
    assert http.call("POST", "/v1/queues/work/ack", raw=b"x", content_type="text/plain").status == 415
    assert http.call("POST", "/v1/queues/work/messages", raw=b"x", content_type="text/plain").status == 415
    assert http.call("POST", "/v1/queues/work/receive", raw=b"{", content_type="application/json").status == 400


def test_queue_config_is_checked(http):
    for config in ({"visibility_timeout_ms": 0}, {"max_deliveries": 0}, {"dead_letter_topic": "__x"}):
        reply = http.call("POST", "/v1/topics", body={"name": "badq", "kind": "queue", "config": config})
        assert reply.status == 400, config
    assert http.call("GET", "/v1/queues/badq").status == 404


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(["receipts", "delay_ms", "max_messages", "wait_ms",
                                             "visibility_timeout_ms"]), json_values, max_size=3))
def test_arbitrary_bodies_never_crash(http, queue, body):
    before = state(http)
    for path in ("ack", "nack"):
        reply = http.call("POST", f"/v1/queues/work/{path}", body=body)
        assert reply.status < 500, reply.data
        if reply.status == 200:
            assert reply.json()[path + "ed"] == 0
    assert state(http) == before


def test_describe_queue_bad_names(http, queue):
    assert http.call("GET", "/v1/queues/nope").status == 404
    assert http.call("GET", "/v1/queues/plain").status == 409
    assert http.call("GET", "/v1/queues/a%2F..").status == 400


def test_a_receive_spanning_many_small_batches_delivers_every_message(http, queue):
    """Regression: a read of many small batches once evicted the batches it had just decoded from
    the cache, and the messages in them were taken for deleted ones."""
    http.json("POST", "/v1/topics", expect=201, body={"name": "small", "kind": "queue"})
    for batch in range(40):
        http.json("POST", "/v1/queues/small/messages", body={"records": [{"value": f"{batch}-{i}"} for i in range(5)]})
    got = http.json("POST", "/v1/queues/small/receive", body={"max_messages": 1000})["messages"]
    assert [m["offset"] for m in got] == list(range(200))
    assert [m["value"] for m in got] == [f"{b}-{i}" for b in range(40) for i in range(5)]


def test_dead_letters_of_a_deleted_dead_letter_topic_are_withheld_not_sent_to_a_new_one(http, queue):
    """The dead-letter topic is bound by id (decision 0173): once it is deleted, a new topic of the
    same name is not it; the dead messages stay dead in the queue's state log, counted."""
    http.json("POST", "/v1/topics", expect=201, body={"name": "fragile", "kind": "queue",
                                                      "config": {"max_deliveries": 1}})
    bound = http.json("GET", "/v1/queues/fragile")["dead_letter_topic_id"]
    assert bound == http.json("GET", "/v1/topics/fragile.dlq")["topic_id"]
    http.json("DELETE", "/v1/topics/fragile.dlq", expect=204)
    http.json("POST", "/v1/topics", expect=201, body={"name": "fragile.dlq"})
    http.json("POST", "/v1/queues/fragile/messages", body={"records": [{"value": "poison"}]})
    message = http.json("POST", "/v1/queues/fragile/receive", body={})["messages"][0]
    assert http.json("POST", "/v1/queues/fragile/nack", body={"receipts": [message["receipt"]]})["nacked"] == 1
    wait_for(lambda: http.json("GET", "/v1/queues/fragile")["partitions"][0]["done_below"] == 1, 10, "done")
    assert http.json("POST", "/v1/queues/fragile/receive", body={"wait_ms": 100})["messages"] == []
    assert http.json("GET", "/v1/topics/fragile.dlq/partitions/0/records?offset=0")["records"] == []
    metrics = http.call("GET", "/metrics").data.decode()
    assert 'logbroker_dead_letters_withheld_total{queue="fragile",reason="gone"} 1.0' in metrics
