"""Encryption at rest on a real node: segment files hold no plaintext, every reader gets records,
a missing key or an altered batch is a typed error, rotation keeps old batches readable."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from grpc_api import stubs
from logbroker.client import Client
from logbroker.client.sse import SseParser
from segments.batch import HEADER_SIZE, ProducerRecord, decode_records, encode_batch, iter_batches, parse_header
from segments.encryption import assemble, sealing_key
from segments.key_ring import KeyRing, format_ring, write_ring
from tests.conftest import ROOT
from tests.http_api.conftest import Http
from tests.support.grpc_calls import subscribe
from tests.support.nodes import NodeProcess

pb, _ = stubs.load()
BATCH = "application/vnd.logbroker.batch"
MARK = "SECRET-PAYLOAD"


def ring_file(tmp_path: Path, ring: KeyRing, name: str = "keys") -> str:
    path = str(tmp_path / name)
    write_ring(path, ring)
    return path


def keyed(data_dir: str, keys: str) -> NodeProcess:
    return NodeProcess(data_dir, "--encryption-keys-file", keys)


def produce(http: Http, topic: str, values: list[str], partition: int = 0) -> None:
    http.json("POST", f"/v1/topics/{topic}/records",
              body={"records": [{"key": "k", "value": v, "partition": partition} for v in values]})


def values(http: Http, topic: str, partition: int = 0) -> list[str]:
    body = http.json("GET", f"/v1/topics/{topic}/partitions/{partition}/records?offset=0")
    return [r["value"] for r in body["records"]]


def segment_bytes(data_dir: str, topic: str) -> bytes:
    files = sorted(glob.glob(os.path.join(data_dir, f"{topic}-*", "*.log")))
    assert files
    return b"".join(Path(f).read_bytes() for f in files)


def stored_key_ids(data_dir: str, topic: str, partition: int = 0) -> list[int | None]:
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-{partition}", "*.log"))):
        data = Path(path).read_bytes()
        out += [sealing_key(data[p:p + h.size_bytes]) for p, h in iter_batches(data)]
    return out


def test_every_reader_gets_records_while_the_segment_files_hold_none_of_them(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    keys = ring_file(tmp_path, KeyRing({1: os.urandom(32)}, 1))
    sent = [f"{MARK}-{i}" for i in range(40)]
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "secret"})
        http.json("POST", "/v1/topics", 201, body={"name": "jobs", "kind": "queue"})
        produce(http, "secret", sent[:20])
        produce(http, "secret", sent[20:])
        assert values(http, "secret") == sent
        reply = http.call("GET", "/v1/topics/secret/partitions/0/records?offset=0",
                          headers={"Accept": BATCH})  # binary fetch: opened batches, not the file's bytes
        assert reply.status == 200
        batches = [reply.data[p:p + h.size_bytes] for p, h in iter_batches(reply.data)]
        assert [r.value.decode() for b in batches for r in decode_records(b) if r.value] == sent
        got = asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="secret", partition=0, offset=0),
                                    (), 40))
        assert [r.value.decode() for r in got] == sent
        assert asyncio.run(_stream_values(node.url, "secret", 40)) == sent
        http.json("POST", "/v1/queues/jobs/messages", body={"records": [{"value": f"{MARK}-job"}]})
        message = http.json("POST", "/v1/queues/jobs/receive", body={"max_messages": 1})["messages"][0]
        assert message["value"] == f"{MARK}-job"
    assert MARK.encode() not in segment_bytes(data_dir, "secret")
    assert MARK.encode() not in segment_bytes(data_dir, "jobs")
    assert set(stored_key_ids(data_dir, "secret")) == {1}


async def _stream_values(url: str, topic: str, count: int) -> list[str]:
    async with Client(url) as client, client._http().get(f"{url}/v1/topics/{topic}/partitions/0/stream",
                                                          params={"offset": 0}) as response:
        parser, got = SseParser(), []
        async for raw in response.content:
            event = parser.feed(raw.decode().rstrip("\r\n"))
            if event is not None and event.kind == "record":
                got.append(json.loads(event.data)["value"])
                if len(got) == count:
                    break
        return got


def test_topic_config_encryption_off_stores_plaintext_and_can_be_turned_on(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    keys = ring_file(tmp_path, KeyRing({1: os.urandom(32)}, 1))
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "open", "config": {"encryption": "off"}})
        bad = http.call("POST", "/v1/topics", body={"name": "odd", "config": {"encryption": "maybe"}})
        assert bad.status == 400 and "encryption" in bad.json()["detail"]
        produce(http, "open", [f"{MARK}-plain"])
        http.json("PATCH", "/v1/topics/open/config", body={"encryption": "on"})
        produce(http, "open", [f"{MARK}-sealed"])
        assert values(http, "open") == [f"{MARK}-plain", f"{MARK}-sealed"]
        for offset, expected in ((0, [f"{MARK}-plain", f"{MARK}-sealed"]), (1, [f"{MARK}-sealed"])):
            raw = http.call("GET", f"/v1/topics/open/partitions/0/records?offset={offset}",
                            headers={"Accept": BATCH}).data  # the plain batch from the file, the sealed one opened
            assert [r.value.decode() for p, h in iter_batches(raw) for r in decode_records(raw[p:p + h.size_bytes])
                    if r.value] == expected
        assert http.json("PATCH", "/v1/topics/open/config", 400, body={"encryption": 1})["code"] == "invalid_topic"
        assert http.json("GET", "/v1/topics/open")["config"]["encryption"] == "on"
        http.json("POST", "/v1/topics", 201, body={"name": "default"})
        assert http.json("GET", "/v1/topics/default")["config"]["encryption"] == "on"  # the node has keys
    assert stored_key_ids(data_dir, "open") == [None, 1]
    stored = segment_bytes(data_dir, "open")
    assert f"{MARK}-plain".encode() in stored and f"{MARK}-sealed".encode() not in stored


def test_a_node_without_keys_refuses_encryption_on_and_produced_sealed_flags(tmp_path: Path) -> None:
    with NodeProcess(str(tmp_path / "data")) as node:
        http = Http(node.url)
        refused = http.call("POST", "/v1/topics", body={"name": "x", "config": {"encryption": "on"}})
        assert refused.status == 400 and "key ring" in refused.json()["detail"]
        http.json("POST", "/v1/topics", 201, body={"name": "plain"})
        assert http.json("GET", "/v1/topics/plain")["config"]["encryption"] == "off"  # no key ring
        batch = bytearray(encode_batch([ProducerRecord(b"v")]))
        batch[25] |= 1 << 6  # the encrypted flag, set by a client
        forged = assemble(parse_header(bytes(batch)), parse_header(bytes(batch)).batch_length,
                          bytes(batch[25:HEADER_SIZE]), bytes(batch[HEADER_SIZE:]))
        reply = http.call("POST", "/v1/topics/plain/records?partition=0", raw=forged, content_type=BATCH)
        assert reply.status == 400 and "encrypt" in reply.json()["detail"]


def test_rotation_keeps_old_batches_readable_and_a_missing_key_is_a_typed_error(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    first = KeyRing({1: os.urandom(32)}, 1)
    keys = ring_file(tmp_path, first)
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "rot"})
        produce(http, "rot", ["old-1", "old-2"])
    rotated = first.rotated(os.urandom(32))
    write_ring(keys, rotated)
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        produce(http, "rot", ["new-1"])
        assert values(http, "rot") == ["old-1", "old-2", "new-1"]
    assert stored_key_ids(data_dir, "rot") == [1, 2]
    write_ring(keys, rotated.without(1))
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        reply = http.call("GET", "/v1/topics/rot/partitions/0/records?offset=0")
        problem = reply.json()
        assert reply.status == 503 and problem["code"] == "undecryptable_batch"
        assert "partition 0 of 'rot'" in problem["detail"] and problem["key_id"] == 1
        assert http.call("GET", "/v1/topics/rot/partitions/0/records?offset=0",
                         headers={"Accept": BATCH}).json()["code"] == "undecryptable_batch"
        tail = http.json("GET", "/v1/topics/rot/partitions/0/records?offset=2")
        assert [r["value"] for r in tail["records"]] == ["new-1"]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            asyncio.run(subscribe(node.grpc_address, pb.SubscribeRequest(topic="rot", partition=0, offset=0), (), 1))
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "key 1" in str(refused.value.details())


def test_a_flipped_ciphertext_bit_is_detected_even_with_its_checksum_fixed(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    keys = ring_file(tmp_path, KeyRing({1: os.urandom(32)}, 1))
    with keyed(data_dir, keys) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "flip"})
        produce(http, "flip", [f"{MARK}-{i}" for i in range(5)])
    (path,) = glob.glob(os.path.join(data_dir, "flip-0", "*.log"))
    data = bytearray(Path(path).read_bytes())
    header = parse_header(bytes(data))
    data[HEADER_SIZE + 20] ^= 0x01  # inside the ciphertext
    fixed = assemble(header, header.batch_length, bytes(data[25:HEADER_SIZE]),
                      bytes(data[HEADER_SIZE:header.size_bytes]))
    Path(path).write_bytes(fixed + bytes(data[header.size_bytes:]))
    with keyed(data_dir, keys) as node:
        reply = Http(node.url).call("GET", "/v1/topics/flip/partitions/0/records?offset=0")
        assert reply.status == 503 and reply.json()["code"] == "undecryptable_batch"
        assert "authentication tag" in reply.json()["detail"]


def test_a_key_ring_others_may_read_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    keys = ring_file(tmp_path, KeyRing({1: os.urandom(32)}, 1))
    os.chmod(keys, 0o644)
    done = subprocess.run([sys.executable, "-m", "logbroker", "serve", "--data-dir", str(tmp_path / "d"),
                           "--auth", "off", "--http-port", "0", "--rpc-port", "0", "--encryption-keys-file", keys],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "encryption_keys_file" in done.stderr and "chmod 600" in done.stderr


def test_the_key_ring_may_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGBROKER_ENCRYPTION_KEYS", format_ring(KeyRing({5: os.urandom(32)}, 5)))
    data_dir = str(tmp_path / "data")
    with NodeProcess(data_dir) as node:
        http = Http(node.url)
        http.json("POST", "/v1/topics", 201, body={"name": "env"})
        produce(http, "env", [f"{MARK}-env"])
        assert values(http, "env") == [f"{MARK}-env"]
    assert stored_key_ids(data_dir, "env") == [5]
