"""Topic deletion frees the space first and is finished by the next start when it was cut short
(in-process node behind its real HTTP application; decision 0146)."""

from __future__ import annotations

import os

import pytest
from aiohttp.test_utils import TestClient, TestServer

from http_api.app import build_app
from logbroker.config import NodeConfig
from logbroker.node import Node
from logbroker.replica_manager import deletion_mark


async def started(data_dir: str) -> tuple[Node, TestClient]:
    node = Node(NodeConfig(data_dir=data_dir, auth="off", rpc_port=0))
    await node.start()
    client = TestClient(TestServer(build_app(node)))
    await client.start_server()
    return node, client


async def stopped(node: Node, client: TestClient) -> None:
    await client.close()
    await node.stop()


@pytest.mark.asyncio
async def test_a_deletion_cut_short_is_finished_at_the_next_start_and_leaves_no_old_data(tmp_path):
    data_dir = str(tmp_path / "node")
    node, client = await started(data_dir)
    try:
        assert (await client.post("/v1/topics", json={"name": "t", "partitions": 2})).status == 201
        for p in (0, 1):
            produced = await client.post("/v1/topics/t/records", json={"records": [{"value": "OLD", "partition": p}]})
            assert produced.status == 200
        topic_id = (await (await client.get("/v1/topics/t")).json())["topic_id"]
    finally:
        await stopped(node, client)
    # The process died after marking and emptying partition 0, before partition 1 and the metadata.
    first = os.path.join(data_dir, "t-0")
    os.rename(first, deletion_mark(first, topic_id))
    for name in os.listdir(deletion_mark(first, topic_id)):
        os.unlink(os.path.join(deletion_mark(first, topic_id), name))

    node, client = await started(data_dir)
    try:
        assert (await client.get("/v1/topics/t")).status == 404
        assert not [n for n in os.listdir(data_dir) if n.startswith("t-")]
        assert (await client.post("/v1/topics", json={"name": "t", "partitions": 2})).status == 201
        for p in (0, 1):
            fetched = await (await client.get(f"/v1/topics/t/partitions/{p}/records?offset=0")).json()
            assert fetched["records"] == [] and fetched["high_watermark"] == 0
    finally:
        await stopped(node, client)


@pytest.mark.asyncio
async def test_a_deleted_topic_leaves_no_directory_and_its_name_can_be_reused(tmp_path):
    data_dir = str(tmp_path / "node")
    node, client = await started(data_dir)
    try:
        assert (await client.post("/v1/topics", json={"name": "jobs", "kind": "queue", "partitions": 2})).status == 201
        sent = await client.post("/v1/queues/jobs/messages", json={"records": [{"value": "m"}]})
        assert sent.status == 200
        assert (await client.delete("/v1/topics/jobs")).status == 204
        assert not [n for n in os.listdir(data_dir) if n.startswith(("jobs-", "__queue_state"))]
        assert (await client.post("/v1/topics", json={"name": "jobs", "partitions": 1})).status == 201
        fetched = await (await client.get("/v1/topics/jobs/partitions/0/records?offset=0")).json()
        assert fetched["records"] == []
    finally:
        await stopped(node, client)
