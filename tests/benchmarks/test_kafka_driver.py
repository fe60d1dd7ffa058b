"""The ``logbroker-kafka`` system on one real node: its server (the node with its Kafka listener on
a free port) and its driver (librdkafka through the listener), each operation checked against
what the node's HTTP API then holds."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import pytest

from benchmarks.drivers import driver_for
from benchmarks.drivers.base import Driver, stamped
from benchmarks.drivers.kafka_driver import KafkaDriver
from benchmarks.harness import SCENARIO_SETTINGS
from benchmarks.servers import Endpoint, LogBrokerKafkaServer
from logbroker.client import Client

WAIT_S = 30.0
ESTABLISHED = "01"    # /proc/net/tcp's state of an established connection


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    server = LogBrokerKafkaServer(str(tmp_path_factory.mktemp("kafka-driver")))
    try:
        yield server.start()
    finally:
        server.stop()


def kafka_driver(endpoint: Endpoint) -> Driver:
    driver = driver_for(endpoint)
    assert isinstance(driver, KafkaDriver)
    return driver


async def stored_values(endpoint: Endpoint, log: str) -> list[bytes | None]:
    """Every value of ``log`` as the node's HTTP API reads it."""
    async with Client(endpoint.url) as client:
        fetched = await client.fetch_batches(log, 0, 0, max_bytes=16 << 20)
        return [record.value for record in fetched.records(0)]


def established_to(port: int) -> int:
    """Connections established to ``port`` on 127.0.0.1, seen from the server's side."""
    with open("/proc/net/tcp", encoding="ascii") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return sum(1 for row in rows if row[3] == ESTABLISHED and int(row[1].split(":")[1], 16) == port)


def test_the_endpoint_is_the_listener_beside_the_http_api(endpoint):
    assert endpoint.system == "logbroker-kafka" and endpoint.host == "127.0.0.1"
    assert endpoint.url.startswith("http://127.0.0.1:") and not endpoint.url.endswith(f":{endpoint.port}")
    os.kill(endpoint.server_pid, 0)                         # the node itself: its CPU is what is sampled
    with open(f"/proc/{endpoint.server_pid}/cmdline", "rb") as f:
        assert b"--kafka-port" in f.read()


def test_the_settings_cover_every_scenario_but_queues(endpoint):
    settings = kafka_driver(endpoint).settings()
    for scenario, keys in SCENARIO_SETTINGS.items():
        if scenario != "queue":
            assert set(keys) <= set(settings), scenario
    assert "librdkafka" in settings["client"] and "flush=always" in settings["durability"]


@pytest.mark.asyncio
async def test_produce_acknowledges_every_record_and_they_are_stored_and_consumed(endpoint):
    async with kafka_driver(endpoint) as driver:
        await driver.create_log("k-produce")
        assert await driver.produce("k-produce", b"v" * 100, 2_500) == 2_500
        assert await stored_values(endpoint, "k-produce") == [b"v" * 100] * 2_500
        assert await driver.consume("k-produce", 2_500) == 2_500
        assert await driver.consume("k-produce", 1_000) == 1_000    # a new consumer reads from the start again
        await driver.settle()


@pytest.mark.asyncio
async def test_the_fsync_variant_makes_a_flush_always_topic(endpoint):
    driver = kafka_driver(endpoint)
    assert driver.fsync_unsupported is None
    async with driver:
        await driver.create_log("k-fsync", fsync=True)
        assert await driver.produce("k-fsync", b"f" * 1024, 300, fsync=True) == 300
    async with Client(endpoint.url) as client:
        assert (await client.describe_topic("k-fsync"))["config"]["flush"] == "always"
        assert await client.list_offset("k-fsync", 0) == 300


@pytest.mark.asyncio
async def test_publish_one_returns_once_the_record_is_stored(endpoint):
    async with kafka_driver(endpoint) as driver:
        await driver.create_log("k-publish")
        for i in range(3):
            await driver.publish_one("k-publish", b"p%d" % i)
            assert await stored_values(endpoint, "k-publish") == [b"p%d" % n for n in range(i + 1)]


@pytest.mark.asyncio
async def test_paced_sends_reach_a_tail_reader_with_their_latencies(endpoint):
    count = 400
    async with kafka_driver(endpoint) as sender, kafka_driver(endpoint) as receiver:
        await sender.create_log("k-latency")
        await sender.prepare_sends("k-latency")
        subscribed = asyncio.Event()
        receiving = asyncio.create_task(receiver.receive_latencies("k-latency", count, subscribed.set,
                                                                   time.monotonic() + WAIT_S))
        async with asyncio.timeout(WAIT_S):
            await subscribed.wait()
        started = time.perf_counter()
        for _ in range(count // 50):
            await sender.send_now("k-latency", [stamped(b"x" * 92) for _ in range(50)])
            await asyncio.sleep(0.005)
        await sender.flush_sends()
        latencies = await receiving
        took_ms = (time.perf_counter() - started) * 1000
    assert len(latencies) == count
    assert all(0 <= latency <= took_ms + 1000 for latency in latencies)
    assert len(await stored_values(endpoint, "k-latency")) == count


@pytest.mark.asyncio
async def test_hold_idle_keeps_each_consumer_connected_until_stopped(endpoint):
    consumers = 6
    async with kafka_driver(endpoint) as driver:
        await driver.create_log("k-idle")
        before = established_to(endpoint.port)
        waiting, stop = asyncio.Event(), asyncio.Event()
        holding = asyncio.create_task(driver.hold_idle("k-idle", consumers, waiting.set, stop))
        async with asyncio.timeout(WAIT_S):
            await waiting.wait()
        await asyncio.sleep(0.5)                        # the node's side of every connection is up too
        assert established_to(endpoint.port) - before >= consumers
        assert not holding.done()
        stop.set()
        async with asyncio.timeout(WAIT_S):
            assert await holding == consumers
        deadline = time.monotonic() + WAIT_S
        while established_to(endpoint.port) > before and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert established_to(endpoint.port) <= before


@pytest.mark.asyncio
async def test_queues_are_said_to_be_unavailable(endpoint):
    async with kafka_driver(endpoint) as driver:
        reason = await driver.queue_unavailable()
    assert reason is not None and reason.startswith("not available") and "HTTP and gRPC" in reason
