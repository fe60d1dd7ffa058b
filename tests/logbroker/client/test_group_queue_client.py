"""GroupConsumer and QueueConsumer against a real node, and their synchronous wrappers."""

from __future__ import annotations

import asyncio
import json

import pytest

from logbroker.client import Client, CommitFailedError, GroupConsumer, LogBrokerError, QueueConsumer
from logbroker.client.sync import SyncClient


async def drain(consumer: GroupConsumer, count: int) -> list:
    out = []
    async with asyncio.timeout(30):
        while len(out) < count:
            out += await consumer.poll(timeout_ms=100)
    return out


@pytest.mark.asyncio
async def test_group_consumers_rebalance_commit_and_resume(node):
    async with Client(node.url) as client:
        await client.create_topic("gc.t", partitions=4)
        await client.produce("gc.t", [{"value": f"r{i}", "partition": i % 4} for i in range(40)])
        events: list[tuple[str, list]] = []
        first = GroupConsumer(client, "gc", ["gc.t"], session_timeout_ms=1000, enable_auto_commit=False,
                              assignment_strategy="round_robin",
                              on_assign=lambda ps: events.append(("assign", ps)),
                              on_revoke=lambda ps: events.append(("revoke", ps)))
        async with first:
            assert sorted(first.assignment()) == [("gc.t", p) for p in range(4)]
            records = await drain(first, 40)
            assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(4) for o in range(10)]
            await first.commit()
            second = await GroupConsumer(client, "gc", ["gc.t"], session_timeout_ms=1000).start()
            with pytest.raises(CommitFailedError):
                await first.commit({("gc.t", second.assignment()[0][1]): 5})
            await first.poll(timeout_ms=0)
            assert set(first.assignment()).isdisjoint(second.assignment())
            assert len(first.assignment()) == len(second.assignment()) == 2
            assert ("revoke", sorted(second.assignment())) in events
            assert await second.poll(timeout_ms=200) == [], "second resumes from the committed offsets"
            await second.close()
        described = await client.describe_group("gc")
        assert described["state"] == "empty" and all(o["committed_offset"] == 10 for o in described["offsets"])
        late = GroupConsumer(client, "gc-late", ["gc.t"], auto_offset_reset="latest", wait_ms=100)
        async with late:
            assert await late.poll(timeout_ms=100) == []
            await client.produce("gc.t", [{"value": "new", "partition": 0}])
            got = await drain(late, 1)
            assert [r.value for r in got] == [b"new"]
        assert {o["partition"]: o["committed_offset"] for o in (await client.describe_group("gc-late"))["offsets"]}[0] \
            == 11, "auto-commit on close"


@pytest.mark.asyncio
async def test_group_consumer_numbers_its_commits_so_a_late_one_cannot_undo_them(node):
    """Each commit carries the next number: a copy of an earlier commit that arrives late is
    skipped, and the consumer keeps what the later commit wrote."""
    async with Client(node.url) as client:
        await client.create_topic("gc.seq", partitions=1)
        member = GroupConsumer(client, "gc-seq", ["gc.seq"], enable_auto_commit=False)
        async with member:
            await member.commit({("gc.seq", 0): 0})  # number 0
            await client.produce("gc.seq", [{"value": "x"}] * 3)
            await member.commit({("gc.seq", 0): 3})  # number 1
            assert member.member_id is not None
            late = await client.commit_offsets("gc-seq", member.member_id, member.generation, [("gc.seq", 0, 0)],
                                               sequence=0)
            assert late["superseded"] == [{"topic": "gc.seq", "partition": 0}]
            assert (await client.describe_group("gc-seq"))["offsets"][0]["committed_offset"] == 3
            await member.commit({("gc.seq", 0): 2})  # number 2: a deliberate move back applies
            assert (await client.describe_group("gc-seq"))["offsets"][0]["committed_offset"] == 2


@pytest.mark.asyncio
async def test_group_consumer_reads_columns_and_commits_what_it_returned(node):
    async with Client(node.url) as client:
        await client.create_topic("gc.cols", partitions=2)
        await client.produce("gc.cols", [{"value": f"r{i}", "partition": i % 2} for i in range(30)])
        async with GroupConsumer(client, "gc-cols", ["gc.cols"], enable_auto_commit=False) as consumer:
            values: list[bytes | None] = []
            async with asyncio.timeout(30):
                while len(values) < 30:
                    for batch in await consumer.poll_batches(timeout_ms=100):
                        values += batch.values
            assert sorted(values) == sorted(f"r{i}".encode() for i in range(30))
            await consumer.commit()
        described = await client.describe_group("gc-cols")
        assert sorted(o["committed_offset"] for o in described["offsets"]) == [15, 15]


@pytest.mark.asyncio
async def test_queue_consumer_worker_loop(node):
    async with Client(node.url) as client:
        await client.create_topic("qc.q", kind="queue", config={"max_deliveries": 2})
        await client.send_messages("qc.q", [{"value": f"m{i}"} for i in range(20)] + [{"value": "bad"}])
        consumer = QueueConsumer(client, "qc.q", max_messages=8, wait_ms=100)
        seen = []

        async def handler(message) -> None:
            seen.append(message.value)
            if message.value == b"bad":
                raise ValueError("poison")

        stop = asyncio.Event()
        acked = await consumer.run(handler, stop=stop, max_batches=10)
        assert acked == 20 and seen.count(b"bad") == 2
        dead = await client.fetch_batches("qc.q.dlq", 0, 0)
        assert [r.value for r in dead.records(0)] == [b"bad"]


def test_sync_wrappers(node):
    with SyncClient(node.url) as client:
        client.create_topic("sync.g", partitions=2)
        client.create_topic("sync.q", kind="queue")
        client.produce("sync.g", [{"value": "x", "partition": 1}])
        group = client.group_consumer("sg-sync", ["sync.g"], wait_ms=100)
        group.start()
        records = []
        for _ in range(50):
            records += group.poll(timeout_ms=100)
            if records:
                break
        assert [r.value for r in records] == [b"x"]
        group.close()
        client.send_messages("sync.q", [{"value": "job"}])
        queue = client.queue_consumer("sync.q", wait_ms=1000)
        messages = queue.receive()
        assert [m.value for m in messages] == [b"job"] and messages[0].delivery_count == 1
        assert queue.ack(messages)["acked"] == 1


def test_sync_push_streams(node):
    with SyncClient(node.url) as client:
        client.create_topic("sync.s")
        client.produce("sync.s", [{"value": f"s{i}"} for i in range(3)])
        with client.stream("sync.s", 0, offset=1, keepalive_ms=100) as events:
            records = [json.loads(next(events).data) for _ in range(2)]
        assert [r["value"] for r in records] == ["s1", "s2"] and [r["offset"] for r in records] == [1, 2]
        with client.stream("sync.s", 0, offset=0) as events:
            first = next(events)
            client.produce("sync.s", [{"value": "late"}])
            rest = [json.loads(next(events).data)["value"] for _ in range(3)]
        assert json.loads(first.data)["value"] == "s0" and rest == ["s1", "s2", "late"]
        with pytest.raises(LogBrokerError) as err, client.stream("sync.none", 0):
            pass
        assert err.value.status == 404
