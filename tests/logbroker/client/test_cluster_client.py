"""The client in front of a cluster, against a real node: several bootstrap URLs (some dead),
partition calls sent to the leader the metadata names, retries of cluster errors after a metadata
refresh, and no retry where a resend could store a produce twice. ``FakeNode`` (a passing-on
stand-in) scripts the cluster's answers; the node behind it is real."""

from __future__ import annotations

import asyncio
import json

import pytest

from logbroker.client import Client, Consumer, LogBrokerError, Producer, RetryPolicy, UnreachableError
from logbroker.client.sync import SyncClient
from segments.batch import encode_values
from tests.support.fake_node import FakeNode, closed_port_url

FAST = RetryPolicy(attempts=4, backoff_s=0.01, backoff_max_s=0.05, retry_after_max_s=0.05)
NODE_ID = 1  # the node id of tests.support.nodes.NodeProcess


async def consume(client: Client, topic: str, partitions: int, count: int) -> dict[int, list[bytes]]:
    consumer = Consumer(client, wait_ms=100)
    consumer.assign([(topic, p) for p in range(partitions)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for _ in range(100):
        for record in await consumer.poll():
            seen[record.partition].append(record.value or b"")
        if sum(map(len, seen.values())) >= count:
            break
    await consumer.close()
    return seen


@pytest.mark.asyncio
async def test_a_dead_first_bootstrap_url_is_passed_over(node):
    dead = closed_port_url()
    async with Client([dead, node.url]) as client:
        await client.create_topic("cc.boot", partitions=2)
        async with Producer(client, linger_ms=1) as producer:
            for i in range(50):
                await producer.send("cc.boot", f"v{i}".encode(), partition=i % 2)
        seen = await consume(client, "cc.boot", 2, 50)
        assert seen[0] == [f"v{i}".encode() for i in range(0, 50, 2)]
        assert seen[1] == [f"v{i}".encode() for i in range(1, 50, 2)]
        assert await client.list_offset("cc.boot", 1) == 25
    async with Client(f"{dead}, {closed_port_url()},{node.url}/") as client:
        assert "cc.boot" in [t["name"] for t in await client.list_topics()]
    with SyncClient([dead, node.url]) as sync:
        assert "cc.boot" in [t["name"] for t in sync.list_topics()]


@pytest.mark.asyncio
async def test_a_metadata_read_does_not_wait_alone_for_a_node_that_never_answers(node):
    """A paused or cut-off node accepts the connection and answers nothing: the next node is
    asked as well, so writes go on while it is silent (the client's timeout is a minute)."""
    async with Client(node.url) as admin:
        await admin.create_topic("cc.silent", partitions=1)
    async with FakeNode(node.url) as silent:
        silent.hang("/v1/cluster")
        silent.hang("/v1/topics/cc.silent")
        async with Client([silent.url, node.url], timeout_s=60.0) as client:
            assert await asyncio.wait_for(client.produce_batch("cc.silent", 0, encode_values([b"v"])), 30.0) == 0
            assert await asyncio.wait_for(client.list_offset("cc.silent", 0), 30.0) == 1
        assert silent.count("GET", "/v1/cluster") >= 1, "the first bootstrap URL is still asked first"
        assert silent.count("POST", "/records") == 0


@pytest.mark.asyncio
async def test_no_reachable_node_fails_with_a_bounded_number_of_tries():
    async with Client([closed_port_url(), closed_port_url()], retry=FAST) as client:
        with pytest.raises(UnreachableError) as err:
            await client.list_topics()
        assert err.value.status == 0 and err.value.code == "transport"
        with pytest.raises(UnreachableError):
            await client.produce_batch("t", 0, encode_values([b"x"]))


@pytest.mark.asyncio
async def test_partition_calls_go_to_the_leader_the_metadata_names(node):
    async with FakeNode(node.url) as bootstrap, FakeNode(node.url) as leader:
        bootstrap.advertise(NODE_ID, leader.url)
        async with Client(bootstrap.url) as client:
            await client.create_topic("cc.lead", partitions=2)
            async with Producer(client, linger_ms=1) as producer:
                for i in range(20):
                    await producer.send("cc.lead", f"v{i}".encode(), partition=i % 2)
            seen = await consume(client, "cc.lead", 2, 20)
            assert sum(map(len, seen.values())) == 20
            assert await client.list_offset("cc.lead", 0) == 10
            leader.fail("/partitions/1/stream", 1, code="not_leader")
            async with client.stream("cc.lead", 1, offset=0) as events:
                first = await anext(e async for e in events if e.kind == "record")
            assert json.loads(first.data)["value"] == "v1"
        assert bootstrap.count("POST", "/v1/topics") == 1  # the admin call: any node
        assert bootstrap.count("GET", "/v1/cluster") >= 1 and bootstrap.count("GET", "/v1/topics/cc.lead") >= 1
        assert bootstrap.count("POST", "/records") == 0 and bootstrap.count("GET", "/partitions/") == 0
        assert leader.count("POST", "/v1/topics/cc.lead/records") >= 2
        assert leader.count("GET", "/v1/topics/cc.lead/partitions/0/records") >= 1
        assert leader.count("GET", "/partitions/0/offsets") >= 1 and leader.count("GET", "/partitions/1/stream") == 2


@pytest.mark.asyncio
async def test_a_forwarded_answer_sends_the_next_batches_to_the_new_leader(node):
    """The leader moved (a failover, a hand-back): the node the client still sends to forwards
    its batches and says so (``X-LogBroker-Leader``); the client reads the metadata again at once
    and sends the next batches to the new leader, not to the old one, which may stop answering."""
    async with FakeNode(node.url) as bootstrap, FakeNode(node.url) as old, FakeNode(node.url) as new:
        bootstrap.advertise(NODE_ID, old.url)
        async with Client(bootstrap.url) as client:
            await client.create_topic("cc.moved", partitions=1)
            async with Producer(client, linger_ms=1, acks="all") as producer:
                await producer.send_and_wait("cc.moved", b"before")
                assert old.count("POST", "/v1/topics/cc.moved/records") == 1
                for node in (bootstrap, old):  # whichever the client asks names the new leader
                    node.advertise(NODE_ID, new.url)
                old.hint("/v1/topics/cc.moved/records", NODE_ID)
                await producer.send_and_wait("cc.moved", b"forwarded")
                for i in range(5):
                    await producer.send_and_wait("cc.moved", f"after-{i}".encode())
        assert old.count("POST", "/v1/topics/cc.moved/records") == 2, old.requests
        assert new.count("POST", "/v1/topics/cc.moved/records") == 5


@pytest.mark.asyncio
async def test_an_unreachable_leader_falls_back_to_any_node(node):
    async with FakeNode(node.url) as bootstrap:
        bootstrap.advertise(NODE_ID, closed_port_url())
        async with Client(bootstrap.url, retry=FAST) as client:
            await client.create_topic("cc.deadlead", partitions=1)
            async with Producer(client, linger_ms=1) as producer:
                metas = [await producer.send_and_wait("cc.deadlead", f"v{i}".encode()) for i in range(5)]
            assert [m.offset for m in metas] == list(range(5))
            assert (await consume(client, "cc.deadlead", 1, 5))[0] == [f"v{i}".encode() for i in range(5)]
        assert bootstrap.count("POST", "/v1/topics/cc.deadlead/records") == 5


@pytest.mark.asyncio
async def test_a_not_leader_answer_refreshes_the_metadata_and_is_sent_again(node):
    async with FakeNode(node.url) as fake, Client(fake.url, retry=FAST) as client:
        await client.create_topic("cc.retry", partitions=2)
        assert await client.produce_batch("cc.retry", 0, encode_values([b"a"])) == 0
        lookups = fake.count("GET", "/v1/topics/cc.retry")
        clusters = fake.count("GET", "/v1/cluster")
        fake.fail("/v1/topics/cc.retry/records", 1, code="not_leader", retry_after=1)
        assert await client.produce_batch("cc.retry", 0, encode_values([b"b"])) == 1
        assert fake.count("POST", "/v1/topics/cc.retry/records") == 3  # a, b refused, b again
        assert fake.count("GET", "/v1/topics/cc.retry") == lookups + 1
        assert fake.count("GET", "/v1/cluster") == clusters + 1
        for code in ("no_leader", "not_enough_replicas", "coordinator_unavailable"):
            fake.fail("/v1/topics/cc.retry/partitions/0/records", 1, code=code)
            fetched = await client.fetch_batches("cc.retry", 0, 0)
            assert [r.value for r in fetched.records(0)] == [b"a", b"b"]  # stored once each
        fake.fail("/v1/groups/cc.group/members", 1, code="coordinator_unavailable")
        joined = await client.join_group("cc.group", ["cc.retry"])
        assert joined["assignment"] == {"cc.retry": [0, 1]}
        await client.leave_group("cc.group", joined["member_id"])


@pytest.mark.asyncio
async def test_retries_are_bounded_and_end_with_the_typed_error(node):
    async with FakeNode(node.url) as fake, Client(fake.url, retry=FAST) as client:
        await client.create_topic("cc.bounded", partitions=1)
        fake.fail("/v1/topics/cc.bounded/records", 100, code="no_leader")
        with pytest.raises(LogBrokerError) as err:
            await client.produce_batch("cc.bounded", 0, encode_values([b"x"]))
        assert (err.value.status, err.value.code) == (503, "no_leader")
        assert fake.count("POST", "/v1/topics/cc.bounded/records") == FAST.attempts
        assert await client.list_offset("cc.bounded", 0) == 0


@pytest.mark.asyncio
async def test_errors_a_resend_would_not_cure_are_not_retried(node):
    async with FakeNode(node.url) as fake, Client(fake.url, retry=FAST) as client:
        await client.create_topic("cc.final", partitions=1)
        for status, code in ((400, "invalid_batch"), (503, "storage_busy"), (500, "internal"), (504, "error")):
            fake.fail("/v1/topics/cc.final/records", 1, status=status, code=code)
            before = fake.count("POST", "/v1/topics/cc.final/records")
            with pytest.raises(LogBrokerError) as err:
                await client.produce_batch("cc.final", 0, encode_values([b"x"]))
            assert err.value.status == status
            assert fake.count("POST", "/v1/topics/cc.final/records") == before + 1
        with pytest.raises(LogBrokerError) as missing:
            await client.fetch_batches("cc.missing", 0, 0)
        assert missing.value.status == 404
        assert fake.count("GET", "/v1/topics/cc.missing/partitions/0/records") == 1


@pytest.mark.asyncio
async def test_a_produce_that_timed_out_is_sent_again_only_when_idempotent_and_a_read_is(node):
    async with FakeNode(node.url) as fake, Client(fake.url, retry=RetryPolicy(attempts=2, backoff_s=0.01),
                                                  timeout_s=1.0) as client:
        await client.create_topic("cc.timeout", partitions=1)
        await client.describe_topic("cc.timeout")
        fake.hang("/v1/topics/cc.timeout/")
        with pytest.raises(LogBrokerError) as err:
            await client.produce_batch("cc.timeout", 0, encode_values([b"x"]))
        assert err.value.status == 0 and not isinstance(err.value, UnreachableError)
        assert fake.count("POST", "/v1/topics/cc.timeout/records") == 1
        async with Producer(client, linger_ms=1, idempotent=False) as producer:
            future = await producer.send("cc.timeout", b"y", partition=0)
            with pytest.raises(LogBrokerError):
                await future
        assert fake.count("POST", "/v1/topics/cc.timeout/records") == 2
        async with Producer(client, linger_ms=1, retries=2, retry_backoff_ms=1) as idempotent:
            future = await idempotent.send("cc.timeout", b"z", partition=0)
            with pytest.raises(LogBrokerError):
                await future
        assert fake.count("POST", "/v1/topics/cc.timeout/records") == 2 + 3, "an idempotent batch is sent again"
        with pytest.raises(LogBrokerError):
            await client.list_offset("cc.timeout", 0)
        assert fake.count("GET", "/v1/topics/cc.timeout/partitions/0/offsets") == 2


@pytest.mark.asyncio
async def test_an_idempotent_batch_unanswered_by_a_silent_leader_goes_to_the_new_one(node):
    """The leader a batch went to falls silent (paused, cut off) and another is elected: the
    producer does not wait out the call's timeout, but sends a copy to the leader the metadata
    names once it is read again; the batch is stored once. A producer that is not idempotent
    never sends a copy."""
    async with FakeNode(node.url) as bootstrap, FakeNode(node.url) as old, FakeNode(node.url) as new:
        bootstrap.advertise(NODE_ID, old.url)
        async with Client(bootstrap.url, retry=FAST, timeout_s=8.0) as client:
            await client.create_topic("cc.hedge", partitions=1)
            await client.describe_topic("cc.hedge")
            old.hang("/v1/topics/cc.hedge/records")
            async with Producer(client, linger_ms=1, acks="all") as producer:
                future = await producer.send("cc.hedge", b"once", partition=0)
                await asyncio.sleep(0.1)
                bootstrap.advertise(NODE_ID, new.url)  # the new leader, as the next metadata read says
                started = asyncio.get_running_loop().time()
                meta = await asyncio.wait_for(future, 5)
                waited = asyncio.get_running_loop().time() - started
                assert waited < 0.75, f"{waited:.2f} s: the copy should leave within a few 0.25 s hedge periods"
            assert meta.offset == 0
            assert old.count("POST", "/v1/topics/cc.hedge/records") == 1
            assert new.count("POST", "/v1/topics/cc.hedge/records") == 1
            assert (await consume(client, "cc.hedge", 1, 1))[0] == [b"once"]

            new.hang("/v1/topics/cc.hedge/records")
            bootstrap.advertise(NODE_ID, new.url)
            await client.leader_url("cc.hedge", 0, refresh=True)
            async with Producer(client, linger_ms=1, idempotent=False) as plain:
                future = await plain.send("cc.hedge", b"plain", partition=0)
                await asyncio.sleep(0.2)
                bootstrap.advertise(NODE_ID, old.url)
                with pytest.raises(LogBrokerError):
                    await asyncio.wait_for(future, 12)
            assert old.count("POST", "/v1/topics/cc.hedge/records") == 1, "no copy: it could be stored twice"


@pytest.mark.asyncio
async def test_send_order_per_partition_survives_retries(node):
    """Batches of one record each, eight requests in flight, and a run of ``not_leader``
    refusals: every partition still stores its records in send order, each once."""
    async with FakeNode(node.url) as fake, Client(fake.url, retry=FAST) as client:
        await client.create_topic("cc.order", partitions=2)
        await client.describe_topic("cc.order")
        fake.fail("/v1/topics/cc.order/records", 6, code="not_leader")
        async with Producer(client, linger_ms=0, batch_bytes=1, in_flight_max=8) as producer:
            futures = [await producer.send("cc.order", f"{i}".encode(), partition=i % 2) for i in range(60)]
            await producer.flush()
        await asyncio.gather(*futures)
        assert fake.count("POST", "/v1/topics/cc.order/records") == 66
        seen = await consume(client, "cc.order", 2, 60)
        assert seen[0] == [f"{i}".encode() for i in range(0, 60, 2)]
        assert seen[1] == [f"{i}".encode() for i in range(1, 60, 2)]


@pytest.mark.asyncio
async def test_nodes_learned_from_the_metadata_serve_when_the_bootstrap_node_is_gone(node):
    fake = await FakeNode(node.url).start()
    try:
        fake.advertise(NODE_ID, node.url)
        async with Client(fake.url, retry=FAST) as client:
            await client.create_topic("cc.learned", partitions=1)
            assert await client.produce_batch("cc.learned", 0, encode_values([b"a"])) == 0
            await fake.stop()
            assert "cc.learned" in [t["name"] for t in await client.list_topics()]
            assert await client.produce_batch("cc.learned", 0, encode_values([b"b"])) == 1
    finally:
        await fake.stop()
