"""Fetches over HTTPS against a real node with a certificate (decision 0150): raw fetches of every
size class (one read, just above the zero-copy threshold, several TLS chunks, limited by
``max_bytes``) return exactly the batches the log holds, byte for byte; the async and the sync
consumer read a multi-megabyte partition; the push stream works; no slice descriptor is left open."""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_api.sendfile import SENDFILE_MIN_BYTES, TLS_CHUNK_BYTES
from logbroker.certs import CA_CERT
from logbroker.client import Client, Consumer, SyncClient
from segments.reader import SegmentReader, partition_directories
from segments.segment import LOG_SUFFIX
from tests.http_api.conftest import Http
from tests.support.nodes import NodeProcess, make_certs, tls_args

BATCH = "application/vnd.logbroker.batch"
VALUE_CHARS = 8192
SMALL, BIG = "tls.small", "tls.big"
BIG_PAIRS = 2  # leading batches of 4 records: two of them are just above SENDFILE_MIN_BYTES
BIG_BATCHES = 40  # then batches of 16 records (about 131 KB each), about 5.3 MB in all
FD_WAIT_S = 20.0
POLL_S = 0.05


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[NodeProcess]:
    with NodeProcess(str(tmp_path_factory.mktemp("node")), *tls_args(certs)) as process:
        assert process.url.startswith("https://")
        yield process


@pytest.fixture(scope="module")
def ca_file(certs: Path) -> str:
    return str(certs / CA_CERT)


@pytest.fixture(scope="module")
def http(node: NodeProcess, ca_file: str) -> Http:
    return Http(node.url, tls=ssl.create_default_context(cafile=ca_file))


