"""A queue holding a batch of more records than one batch may now hold (stored before the bound,
which the HTTP layer enforces at produce) still delivers it in order, decoding only the records
each receive takes and caching none of it. Runs a node in this process: its ``produce_batch``
is below the HTTP check, as a batch stored by an older node is."""

from __future__ import annotations

import struct

import msgpack
import pytest
import xxhash

from logbroker.config import NodeConfig
from logbroker.node import Node
from logbroker.queues.requests import Receipt, ReceiveRequest
from segments.batch import BATCH_RECORDS_MAX, HEADER_SIZE, LENGTH_PREFIX_SIZE
from segments.compression import Codec, compress

COUNT = 3 * BATCH_RECORDS_MAX


def oversized_batch(count: int) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    rows = b"".join(packer.pack([i, 0, None, str(i).encode(), []]) for i in range(count))
    section = compress(Codec.ZSTD, packer.pack_array_header(count) + rows)
    body = struct.pack("<HIqqqhiI", int(Codec.ZSTD), count - 1, 0, 0, -1, -1, -1, count)
    prefix = struct.pack("<QII", 0, HEADER_SIZE - LENGTH_PREFIX_SIZE + len(section), 0)
    return prefix + b"\x01" + struct.pack("<Q", xxhash.xxh3_64_intdigest(body + section)) + body + section


@pytest.mark.asyncio
async def test_an_oversized_stored_batch_is_delivered_a_receive_at_a_time(tmp_path) -> None:
    node = Node(NodeConfig(data_dir=str(tmp_path / "data"), auth="off", rpc_port=0))
    await node.start()
    try:
        await node.topics.create_topic({"name": "q", "kind": "queue"})
        await node.writes.produce_batch("q", 0, oversized_batch(COUNT), "1")
        seen: list[int] = []
        for wanted in (10, 1000, 5):
            messages = await node.queues.receive("q", ReceiveRequest(wanted, 60_000, 0))
            assert [m["value"] for m in messages] == [str(m["offset"]) for m in messages]
            seen.extend(m["offset"] for m in messages)
            receipts = [Receipt(0, m["offset"], int(m["receipt"].rsplit(".", 1)[1], 16)) for m in messages]
            assert (await node.queues.ack("q", receipts))["acked"] == wanted
            assert node.queues.batches.size_bytes == 0, "nothing of the oversized batch is cached"
        assert seen == list(range(1015))
    finally:
        await node.stop()
