"""The Python client against a real node: admin, Producer batching, Consumer polling, errors,
and the synchronous wrapper."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.client import Client, Consumer, LogBrokerError, Producer
from logbroker.records import key_partition
from logbroker.sync_client import SyncClient


@pytest.mark.asyncio
async def test_admin_calls(node):
    async with Client(node.url) as client:
        created = await client.create_topic("c.admin", partitions=2, config={"retention_ms": 1000})
        assert created["partition_count"] == 2 and len(created["partitions"]) == 2
        assert "c.admin" in [t["name"] for t in await client.list_topics()]
        assert (await client.describe_topic("c.admin"))["config"]["retention_ms"] == 1000
        with pytest.raises(LogBrokerError) as err:
            await client.create_topic("c.admin")
        assert err.value.status == 409 and err.value.code == "topic_exists" and not err.value.retriable
        await client.delete_topic("c.admin")
        with pytest.raises(LogBrokerError) as err:
            await client.describe_topic("c.admin")
        assert err.value.status == 404


@pytest.mark.asyncio
async def test_producer_batches_and_consumer_reads_everything(node):
    async with Client(node.url) as client:
        await client.create_topic("c.data", partitions=4)
        async with Producer(client, linger_ms=20, batch_bytes=64 * 1024) as producer:
            futures = [await producer.send("c.data", f"value-{i}".encode(), key=f"key-{i % 10}".encode(),
                                           headers=[("i", str(i).encode())]) for i in range(3000)]
            await producer.flush()
        metas = [f.result() for f in futures]
        for i, meta in enumerate(metas):
            assert meta.partition == key_partition(f"key-{i % 10}".encode(), 4)
        per_partition = {p: sorted(m.offset for m in metas if m.partition == p) for p in range(4)}
        assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())

        consumer = Consumer(client, wait_ms=200)
        consumer.assign([("c.data", p) for p in range(4)])
        seen = {}
        for _ in range(100):
            for record in await consumer.poll():
                seen[(record.partition, record.offset)] = record
            if len(seen) == 3000:
                break
        assert len(seen) == 3000
        values = {r.value for r in seen.values()}
        assert values == {f"value-{i}".encode() for i in range(3000)}
        sample = next(r for r in seen.values() if r.value == b"value-42")
        assert sample.key == b"key-2" and sample.headers == [("i", b"42")]
        assert (sample.partition, sample.offset) == (metas[42].partition, metas[42].offset)


@pytest.mark.asyncio
async def test_consumer_seek_and_long_poll(node):
    async with Client(node.url) as client:
        await client.create_topic("c.seek")
        for i in range(5):
            await client.produce("c.seek", [{"value": f"r{i}"}])
        consumer = Consumer(client, wait_ms=5000)
        consumer.assign([("c.seek", 0)])
        consumer.seek("c.seek", 0, 3)
        assert [r.value for r in await consumer.poll()] == [b"r3", b"r4"]
        await consumer.seek_to_end("c.seek", 0)
        waiting = asyncio.ensure_future(consumer.poll())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await client.produce("c.seek", [{"value": "late"}])
        assert [r.value for r in await asyncio.wait_for(waiting, 5)] == [b"late"]


@pytest.mark.asyncio
async def test_producer_reports_errors_on_its_futures(node):
    async with Client(node.url) as client:
        await client.create_topic("c.err")
        producer = Producer(client, retries=0)
        future = await producer.send("c.err", b"x", partition=5)
        await producer.flush()
        with pytest.raises(LogBrokerError) as err:
            future.result()
        assert err.value.status == 404


@pytest.mark.asyncio
async def test_unreachable_node_is_a_retriable_transport_error():
    async with Client("http://127.0.0.1:9", timeout_s=2) as client:
        with pytest.raises(LogBrokerError) as err:
            await client.list_topics()
        assert err.value.status == 0 and err.value.retriable


def test_sync_wrapper(node):
    with SyncClient(node.url) as client:
        client.create_topic("c.sync", partitions=1)
        producer = client.producer(linger_ms=1)
        futures = [producer.send("c.sync", f"s{i}".encode()) for i in range(10)]
        producer.flush()
        assert [f.result(timeout=10).offset for f in futures] == list(range(10))
        consumer = client.consumer(wait_ms=100)
        consumer.assign([("c.sync", 0)])
        assert [r.value for r in consumer.poll()] == [f"s{i}".encode() for i in range(10)]