def _values(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.randbytes(VALUE_CHARS // 2).hex() for _ in range(count)]


@pytest.fixture(scope="module")
def produced(http: Http) -> dict[str, list[str]]:
    """The values of each topic in offset order (one POST is one batch)."""
    out: dict[str, list[str]] = {SMALL: [f"small-{i}" for i in range(20)], BIG: []}
    for name in (SMALL, BIG):
        http.json("POST", "/v1/topics", expect=201, body={"name": name})
    http.json("POST", f"/v1/topics/{SMALL}/records", body={"records": [{"value": v} for v in out[SMALL]]})
    for batch in range(BIG_PAIRS + BIG_BATCHES):
        values = _values(batch, 4 if batch < BIG_PAIRS else 16)
        http.json("POST", f"/v1/topics/{BIG}/records", body={"records": [{"value": v} for v in values]})
        out[BIG].extend(values)
    return out


def log_batches(node: NodeProcess, topic: str) -> list[tuple[int, int, bytes]]:
    """``(base offset, next offset, bytes)`` of every batch in the partition's segment files."""
    reader = SegmentReader(partition_directories(node.data_dir, topic)[0])
    return [(h.base_offset, h.next_offset, bytes(data)) for h, data in reader.iter_batches(0)]


def log_prefix(batches: list[tuple[int, int, bytes]], offset: int, size: int) -> tuple[bytes, int]:
    """The whole batches from the one holding ``offset`` that make up at least ``size`` bytes."""
    taken: list[bytes] = []
    total, next_offset = 0, offset
    for _, end, data in batches:
        if end <= offset:
            continue
        if total >= size:
            break
        taken.append(data)
        total += len(data)
        next_offset = end
    return b"".join(taken), next_offset


def raw_fetch(http: Http, topic: str, offset: int, max_bytes: int | None = None) -> tuple[bytes, int]:
    query = f"offset={offset}" + (f"&max_bytes={max_bytes}" if max_bytes is not None else "")
    reply = http.call("GET", f"/v1/topics/{topic}/partitions/0/records?{query}", headers={"Accept": BATCH})
    assert reply.status == 200, (reply.status, reply.data[:300])
    assert reply.headers["content-type"] == BATCH
    assert int(reply.headers["content-length"]) == len(reply.data)
    return reply.data, int(reply.headers["x-logbroker-next-offset"])


@pytest.mark.parametrize(("topic", "offset", "max_bytes", "low", "high"), [
    pytest.param(SMALL, 0, None, 1, SENDFILE_MIN_BYTES - 1, id="below-sendfile-threshold"),
    pytest.param(BIG, 0, 66_000, SENDFILE_MIN_BYTES, 66_000, id="just-above-sendfile-threshold"),
    pytest.param(BIG, 1, 1 << 20, SENDFILE_MIN_BYTES, 1 << 20, id="default-size-from-inside-a-batch"),
    pytest.param(BIG, 0, 5 << 20, 4 * TLS_CHUNK_BYTES + 1, 5 << 20, id="several-tls-chunks"),
    pytest.param(BIG, 100, 300_000, 2 * SENDFILE_MIN_BYTES, 300_000, id="limited-by-max-bytes"),
])
def test_raw_fetch_over_https_returns_the_logs_batches(node, http, produced, topic, offset, max_bytes, low, high):
    body, next_offset = raw_fetch(http, topic, offset, max_bytes)
    assert low <= len(body) <= high, f"{len(body)} bytes is not in the size class [{low}, {high}]"
    expected, expected_next = log_prefix(log_batches(node, topic), offset, len(body))
    assert body == expected, "the body differs from the log's batches"
    assert next_offset == expected_next


def test_the_whole_partition_over_one_https_connection(node, http, produced):
    """Consecutive raw and JSON fetches on one keep-alive connection: every body is framed right
    (the connection stays usable) and together the raw ones are the partition's bytes."""
    batches = log_batches(node, BIG)
    connection = http.connect()
    try:
        parts: list[bytes] = []
        offset, end = 0, len(produced[BIG])
        while offset < end:
            connection.request("GET", f"/v1/topics/{BIG}/partitions/0/records?offset={offset}&max_bytes=2000000",
                               headers={"Accept": BATCH})
            response = connection.getresponse()
            assert response.status == 200
            parts.append(response.read())
            offset = int(response.getheader("X-LogBroker-Next-Offset") or "0")
            connection.request("GET", f"/v1/topics/{BIG}/partitions/0/records?offset={offset - 1}&max_records=1")
            response = connection.getresponse()
            assert response.status == 200
            assert [r["value"] for r in json.loads(response.read())["records"]] == [produced[BIG][offset - 1]]
    finally:
        connection.close()
    assert len(parts) > 2 and b"".join(parts) == b"".join(data for _, _, data in batches)


def test_async_consumer_over_https(node, produced, ca_file):
    async def consume(batches: bool) -> list[bytes | None]:
        async with Client(node.url, ca_file=ca_file) as client, Consumer(client, wait_ms=0) as consumer:
            consumer.assign([(BIG, 0)])
            values: list[bytes | None] = []
            async with asyncio.timeout(60):
                while len(values) < len(produced[BIG]):
                    if batches:
                        values.extend(v for b in await consumer.poll_batches() for v in b.values)
                    else:
                        values.extend(r.value for r in await consumer.poll())
            return values

    want = [v.encode() for v in produced[BIG]]
    assert asyncio.run(consume(batches=False)) == want
    assert asyncio.run(consume(batches=True)) == want


def test_sync_client_over_https(node, produced, ca_file):
    with SyncClient(node.url, ca_file=ca_file) as client:
        fetched = client.fetch_batches(BIG, 0, 0, max_bytes=3 << 20)
        expected, next_offset = log_prefix(log_batches(node, BIG), 0, len(fetched.data))
        assert len(fetched.data) > 2 * TLS_CHUNK_BYTES and bytes(fetched.data) == expected
        assert fetched.next_offset == next_offset
        consumer = client.consumer(max_bytes=1 << 20, wait_ms=0)
        consumer.assign([(BIG, 0)])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 60
        while len(values) < len(produced[BIG]) and time.monotonic() < deadline:
            values.extend(r.value for r in consumer.poll())
        consumer.close()
    assert values == [v.encode() for v in produced[BIG]]


def test_push_stream_over_https(node, produced, ca_file):
    async def main() -> list[str]:
        async with Client(node.url, ca_file=ca_file) as client, \
                client.stream(SMALL, 0, offset=15, keepalive_ms=50) as events:
            await client.produce(SMALL, [{"value": f"live-{i}", "partition": 0} for i in range(3)])
            out: list[str] = []
            async with asyncio.timeout(30):
                async for event in events:
                    if event.kind == "record":
                        out.append(json.loads(event.data)["value"])
                        if len(out) == 8:
                            return out
            return out

    assert asyncio.run(main()) == [f"small-{i}" for i in range(15, 20)] + [f"live-{i}" for i in range(3)]


def _open_slices(node: NodeProcess, topic: str) -> int:
    """Descriptors the node holds on the partition's segment files (its log's own and any slice's)."""
    directory = os.path.realpath(partition_directories(node.data_dir, topic)[0])
    count = 0
    for fd in os.listdir(f"/proc/{node.pid}/fd"):
        try:
            target = os.readlink(f"/proc/{node.pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        count += target.startswith(directory + os.sep) and target.endswith(LOG_SUFFIX)
    return count


def test_fetches_abandoned_mid_body_leave_no_descriptor_open(node, http, produced):
    before = _open_slices(node, BIG)
    for _ in range(6):
        connection = http.connect()
        try:
            connection.request("GET", f"/v1/topics/{BIG}/partitions/0/records?offset=0&max_bytes={5 << 20}",
                               headers={"Accept": BATCH})
            response = connection.getresponse()
            assert response.status == 200 and len(response.read(1000)) == 1000
        finally:
            connection.close()
    body, _ = raw_fetch(http, BIG, 0, 5 << 20)
    assert len(body) > 4 * TLS_CHUNK_BYTES, "the node still serves after the abandoned fetches"
    deadline = time.monotonic() + FD_WAIT_S
    while (now := _open_slices(node, BIG)) > before and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert now <= before, f"{now - before} slice descriptor(s) left open"
