"""The Python client against a real node: admin, Producer batching, Consumer polling, errors,
and the synchronous wrapper."""

from __future__ import annotations

import asyncio
import gc

import pytest

from logbroker.client import Client, Consumer, LogBrokerError, Producer
from logbroker.client import key_partition as client_key_partition
from logbroker.client.sync import SyncClient
from logbroker.records import key_partition
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
async def test_alter_topic_config(node):
    async with Client(node.url) as client:
        await client.create_topic("c.alter", config={"retention_ms": 1000})
        described = await client.alter_topic_config("c.alter", {"retention_ms": 60_000, "flush": "always"})
        assert (described["config"]["retention_ms"], described["config"]["flush"]) == (60_000, "always")
        assert (await client.describe_topic("c.alter"))["config"]["flush"] == "always"
        assert (await client.alter_topic_config("c.alter", {"flush": None}))["config"]["flush"] == "interval"
        with pytest.raises(LogBrokerError) as err:
            await client.alter_topic_config("c.alter", {"partitions": 3})
        assert err.value.status == 400 and err.value.code == "invalid_topic" and "partitions" in str(err.value)
        with pytest.raises(LogBrokerError) as err:
            await client.alter_topic_config("c.missing", {"retention_ms": 1})
        assert err.value.status == 404
    with SyncClient(node.url) as sync:
        assert sync.alter_topic_config("c.alter", {"retention_ms": 5000})["config"]["retention_ms"] == 5000


@pytest.mark.asyncio
async def test_the_broker_puts_keyed_records_where_the_client_would(node):
    keys = [f"k{i}" for i in range(200)]
    async with Client(node.url) as client:
        await client.create_topic("c.keys", partitions=5)
        placed = await client.produce("c.keys", [{"key": k, "value": "v"} for k in keys])
    assert [p["partition"] for p in placed] == [client_key_partition(k.encode(), 5) for k in keys]
    assert len({p["partition"] for p in placed}) == 5


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
async def test_records_sent_to_one_partition_are_stored_in_send_order(node):
    """Every record ships as its own batch (``batch_bytes=1``) with eight requests allowed in
    flight: batches of one partition must still reach the broker in the order they were sent."""
    async with Client(node.url) as client:
        await client.create_topic("c.order", partitions=2)
        async with Producer(client, linger_ms=0, batch_bytes=1, in_flight_max=8) as producer:
            futures = [await producer.send("c.order", f"r{i}".encode(), partition=i % 2) for i in range(400)]
            await producer.flush()
        for partition in (0, 1):
            offsets = [(await f).offset for f in futures[partition::2]]
            assert offsets == list(range(200)), offsets[:20]
        async with Consumer(client, wait_ms=100) as consumer:
            consumer.assign([("c.order", 0)])
            seen: list[bytes | None] = []
            while len(seen) < 200:
                seen += [r.value for r in await consumer.poll()]
        assert seen == [f"r{i}".encode() for i in range(0, 400, 2)]


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


class FlakyClient(Client):
    """A real client whose fetches of chosen partitions fail once, or stall (fault injection)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.fail_once: set[int] = set()
        self.stall: set[int] = set()
        self.fetches = 0
        self.fail_after: int | None = None  # every fetch after this many fails

    async def fetch_batches(self, topic, partition, offset, **kwargs):
        self.fetches += 1
        if self.fail_after is not None and self.fetches > self.fail_after:
            raise LogBrokerError(503, "not_available", "injected")
        if partition in self.stall:
            await asyncio.sleep(30)
        if partition in self.fail_once:
            self.fail_once.discard(partition)
            raise LogBrokerError(503, "not_available", "injected")
        return await super().fetch_batches(topic, partition, offset, **kwargs)


async def fill(client: Client, topic: str, partitions: int, per_partition: int) -> None:
    await client.create_topic(topic, partitions=partitions)
    for p in range(partitions):
        await client.produce_batch(topic, p, encode_values([f"{p}-{i}".encode() for i in range(per_partition)]))


@pytest.mark.asyncio
async def test_a_failed_partition_does_not_lose_the_others_records(node):
    async with FlakyClient(node.url) as client:
        await fill(client, "c.flaky", 2, 4)
        async with Consumer(client, max_bytes=1, wait_ms=0) as consumer:  # one batch per fetch
            consumer.assign([("c.flaky", 0), ("c.flaky", 1)])
            client.fail_once.add(1)
            first = await consumer.poll()
            assert [r.value for r in first] == [b"0-0", b"0-1", b"0-2", b"0-3"]
            with pytest.raises(LogBrokerError, match="injected"):
                await consumer.poll()  # the error comes with the next poll; nothing was skipped
            assert consumer.positions() == {("c.flaky", 0): 4, ("c.flaky", 1): 0}
            rest = await consumer.poll()
            assert [r.value for r in rest] == [b"1-0", b"1-1", b"1-2", b"1-3"]


@pytest.mark.asyncio
async def test_a_cancelled_poll_moves_no_position(node):
    async with FlakyClient(node.url) as client:
        await fill(client, "c.cancel", 2, 3)
        async with Consumer(client, wait_ms=100) as consumer:
            consumer.assign([("c.cancel", 0), ("c.cancel", 1)])
            await consumer.seek_to_beginning("c.cancel", 0)
            await consumer.seek_to_beginning("c.cancel", 1)
            client.stall.add(1)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(consumer.poll(), 0.5)
            assert consumer.positions() == {("c.cancel", 0): 0, ("c.cancel", 1): 0}
            client.stall.clear()
            got = []
            for _ in range(5):
                got += [r.value for r in await consumer.poll()]
            assert sorted(got) == sorted(f"{p}-{i}".encode() for p in range(2) for i in range(3))


@pytest.mark.asyncio
async def test_an_unclosed_consumer_reports_no_stray_task_errors(node):
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        client = FlakyClient(node.url)
        await fill(client, "c.stray", 1, 10)
        consumer = Consumer(client, max_bytes=1, wait_ms=0)
        consumer.assign([("c.stray", 0)])
        client.fail_after = client.fetches + 1  # the poll's fetch works, the one made ahead fails
        assert len(await consumer.poll()) == 10 and consumer._ahead
        del consumer  # nobody will wait for the failed fetch
        for _ in range(3):
            await asyncio.sleep(0.05)
            gc.collect()
        assert not [c for c in reported if "never retrieved" in str(c.get("message"))], reported
        await client.close()
    finally:
        loop.set_exception_handler(previous)


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
