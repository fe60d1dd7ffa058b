"""The Python client against a real node: admin, Producer batching, Consumer polling, errors,
and the synchronous wrapper."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.client import Client, Consumer, LogBrokerError, Producer
from logbroker.records import key_partition
from logbroker.sync_client import SyncClient
from segments.batch import encode_values


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
async def test_poll_batches_reads_everything_in_order_with_fetches_made_ahead(node):
    async with Client(node.url) as client:
        await client.create_topic("c.cols", partitions=2)
        sent = {p: [f"p{p}-{i}".encode() * 40 for i in range(6000)] for p in range(2)}
        for p, values in sent.items():
            for start in range(0, len(values), 1000):
                await client.produce_batch("c.cols", p, encode_values(values[start:start + 1000]))
        consumer = Consumer(client, max_bytes=64 * 1024, wait_ms=0)
        consumer.assign([("c.cols", 0), ("c.cols", 1)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        offsets: dict[int, list[int]] = {0: [], 1: []}
        for _ in range(1000):
            batches = await consumer.poll_batches()
            if not batches:
                break
            for batch in batches:
                got[batch.partition].extend(batch.values)
                offsets[batch.partition].extend(batch.offsets)
                assert consumer.positions()[("c.cols", batch.partition)] == batch.next_offset
        await consumer.close()
        assert got == sent and offsets == {0: list(range(6000)), 1: list(range(6000))}


@pytest.mark.asyncio
async def test_a_seek_drops_the_fetch_made_ahead(node):
    async with Client(node.url) as client:
        await client.create_topic("c.ahead")
        for start in range(0, 3000, 500):
            values = [str(i).encode() for i in range(start, start + 500)]
            await client.produce_batch("c.ahead", 0, encode_values(values))
        consumer = Consumer(client, max_bytes=4096, wait_ms=0)
        consumer.assign([("c.ahead", 0)])
        first = (await consumer.poll_batches())[0]
        assert first.offsets[0] == 0 and consumer._ahead  # the next fetch is under way
        consumer.seek("c.ahead", 0, 2000)
        assert not consumer._ahead
        again = (await consumer.poll_batches())[0]
        assert again.offsets[0] == 2000 and again.values[0] == b"2000"
        consumer.assign([("c.ahead", 0)])  # same assignment: the position and fetch ahead stay
        assert consumer._ahead
        records = await consumer.poll()
        assert records[0].offset == again.next_offset and records[0].value == str(again.next_offset).encode()
        await consumer.close()
        assert not consumer._ahead


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
