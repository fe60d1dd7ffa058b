"""A stored batch whose records cannot be decoded (accepted before produce checked every row, or
on disk from an older version) never stops a reader (decision 0220). A real node whose produce
checks only a batch's header and checksum, as it did before, stores one between good records;
then JSON fetch, the SSE push streams, gRPC Subscribe and SubscribeBatches (alone and in a
group), the Python ``Consumer`` and ``GroupConsumer`` and a queue's receive all deliver every good
record around it and say what they skipped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from grpc_api import stubs
from logbroker.client import Client, Consumer, GroupConsumer
from tests.http_api.conftest import Http
from tests.support.grpc_calls import subscribe
from tests.support.poison import RowUncheckedNode, poison_batch

pb, pb_grpc = stubs.load()
BATCH = "application/vnd.logbroker.batch"
# Offsets 0-1 good, 2-4 one stored batch whose record 3 has an integer key, 5-6 good.
READABLE = [0, 1, 2, 5, 6]
SKIPPED = (3, 5)
DEADLINE_S = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RowUncheckedNode]:
    with RowUncheckedNode(str(tmp_path_factory.mktemp("poison-node"))) as process:
        yield process


@pytest.fixture(scope="module")
def http(node: RowUncheckedNode) -> Http:
    return Http(node.url)


def store_around_poison(http: Http, path: str, name: str) -> None:
    """Good records at 0-1, the poison batch at 2-4 (record 3 bad), good records at 5-6."""
    http.json("POST", f"{path}/{name}/{'messages' if path == '/v1/queues' else 'records'}",
              body={"records": [{"value": "v0", "partition": 0}, {"value": "v1", "partition": 0}]})
    reply = http.call("POST", f"/v1/topics/{name}/records?partition=0",
                      raw=poison_batch([b"v2", b"v3", b"v4"], 1), content_type=BATCH)
    assert reply.status == 200, reply.data
    http.json("POST", f"{path}/{name}/{'messages' if path == '/v1/queues' else 'records'}",
              body={"records": [{"value": "v5", "partition": 0}, {"value": "v6", "partition": 0}]})


@pytest.fixture(scope="module")
def topic(http: Http) -> str:
    http.json("POST", "/v1/topics", 201, body={"name": "poisoned"})
    store_around_poison(http, "/v1/topics", "poisoned")
    return "poisoned"


def test_json_fetch_answers_the_records_around_it_and_names_what_it_skipped(http, topic):
    answer = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset=0")
    assert [r["offset"] for r in answer["records"]] == READABLE
    assert [r["value"] for r in answer["records"]] == [f"v{o}" for o in READABLE]
    assert [(s["first_offset"], s["next_offset"]) for s in answer["skipped"]] == [SKIPPED]
    assert "integers" in answer["skipped"][0]["reason"] and answer["next_offset"] == 7
    paged, offset = [], 0
    while offset < 7:  # a record at a time: the pages move past it too
        page = http.json("GET", f"/v1/topics/{topic}/partitions/0/records?offset={offset}&max_records=1")
        paged.extend(r["offset"] for r in page["records"])
        assert page["next_offset"] > offset
        offset = page["next_offset"]
    assert paged == READABLE
    metrics = http.call("GET", "/metrics").data.decode()
    assert f'logbroker_unreadable_records_skipped_total{{reader="fetch",topic="{topic}"}}' in metrics


async def _through_offset_6(events: Any) -> list:
    """A push stream's record, skipped and end events up to the record at offset 6 (the last)."""
    got = []
    async with asyncio.timeout(DEADLINE_S):
        async for event in events:
            if event.kind in ("record", "skipped", "end"):
                got.append(event)
            if event.kind == "end" or (event.kind == "record" and json.loads(event.data)["offset"] == 6):
                break
    return got


