"""Internal state logs compact by snapshot: after many commits or queue events the old segments
are gone, and a node restarted on the compacted logs has the same committed offsets and queue
state. Runs a node in this process (no HTTP) with a low snapshot threshold."""

from __future__ import annotations

import asyncio

import pytest

from logbroker import internal_log
from logbroker.config import NodeConfig
from logbroker.groups import coordinator as group_coordinator
from logbroker.groups.coordinator import OFFSETS_TOPIC
from logbroker.groups.requests import CommitRequest, JoinRequest
from logbroker.node import Node
from logbroker.queues.manager import state_topic
from logbroker.queues.requests import Receipt, ReceiveRequest
from logbroker.records import IncomingRecord
from segments.batch import ProducerRecord


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(internal_log, "SNAPSHOT_RECORDS_MIN", 40)


def config(tmp_path) -> NodeConfig:
    return NodeConfig(data_dir=str(tmp_path / "data"), auth="off", rpc_port=0, topic_segment_bytes_min=1024)


async def started(tmp_path) -> Node:
    node = Node(config(tmp_path))
    await node.start()
    return node


@pytest.mark.asyncio
async def test_offsets_log_compacts_and_restarts_with_the_same_offsets(tmp_path, low_threshold):
    node = await started(tmp_path)
    try:
        await node.topics.create_topic({"name": "t", "partitions": 3, "config": {"segment_bytes": 4096}})
        await node.writes.produce_records("t", [IncomingRecord(ProducerRecord(b"x"), p % 3) for p in range(300)], "1")
        member = await node.groups.join("g", JoinRequest(("t",), 30_000, None, None), None)
        for i in range(1, 101):
            await node.groups.commit("g", CommitRequest(member["member_id"], member["generation"],
                                                        tuple(("t", p, i) for p in range(3))))
        await node.groups.wait_snapshots()
        before = node.groups.describe("g")["offsets"]
        logs = [r.log for r in node.replicas.partitions(OFFSETS_TOPIC)]
        assert max(log.log_start_offset for log in logs) > 0, "older segments were deleted"
        assert sum(log.log_end_offset - log.log_start_offset for log in logs) < 300
    finally:
        await node.stop()
    node = await started(tmp_path)
    try:
        after = node.groups.describe("g")
        assert [o["committed_offset"] for o in after["offsets"]] == [100, 100, 100]
        assert after["offsets"] == [{**o, "member_id": None} for o in before], "members are not kept"
        assert after["generation"] >= 1
    finally:
        await node.stop()


@pytest.mark.asyncio
async def test_offsets_snapshots_in_slices_between_commits_and_rejoins(tmp_path, low_threshold, monkeypatch):
    """Snapshots written 3 records per event-loop step while 40 groups commit and some rejoin
    (new generations) between the slices: a restart on the compacted log has every group's last
    offsets and generation (decision 0176)."""
    monkeypatch.setattr(group_coordinator, "SNAPSHOT_SLICE_RECORDS", 3)
    node = await started(tmp_path)
    try:
        await node.topics.create_topic({"name": "t", "partitions": 2, "config": {"segment_bytes": 4096}})
        await node.writes.produce_records("t", [IncomingRecord(ProducerRecord(b"x"), p % 2) for p in range(300)], "1")

        async def work(g: int) -> None:
            name = f"g{g}"
            member = await node.groups.join(name, JoinRequest(("t",), 30_000, None, None), None)
            for i in range(1, 31):
                if g % 5 == 0 and i % 10 == 0:
                    await node.groups.leave(name, member["member_id"])
                    member = await node.groups.join(name, JoinRequest(("t",), 30_000, None, None), None)
                await node.groups.commit(name, CommitRequest(member["member_id"], member["generation"],
                                                             (("t", 0, i + g), ("t", 1, i))))
                await asyncio.sleep(0)

        await asyncio.gather(*(work(g) for g in range(40)))
        await node.groups.wait_snapshots()
        before = {f"g{g}": node.groups.describe(f"g{g}") for g in range(40)}
        logs = [r.log for r in node.replicas.partitions(OFFSETS_TOPIC)]
        assert sum(log.log_start_offset > 0 for log in logs) >= 4, "most partitions were compacted"
    finally:
        await node.stop()
    node = await started(tmp_path)
    try:
        for name, described in before.items():
            after = node.groups.describe(name)
            assert after["generation"] == described["generation"], name
            assert after["offsets"] == [{**o, "member_id": None} for o in described["offsets"]], name
        node.groups.verify()
    finally:
        await node.stop()


@pytest.mark.asyncio
async def test_queue_state_log_compacts_and_restarts_with_the_same_state(tmp_path, low_threshold):
    node = await started(tmp_path)
    try:
        await node.topics.create_topic({"name": "q", "kind": "queue", "config": {"segment_bytes": 4096}})
        await node.writes.produce_records("q", [IncomingRecord(ProducerRecord(b"m"), 0) for _ in range(400)], "1")
        held: list[Receipt] = []
        for round_ in range(60):
            messages = await node.queues.receive("q", ReceiveRequest(5, 60_000, 0))
            receipts = [Receipt(m["partition"], m["offset"], int(m["receipt"].rsplit(".", 1)[1], 16))
                        for m in messages]
            held.append(receipts.pop())
            await node.queues.ack("q", receipts)
            assert round_ < 59 or messages
        await node.queues.wait_snapshots()
        before = node.queues.describe("q")
        meta = await node.coordinator.get_topic("q")
        log = node.replicas.get(state_topic(meta), 0).log
        assert log.log_start_offset > 0, "older segments were deleted"
    finally:
        await node.stop()
    node = await started(tmp_path)
    try:
        assert node.queues.describe("q") == before
        assert (await node.queues.ack("q", held))["acked"] == len(held) == 60, "leases survived compaction"
        rest = await node.queues.receive("q", ReceiveRequest(1000, 60_000, 0))
        assert [m["offset"] for m in rest] == list(range(300, 400))
    finally:
        await node.stop()
