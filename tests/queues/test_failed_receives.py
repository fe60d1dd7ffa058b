"""A receive that fails before it answers hands no message out, so it is no delivery: the leases
it took are withdrawn, and a message received only by failing receives is never dead-lettered.
The simulated cluster found the hole (a queue whose state log could not commit dead-lettered
messages nobody had got, after ``max_deliveries`` failed receives). Runs a node in this process
and fails the queue's state-log writes the two ways a cluster does: the append refused at once
(``not_leader``) or its durability wait failing (``not_enough_replicas``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from logbroker.config import NodeConfig
from logbroker.errors import BrokerError, NotEnoughReplicasError, NotLeaderError
from logbroker.node import Node
from logbroker.queues.requests import ReceiveRequest
from logbroker.records import IncomingRecord
from segments.batch import ProducerRecord

MAX_DELIVERIES = 2


async def _committed_then_failed(committed: Awaitable[None]) -> None:
    await committed
    raise NotEnoughReplicasError("the ISR shrank below min_insync_replicas while the write waited")


def refuse_at_once(append: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    def failing(partition: int, records: list) -> Awaitable[None]:
        raise NotLeaderError("the state log's leadership moved")
    return failing


def fail_when_durable(append: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    def failing(partition: int, records: list) -> Awaitable[None]:
        return _committed_then_failed(append(partition, records))
    return failing


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", [refuse_at_once, fail_when_durable])
async def test_failed_receives_neither_count_as_deliveries_nor_dead_letter(tmp_path, failure) -> None:
    node = Node(NodeConfig(data_dir=str(tmp_path / "data"), auth="off", rpc_port=0))
    await node.start()
    try:
        await node.topics.create_topic({"name": "q", "kind": "queue", "config": {"max_deliveries": MAX_DELIVERIES}})
        await node.writes.produce_records("q", [IncomingRecord(ProducerRecord(b"only"), 0)], "1")
        queue = node.queues.get("q")
        events = queue.events
        real_append = events.append
        events.append = failure(real_append)  # type: ignore[method-assign]
        for _ in range(MAX_DELIVERIES + 2):
            with pytest.raises(BrokerError):
                await node.queues.receive("q", ReceiveRequest(10, 60_000, 0))
        events.append = real_append  # type: ignore[method-assign]
        await node.queues.sweep()
        state = node.queues.describe("q")["partitions"][0]
        assert state["done_below"] == 0 and state["in_flight"] == 0, "nothing finished, nothing held"
        [message] = await node.queues.receive("q", ReceiveRequest(10, 60_000, 0), binary=True)
        assert message["value"] == b"only" and message["delivery_count"] == 1
        if node.coordinator.cached_topic("q.dlq") is not None:
            read, _ = await node.reads.fetch("q.dlq", 0, 0, 1 << 20, 0)
            assert not read.data, "nothing was dead-lettered"
    finally:
        await node.stop()
