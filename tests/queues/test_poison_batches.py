"""The dead-letter sweep meets a stored batch whose records cannot be decoded (decision 0220):
messages an older node leased from it and could never deliver ran out of deliveries. The sweep
copies every good dead message to the dead-letter topic, finishes the undecodable ones as
withheld (``unreadable``) and goes on: nothing around them is lost. Runs a node in this process:
its ``produce_batch`` is below the HTTP check, as a batch stored by an older node is."""

from __future__ import annotations

import time

import pytest

from logbroker.config import NodeConfig
from logbroker.node import Node
from logbroker.queues.share_state import DEAD
from logbroker.records import IncomingRecord, take_records
from segments.batch import ProducerRecord
from tests.support.poison import poison_batch


def records(*values: str) -> list[IncomingRecord]:
    return [IncomingRecord(ProducerRecord(v.encode()), 0) for v in values]


@pytest.mark.asyncio
async def test_the_sweep_dead_letters_the_good_messages_around_an_unreadable_batch(tmp_path) -> None:
    node = Node(NodeConfig(data_dir=str(tmp_path / "data"), auth="off", rpc_port=0))
    await node.start()
    try:
        await node.topics.create_topic({"name": "q", "kind": "queue", "config": {"max_deliveries": 1}})
        await node.writes.produce_records("q", records("v0", "v1"), "1")
        await node.writes.produce_batch("q", 0, poison_batch([b"v2", b"v3", b"v4"], 1), "1")
        await node.writes.produce_records("q", records("v5", "v6"), "1")
        # An older node leased all seven, failed to decode the batch, and the leases ran out.
        share = node.queues.get("q").shares[0]
        now = time.time_ns() // 1_000_000
        assert share.acquire(now, 10, 10, 7, token=1) == list(range(7))
        share.expire(now + 10)
        assert all(share.entries[o].state == DEAD for o in range(7))
        await node.queues.sweep()
        result, _ = await node.reads.fetch("q.dlq", 0, 0, 1 << 20, 0)
        copied = take_records(result.data, 0, 100).records
        assert [r.value for r in copied] == [b"v0", b"v1", b"v2", b"v5", b"v6"]
        assert [dict(r.headers)["x-logbroker-offset"] for r in copied] == [b"0", b"1", b"2", b"5", b"6"]
        assert node.queues.describe("q")["partitions"][0]["done_below"] == 7
        metrics = node.metrics.render().decode()
        assert 'logbroker_dead_letters_withheld_total{queue="q",reason="unreadable"} 2.0' in metrics
    finally:
        await node.stop()
