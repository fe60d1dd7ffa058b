"""``Consumer``: reads assigned partitions from positions it keeps itself (manual assignment).

It fetches raw batches and verifies their checksums before decoding them into columns
(``logbroker.client.consumer_batch``). At most one fetch ahead per assigned partition. Stored
records that cannot be decoded are passed over, logged, and kept in ``Consumer.skipped`` (the
latest ``SKIPPED_KEPT``), so one bad batch never stops a poll loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Iterable
from typing import Any, Final, Literal

from logbroker.client.consumer_batch import ConsumerBatch, ConsumerRecord, SkippedRecords, decode_fetched
from logbroker.client.core import Client, FetchedBatches

log = logging.getLogger(__name__)
OffsetReset = Literal["earliest", "latest"]
SKIPPED_KEPT: Final = 1000


class Consumer:
    """Reads assigned partitions from positions it keeps itself (manual assignment, no group).

    While the caller works on what a poll returned, the next fetch of each partition that had
    records is already under way (``prefetch``), so the node reads and sends while this process
    decodes. At most one such fetch per assigned partition is outstanding, of at most
    ``max_bytes``; a seek or a new assignment drops it, and so does ``close()`` (or leaving
    ``async with``).

    Positions move only for what a poll returns: a poll cancelled by its caller moves none, and
    when one partition's fetch fails while others' succeed, the others' records are returned and
    the error is raised by the next poll (as Kafka's consumer does)."""

    def __init__(self, client: Client, *, max_bytes: int = 1 << 20, wait_ms: int = 500,
                 auto_offset_reset: OffsetReset = "earliest", prefetch: bool = True) -> None:
        self.client = client
        self.max_bytes, self.wait_ms, self.auto_offset_reset = max_bytes, wait_ms, auto_offset_reset
        self.prefetch = prefetch
        self._positions: dict[tuple[str, int], int | None] = {}
        self._ahead: dict[tuple[str, int], tuple[int, asyncio.Task[FetchedBatches]]] = {}
        self._deferred_error: BaseException | None = None
        # Stored records the polls passed over because they cannot be decoded, latest last.
        self.skipped: collections.deque[SkippedRecords] = collections.deque(maxlen=SKIPPED_KEPT)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._positions = {tp: self._positions.get(tp) for tp in partitions}
        self._drop_ahead([tp for tp in self._ahead if tp not in self._positions])

    def assignment(self) -> list[tuple[str, int]]:
        return list(self._positions)

    def positions(self) -> dict[tuple[str, int], int]:
        """The known next offset of each assigned partition (unresolved ones are left out)."""
        return {tp: offset for tp, offset in self._positions.items() if offset is not None}

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset
        self._drop_ahead([(topic, partition)])

    async def seek_to_beginning(self, topic: str, partition: int) -> None:
        self.seek(topic, partition, await self.client.list_offset(topic, partition, "earliest"))

    async def seek_to_end(self, topic: str, partition: int) -> None:
        self.seek(topic, partition, await self.client.list_offset(topic, partition, "latest"))

    async def position(self, topic: str, partition: int) -> int:
        offset = self._positions.get((topic, partition))
        if offset is None:
            offset = await self.client.list_offset(topic, partition, self.auto_offset_reset)
            self._positions[(topic, partition)] = offset
        return offset

    async def poll(self, *, timeout_ms: int | None = None) -> list[ConsumerRecord]:
        """Records from every assigned partition that has some; waits up to ``timeout_ms`` (default
        ``wait_ms``) when none has any. Positions advance past what is returned."""
        return [record for batch in await self.poll_batches(timeout_ms=timeout_ms) for record in batch]

    async def poll_batches(self, *, timeout_ms: int | None = None) -> list[ConsumerBatch]:
        """As ``poll``, but one ``ConsumerBatch`` (columns) per partition that had records: the
        fast way to consume, since no per-record object is built unless asked for."""
        if self._deferred_error is not None:
            error, self._deferred_error = self._deferred_error, None
            raise error
        wait = self.wait_ms if timeout_ms is None else timeout_ms
        if not self._positions:
            # Nothing assigned (yet): wait as for an empty fetch, so that a poll loop yields to the
            # event loop (a group member's heartbeats, which bring its next assignment).
            await asyncio.sleep(max(0, wait) / 1000)
            return []
        batches = await self._fetch_all(0)
        if batches:
            return batches
        return await self._fetch_all(wait) if wait > 0 else []

    async def close(self) -> None:
        """Cancel the fetches made ahead (positions are kept)."""
        self._drop_ahead(list(self._ahead))

    async def _fetch_all(self, wait_ms: int) -> list[ConsumerBatch]:
        tasks = [asyncio.ensure_future(self._fetch_one(tp, wait_ms)) for tp in self._positions]
        try:
            await asyncio.wait(tasks, return_when=asyncio.ALL_COMPLETED if wait_ms == 0 else asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        batches: list[ConsumerBatch] = []
        error: BaseException | None = None
        for task in tasks:
            if task.cancelled():
                continue
            if (failure := task.exception()) is not None:
                error = error or failure
                continue
            fetched = task.result()
            if fetched is not None:
                tp, next_offset, batch = fetched
                self._positions[tp] = next_offset
                self._skipped(batch.skipped)
                if len(batch):
                    batches.append(batch)
        if error is not None:
            if not batches:
                raise error
            self._deferred_error = error
        return batches

    async def _fetch_one(self, tp: tuple[str, int], wait_ms: int) -> tuple[tuple[str, int], int, ConsumerBatch] | None:
        """One partition's next records and the position after them (applied by the caller)."""
        topic, partition = tp
        offset = await self.position(topic, partition)
        ahead = self._ahead.pop(tp, None)
        if ahead is not None and ahead[0] == offset:
            fetched = await ahead[1]
        else:
            if ahead is not None:
                _forget(ahead[1])
            fetched = await self.client.fetch_batches(topic, partition, offset, max_bytes=self.max_bytes,
                                                      wait_ms=wait_ms)
        if fetched.next_offset <= offset:
            return None
        if self.prefetch:
            task = asyncio.ensure_future(self.client.fetch_batches(
                topic, partition, fetched.next_offset, max_bytes=self.max_bytes, wait_ms=0))
            task.add_done_callback(_retrieve)
            self._ahead[tp] = (fetched.next_offset, task)
        try:
            return tp, fetched.next_offset, decode_fetched(fetched.data, topic, partition, offset)
        except BaseException:
            self._drop_ahead([tp])
            raise

    def _skipped(self, skipped: Iterable[SkippedRecords]) -> None:
        for skip in skipped:
            self.skipped.append(skip)
            log.warning("skipped stored records that cannot be decoded: %s[%d] offsets [%d, %d): %s",
                        skip.topic, skip.partition, skip.first_offset, skip.next_offset, skip.reason[:200])

    def _drop_ahead(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            ahead = self._ahead.pop(tp, None)
            if ahead is not None:
                _forget(ahead[1])


def _forget(task: asyncio.Task[Any]) -> None:
    """Cancel a fetch nobody will wait for."""
    task.cancel()
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a fetch's error as seen: one made ahead that nobody waits for (the consumer was
    closed, sought or dropped) must not be reported as an unretrieved task exception."""
    if not task.cancelled():
        task.exception()

