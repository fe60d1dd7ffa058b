"""Compacted topics through a real node (decision 0321): the node's maintenance compacts a topic
whose dirty ratio passes its threshold; afterwards the latest value of every key is read back at
its original offset by JSON fetch, the Python ``Consumer`` and a ``GroupConsumer`` reading across
the gaps; describe and the metrics show the dirty ratio and the last compaction."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from grpc_api import stubs
from logbroker.client import Client, Consumer, GroupConsumer
from segments.batch import decode_records, iter_batches
from tests.http_api.conftest import Http
from tests.support.grpc_calls import subscribe
from tests.support.nodes import SMALL_SEGMENTS, NodeProcess

pb, pb_grpc = stubs.load()

DEADLINE_S = 30.0
KEYS = 5
WRITES = 60


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(str(tmp_path_factory.mktemp("compaction-node")), *SMALL_SEGMENTS)
    with process:
        yield process


@pytest.fixture(scope="module")
def http(node: NodeProcess) -> Http:
    return Http(node.url)


@pytest.fixture(scope="module")
def compacted(http: Http) -> dict[str, tuple[int, str | None]]:
    """A compacted topic, its writes, and its key -> (offset, value) once compaction ran."""
    http.json("POST", "/v1/topics", 201, body={"name": "state", "config": {
        "cleanup_policy": "compact", "segment_bytes": 1024, "min_cleanable_dirty_ratio": 0.01,
        "delete_retention_ms": 3_600_000}})
    latest: dict[str, tuple[int, str | None]] = {}
    for i in range(WRITES):
        key = "stable" if i == 0 else f"k{i % KEYS}"  # written once: kept, with a gap after it
        value = None if i == WRITES - KEYS else f"{i:03d}" + "x" * 60  # k0's last write is a tombstone
        reply = http.json("POST", "/v1/topics/state/records", body={"records": [{"key": key, "value": value}]})
        latest[key] = (reply["offsets"][0]["offset"] if "offsets" in reply else i, value)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if len(fetch_all(http)) < WRITES // 2:
            break
        time.sleep(0.3)
    return latest


def fetch_all(http: Http) -> list[dict[str, Any]]:
    (part,) = http.json("GET", "/v1/topics/state")["partitions"]
    offset, records = part["earliest_offset"], []
    for _ in range(WRITES + 1):
        reply = http.json("GET", f"/v1/topics/state/partitions/0/records?offset={offset}")
        if not reply["records"]:
            break
        records.extend(reply["records"])
        offset = reply["next_offset"]
    return records


def test_json_fetch_reads_each_keys_latest_value_at_its_offset_across_gaps(
        http: Http, compacted: dict[str, tuple[int, str | None]]) -> None:
    records = fetch_all(http)
    assert len(records) < WRITES // 2, "the node never compacted the topic"
    offsets = [r["offset"] for r in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == WRITES - 1
    state: dict[str, tuple[int, str | None]] = {}
    for r in records:
        state[r["key"]] = (r["offset"], r["value"])
    assert state == compacted
    assert any(b - a > 1 for a, b in itertools.pairwise(offsets)), "no gap to read across"
    for r in records:  # every kept record is where it was written: value i at offset i
        assert r["value"] is None or r["value"].startswith(f"{r['offset']:03d}")


def test_describe_and_metrics_show_the_dirty_ratio_and_last_compaction(
        http: Http, compacted: dict[str, tuple[int, str | None]]) -> None:
    (part,) = http.json("GET", "/v1/topics/state")["partitions"]
    assert 0 <= part["dirty_ratio"] <= 1 and part["last_compaction_ms"] > 0
    metrics = http.call("GET", "/metrics").data.decode()
    assert 'logbroker_compaction_dirty_ratio{partition="0",topic="state"}' in metrics
    assert 'logbroker_compaction_bytes_removed_total{partition="0",topic="state"}' in metrics


def test_python_consumers_read_across_the_gaps(node: NodeProcess, compacted: dict[str, tuple[int, str | None]]) -> None:
    want = [offset for offset, _ in sorted(compacted.values())]

    async def drain(consumer: Consumer | GroupConsumer) -> dict[str, tuple[int, str | None]]:
        state: dict[str, tuple[int, str | None]] = {}
        async with asyncio.timeout(DEADLINE_S):
            while not state or max(o for o, _ in state.values()) < want[-1]:
                for r in await consumer.poll(timeout_ms=100):
                    assert r.key is not None
                    state[r.key.decode()] = (r.offset, None if r.value is None else r.value.decode())
        return state

    async def main() -> None:
        async with Client(node.url) as client:
            consumer = Consumer(client, wait_ms=100)
            consumer.assign([("state", 0)])
            assert await drain(consumer) == compacted
            async with GroupConsumer(client, "compaction-group", ["state"], wait_ms=100) as member:
                assert await drain(member) == compacted

    asyncio.run(main())


def test_grpc_subscribe_and_the_push_stream_read_across_the_gaps(node: NodeProcess, http: Http,
                                                                 compacted: dict[str, tuple[int, str | None]]) -> None:
    kept = [r["offset"] for r in fetch_all(http)]
    got = asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="state", partition=0, offset=kept[0]),
                                (), len(kept)))
    assert [r.offset for r in got] == kept

    async def pushed() -> list[int]:
        offsets: list[int] = []
        async with Client(node.url) as client, client.stream("state", 0, offset=kept[0], keepalive_ms=50) as events:
            async with asyncio.timeout(DEADLINE_S):
                async for event in events:
                    if event.kind == "record":
                        offsets.append(json.loads(event.data)["offset"])
                    if offsets[-1:] == [kept[-1]]:
                        break
        return offsets

    assert asyncio.run(pushed()) == kept


def test_binary_fetch_returns_whole_batches_across_the_gaps(http: Http,
                                                            compacted: dict[str, tuple[int, str | None]]) -> None:
    kept = [r["offset"] for r in fetch_all(http)]
    offset, seen = kept[0], list[int]()
    for _ in range(len(kept) + 1):
        reply = http.call("GET", f"/v1/topics/state/partitions/0/records?offset={offset}",
                          headers={"Accept": "application/vnd.logbroker.batch"})
        assert reply.status == 200
        if not reply.data:
            break
        for position, header in iter_batches(reply.data):
            seen.extend(r.offset for r in decode_records(reply.data[position:position + header.size_bytes])
                        if r.offset >= offset)
        offset = int({k.lower(): v for k, v in reply.headers.items()}["x-logbroker-next-offset"])
    assert seen == kept


def test_a_live_topic_becomes_compacted_by_a_config_change(http: Http) -> None:
    http.json("POST", "/v1/topics", 201, body={"name": "later", "config": {"segment_bytes": 1024}})
    changed = http.json("PATCH", "/v1/topics/later/config", body={"cleanup_policy": "compact",
                                                                   "min_cleanable_dirty_ratio": 0.01})
    assert changed["config"]["cleanup_policy"] == "compact"
    for i in range(WRITES):
        http.json("POST", "/v1/topics/later/records", body={"records": [{"key": f"k{i % 3}", "value": "x" * 60}]})
    deadline = time.monotonic() + DEADLINE_S
    count = WRITES
    while count >= WRITES // 2 and time.monotonic() < deadline:
        time.sleep(0.3)
        (part,) = http.json("GET", "/v1/topics/later")["partitions"]
        offset, count = part["earliest_offset"], 0
        for _ in range(WRITES + 1):
            reply = http.call("GET", f"/v1/topics/later/partitions/0/records?offset={offset}")
            if reply.status == 416:  # a pass moved the log start while this read went on: count again
                count = WRITES
                break
            assert reply.status == 200, (reply.status, reply.data[:500])
            page = reply.json()
            if not page["records"]:
                break
            count += len(page["records"])
            offset = page["next_offset"]
    assert count < WRITES // 2, "the topic was not compacted after its policy changed"
