"""The client side of a subscribe stream (``GET .../partitions/{p}/subscribe``, a WebSocket): a
partition's stored batches pushed by the node as they are appended, decoded here as a binary
fetch is (checksums verified, columns, records that cannot be decoded passed over into
``ConsumerBatch.skipped``).

The node's binary messages are one byte stream of whole batches: a message normally ends at a
batch boundary, but one paced by the caller's fetch quota may end inside a batch, so bytes are
kept until their batch is whole (at most ``PENDING_BYTES_MAX``). A text message is the problem
that ended the stream (access lost): it is raised as ``LogBrokerError``; a close with another
code ends the iteration with a transport error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

import aiohttp

from logbroker.client.consumer_batch import ConsumerBatch, decode_fetched
from logbroker.client.errors import LogBrokerError, problem_of_text
from segments.batch import DEFAULT_RECORDS_BYTES_MAX, HEADER_SIZE, parse_header

PENDING_BYTES_MAX: Final = DEFAULT_RECORDS_BYTES_MAX + HEADER_SIZE


def whole_batches_end(data: bytes | bytearray | memoryview) -> int:
    """How many leading bytes of ``data`` are whole batches (by their length fields; the decoder
    checks the rest)."""
    view = memoryview(data)
    position = 0
    while len(view) - position >= HEADER_SIZE:
        end = position + parse_header(view, position).size_bytes
        if end > len(view) or end <= position:
            break
        position = end
    return position


class Subscription:
    """One open subscribe stream; iterate it for ``ConsumerBatch`` objects (make it with
    ``Client.subscribe``). ``position`` is the next offset it will deliver."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, url: str, topic: str, partition: int,
                 offset: int) -> None:
        self._socket = socket
        self._url = url
        self.topic, self.partition = topic, partition
        self.position = offset
        self._pending = bytearray()

    def __aiter__(self) -> AsyncIterator[ConsumerBatch]:
        return self._batches()

    async def close(self) -> None:
        await self._socket.close()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _batches(self) -> AsyncIterator[ConsumerBatch]:
        async for message in self._socket:
            if message.type == aiohttp.WSMsgType.TEXT:
                raise problem_of_text(message.data)
            if message.type != aiohttp.WSMsgType.BINARY:
                break
            batch = self._take(message.data)
            if batch is not None:
                yield batch
        code = self._socket.close_code
        raise LogBrokerError(0, "transport", f"the subscribe stream from {self._url} ended (close code {code})",
                             retriable=True, extra={"url": self._url, "close_code": code})

    def _take(self, data: bytes) -> ConsumerBatch | None:
        if self._pending:
            self._pending += data
            buffer: bytes | bytearray = self._pending
        else:
            buffer = data
        end = whole_batches_end(buffer)
        if len(buffer) - end > PENDING_BYTES_MAX:
            raise LogBrokerError(0, "transport", f"the subscribe stream from {self._url} sent a batch of more than "
                                 f"{PENDING_BYTES_MAX} bytes")
        whole = memoryview(buffer)[:end]
        batch = decode_fetched(whole, self.topic, self.partition, self.position) if end else None
        self._pending = bytearray(memoryview(buffer)[end:])
        if batch is None:
            return None
        if len(batch):
            self.position = batch.offsets[-1] + 1
        for skipped in batch.skipped:
            self.position = max(self.position, skipped.next_offset)
        return batch if len(batch) or batch.skipped else None