def test_the_push_stream_sends_a_skipped_event_in_its_place_and_goes_on(node, topic):
    async def main() -> list:
        async with Client(node.url) as client, client.stream(topic, 0, offset=0, keepalive_ms=50) as events:
            return await _through_offset_6(events)

    events = asyncio.run(main())
    assert [(e.kind, e.id) for e in events] == [("record", "0"), ("record", "1"), ("record", "2"),
                                                ("skipped", "4"), ("record", "5"), ("record", "6")]
    skipped = json.loads(events[3].data)
    assert (skipped["first_offset"], skipped["next_offset"]) == SKIPPED


def test_a_group_members_push_stream_goes_on_past_it(http, node, topic):
    async def main() -> list:
        async with Client(node.url) as client:
            joined = await client.join_group("poison-stream", [topic])
            async with client.stream_member("poison-stream", joined["member_id"]) as events:
                return await _through_offset_6(events)

    events = asyncio.run(main())
    assert [e.kind for e in events] == ["record"] * 3 + ["skipped"] + ["record"] * 2
    assert json.loads(events[3].data)["topic"] == topic


def test_grpc_subscribe_and_subscribe_batches_send_the_records_around_it(node, topic):
    got = asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic=topic, partition=0, offset=0), (), 5))
    assert [(r.offset, r.value) for r in got] == [(o, f"v{o}".encode()) for o in READABLE]

    async def batches() -> list:
        import grpc

        async with grpc.aio.insecure_channel(node.grpc_address) as channel:
            call = pb_grpc.BrokerStub(channel).SubscribeBatches(pb.SubscribeRequest(topic=topic, partition=0,
                                                                                    offset=0), timeout=DEADLINE_S)
            offsets: list[int] = []
            async for message in call:
                offsets.extend(r.offset for r in message.records)
                if offsets[-1:] == [6]:
                    break
            call.cancel()
            return offsets

    assert asyncio.run(batches()) == READABLE
    grouped = asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic=topic, group="poison-grpc"), (), 5))
    assert [r.offset for r in grouped] == READABLE


def test_the_python_consumers_poll_past_it_and_keep_what_they_skipped(node, topic):
    async def drain(consumer: Consumer | GroupConsumer) -> list[int]:
        offsets: list[int] = []
        async with asyncio.timeout(DEADLINE_S):
            while len(offsets) < len(READABLE):
                offsets.extend(r.offset for r in await consumer.poll(timeout_ms=100))
        return offsets

    async def main() -> None:
        async with Client(node.url) as client:
            consumer = Consumer(client, wait_ms=100)
            consumer.assign([(topic, 0)])
            assert await drain(consumer) == READABLE
            assert [(s.first_offset, s.next_offset) for s in consumer.skipped] == [SKIPPED]
            async with GroupConsumer(client, "poison-group", [topic], wait_ms=100) as member:
                assert await drain(member) == READABLE
                assert [(s.topic, s.first_offset, s.next_offset) for s in member.skipped] == [(topic, *SKIPPED)]

    asyncio.run(main())


def test_a_queue_delivers_the_messages_around_it_and_finishes_the_unreadable_ones(http):
    http.json("POST", "/v1/topics", 201, body={"name": "poisoned-q", "kind": "queue"})
    store_around_poison(http, "/v1/queues", "poisoned-q")
    got = http.json("POST", "/v1/queues/poisoned-q/receive", body={"max_messages": 10})["messages"]
    assert [m["offset"] for m in got] == READABLE and [m["value"] for m in got] == [f"v{o}" for o in READABLE]
    acked = http.json("POST", "/v1/queues/poisoned-q/ack", body={"receipts": [m["receipt"] for m in got]})
    assert acked["acked"] == len(READABLE)
    (state,) = http.json("GET", "/v1/queues/poisoned-q")["partitions"]
    assert state["done_below"] == 7 and state["in_flight"] == 0
    assert http.json("POST", "/v1/queues/poisoned-q/receive", body={"max_messages": 10})["messages"] == []
    metrics = http.call("GET", "/metrics").data.decode()
    assert 'logbroker_dead_letters_withheld_total{queue="poisoned-q",reason="unreadable"} 2.0' in metrics
