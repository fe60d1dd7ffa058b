"""A failed fsync takes one partition offline on a real node (in-process, behind its real HTTP
application): the producer that waited for it and a fetch waiting on it fail with 503
``log_offline``, other partitions go on, ``/readyz``, the metrics and the log say so, and a
restart recovers the partition with everything that was acknowledged."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from aiohttp.test_utils import TestClient, TestServer

from http_api.app import build_app
from logbroker.config import NodeConfig
from logbroker.node import Node


class FailingFsync:
    """``os.fsync``, except for files of the partition directory ``target`` while armed."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.armed = False

    def __call__(self, fd: int) -> None:
        if self.armed and f"/{self.target}/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(5, "Input/output error")
        os.fsync(fd)


async def started(data_dir: str, fsync=os.fsync) -> tuple[Node, TestClient]:
    node = Node(NodeConfig(data_dir=data_dir, auth="off", rpc_port=0, maintenance_interval_ms=100), fsync=fsync)
    await node.start()
    client = TestClient(TestServer(build_app(node)))
    await client.start_server()
    return node, client


async def produce(client: TestClient, partition: int, value: str) -> tuple[int, dict]:
    response = await client.post("/v1/topics/t/records?acks=all",
                                 json={"records": [{"value": value, "partition": partition}]})
    return response.status, await response.json()


@pytest.mark.asyncio
async def test_a_failed_fsync_takes_only_its_partition_offline_until_a_restart(tmp_path, caplog):
    data_dir = str(tmp_path / "node")
    fsync = FailingFsync("t-0")
    node, client = await started(data_dir, fsync)
    try:
        created = await client.post("/v1/topics", json={"name": "t", "partitions": 2, "config": {"flush": "always"}})
        assert created.status == 201
        assert (await produce(client, 0, "durable"))[0] == 200
        waiting = asyncio.ensure_future(client.get("/v1/topics/t/partitions/0/records?offset=1&wait_ms=20000"))
        await asyncio.sleep(0.2)
        fsync.armed = True
        with caplog.at_level(logging.ERROR):
            status, problem = await produce(client, 0, "never acknowledged")
            assert status == 503 and problem["code"] == "log_offline" and "fsync failed" in problem["detail"]
            polled = await asyncio.wait_for(waiting, 5)
            assert polled.status == 503 and (await polled.json())["code"] == "log_offline"
            fsync.armed = False  # a later fsync would succeed: the partition stays offline regardless
            assert (await produce(client, 0, "refused"))[0] == 503
            assert (await produce(client, 1, "other partition"))[0] == 200
            ready = await client.get("/readyz")
            body = await ready.json()
            assert ready.status == 503 and body["serving"] is True
            assert [(p["topic"], p["partition"]) for p in body["storage"]["offline_partitions"]] == [("t", 0)]
            metrics = await (await client.get("/metrics")).text()
            assert 'logbroker_log_offline{partition="0",topic="t"} 1.0' in metrics
            for _ in range(50):
                if any("partition offline" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.1)
            assert any("partition offline" in r.getMessage() for r in caplog.records)
    finally:
        await client.close()
        await node.stop()

    node, client = await started(data_dir)
    try:
        assert (await client.get("/readyz")).status == 200
        fetched = await (await client.get("/v1/topics/t/partitions/0/records?offset=0")).json()
        assert [r["value"] for r in fetched["records"]][:1] == ["durable"]
        assert (await produce(client, 0, "after restart"))[0] == 200
    finally:
        await client.close()
        await node.stop()
