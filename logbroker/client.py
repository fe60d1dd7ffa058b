"""The Python client (asyncio, on aiohttp): admin calls, a batching ``Producer`` and a ``Consumer``
with manual partition assignment. ``logbroker.sync_client`` wraps these for scripts.

The producer builds binary batches itself (``segments.batch``) and sends each as one prebuilt
batch, so the broker only validates and appends; the consumer fetches raw batches and verifies
their checksums before decoding. Every buffer and retry is bounded (see the constructor limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Final, Literal

import aiohttp
import msgpack

from logbroker.records import key_partition
from logbroker.sse import Event, SseParser
from segments.batch import ProducerRecord, Record, decode_records, encode_batch, iter_batches

DEFAULT_URL: Final = "http://127.0.0.1:8080"
BATCH_TYPE: Final = "application/vnd.logbroker.batch"
MSGPACK_TYPE: Final = "application/x-msgpack"
RETRIABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
STREAM_READ_TIMEOUT_S: Final = 120.0
STREAM_LINE_BYTES_MAX: Final = 64 << 20
OffsetReset = Literal["earliest", "latest"]


class LogBrokerError(Exception):
    """An error answer from the broker (problem+json), or a transport failure (status 0)."""

    def __init__(self, status: int, code: str, detail: str, *, retriable: bool = False,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.retriable = status, code, detail, retriable
        self.extra = extra or {}


@dataclasses.dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@dataclasses.dataclass(frozen=True, slots=True)
class FetchedBatches:
    data: bytes
    next_offset: int
    high_watermark: int

    def records(self, from_offset: int) -> list[Record]:
        """Decode (checksums verified) the records at or after ``from_offset``."""
        out: list[Record] = []
        view = memoryview(self.data)
        for position, header in iter_batches(view):
            records = decode_records(view[position:position + header.size_bytes])
            out.extend(records if header.base_offset >= from_offset else
                       (r for r in records if r.offset >= from_offset))
        return out


class Client:
    """Admin and low-level data calls against one node."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout_s: float = 60.0,
                 session: aiohttp.ClientSession | None = None) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session = session
        self._own_session = session is None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout,
                                                  connector=aiohttp.TCPConnector(limit=64))
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      json_body: Any = None, data: bytes | None = None,
                      headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        try:
            async with self._http().request(method, self.url + path, params=params, json=json_body, data=data,
                                            headers=headers) as response:
                body = await response.read()
                if response.status >= 400:
                    raise _problem(response.status, body)
                return response.status, dict(response.headers), body
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise LogBrokerError(0, "transport", f"{method} {path}: {exc!r}", retriable=True) from exc

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        _status, _, body = await self.request(method, path, **kwargs)
        return json.loads(body) if body else None

    # ---- admin ---------------------------------------------------------------------------------

    async def create_topic(self, name: str, *, partitions: int = 1, replication_factor: int | None = None,
                           kind: str = "topic", config: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "partitions": partitions, "kind": kind, "config": config or {}}
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        result: dict[str, Any] = await self._json("POST", "/v1/topics", json_body=body)
        return result

    async def delete_topic(self, name: str) -> None:
        await self.request("DELETE", f"/v1/topics/{name}")

    async def describe_topic(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/topics/{name}")
        return result

    async def list_topics(self) -> list[dict[str, Any]]:
        result = await self._json("GET", "/v1/topics")
        return list(result["topics"])

    async def list_offset(self, topic: str, partition: int, at: str | int = "latest") -> int:
        result = await self._json("GET", f"/v1/topics/{topic}/partitions/{partition}/offsets", params={"at": str(at)})
        return int(result["offset"])

    # ---- data ----------------------------------------------------------------------------------

    async def produce(self, topic: str, records: list[dict[str, Any]], *, acks: str = "1") -> list[dict[str, int]]:
        """Produce JSON records (``{"key", "value", "headers", "partition", "timestamp"}``)."""
        result = await self._json("POST", f"/v1/topics/{topic}/records", params={"acks": acks},
                                  json_body={"records": records})
        return list(result["offsets"])

    async def produce_batch(self, topic: str, partition: int, batch: bytes, *, acks: str = "1") -> int:
        """Send one prebuilt batch; returns its base offset."""
        result = await self._json("POST", f"/v1/topics/{topic}/records", params={"acks": acks, "partition": partition},
                                  data=batch, headers={"Content-Type": BATCH_TYPE})
        return int(result["offsets"][0]["offset"])

    async def fetch_batches(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
                            wait_ms: int = 0) -> FetchedBatches:
        _, headers, body = await self.request(
            "GET", f"/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_bytes": max_bytes, "wait_ms": wait_ms}, headers={"Accept": BATCH_TYPE})
        return FetchedBatches(body, int(headers["X-LogBroker-Next-Offset"]), int(headers["X-LogBroker-High-Watermark"]))

    # ---- consumer groups -----------------------------------------------------------------------

    async def join_group(self, group: str, topics: Sequence[str], *, session_timeout_ms: int = 10_000,
                         assignment_strategy: str | None = None, member_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"topics": list(topics), "session_timeout_ms": session_timeout_ms}
        if assignment_strategy is not None:
            body["assignment_strategy"] = assignment_strategy
        if member_id is not None:
            body["member_id"] = member_id
        result: dict[str, Any] = await self._json("POST", f"/v1/groups/{group}/members", json_body=body)
        return result

    async def heartbeat(self, group: str, member_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("POST", f"/v1/groups/{group}/members/{member_id}/heartbeat")
        return result

    async def leave_group(self, group: str, member_id: str) -> None:
        await self.request("DELETE", f"/v1/groups/{group}/members/{member_id}")

    async def commit_offsets(self, group: str, member_id: str, generation: int,
                             offsets: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
        body = {"member_id": member_id, "generation": generation,
                "offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]}
        result: dict[str, Any] = await self._json("POST", f"/v1/groups/{group}/offsets", json_body=body)
        return result

    async def describe_group(self, group: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/groups/{group}")
        return result

    async def list_groups(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/v1/groups"))["groups"])

    async def reset_group_offsets(self, group: str, topic: str, to: str, *, partitions: Sequence[int] | None = None,
                                  timestamp: int | None = None,
                                  offsets: dict[int, int] | None = None) -> dict[str, Any]:
        """``to``: earliest, latest, timestamp (with ``timestamp``) or offsets (``{partition: offset}``)."""
        body: dict[str, Any] = {"topic": topic, "to": to}
        if partitions is not None:
            body["partitions"] = list(partitions)
        if timestamp is not None:
            body["timestamp"] = timestamp
        if offsets is not None:
            body["offsets"] = [{"partition": p, "offset": o} for p, o in sorted(offsets.items())]
        result: dict[str, Any] = await self._json("POST", f"/v1/groups/{group}/offsets/reset", json_body=body)
        return result

    # ---- queues --------------------------------------------------------------------------------

    async def send_messages(self, queue: str, records: list[dict[str, Any]], *,
                            acks: str = "1") -> list[dict[str, int]]:
        """Send JSON records (the produce shape) to a queue."""
        result = await self._json("POST", f"/v1/queues/{queue}/messages", params={"acks": acks},
                                  json_body={"records": records})
        return list(result["offsets"])

    async def receive(self, queue: str, *, max_messages: int = 10, visibility_timeout_ms: int | None = None,
                      wait_ms: int = 0) -> list[dict[str, Any]]:
        """Leased messages (JSON form, each with its ``receipt`` and ``delivery_count``)."""
        body: dict[str, Any] = {"max_messages": max_messages, "wait_ms": wait_ms}
        if visibility_timeout_ms is not None:
            body["visibility_timeout_ms"] = visibility_timeout_ms
        result = await self._json("POST", f"/v1/queues/{queue}/receive", json_body=body)
        return list(result["messages"])

    async def receive_binary(self, queue: str, *, max_messages: int = 10, visibility_timeout_ms: int | None = None,
                             wait_ms: int = 0) -> list[dict[str, Any]]:
        """Like ``receive`` over msgpack: ``key``, ``value`` and header values are bytes."""
        body: dict[str, Any] = {"max_messages": max_messages, "wait_ms": wait_ms}
        if visibility_timeout_ms is not None:
            body["visibility_timeout_ms"] = visibility_timeout_ms
        _, _, raw = await self.request("POST", f"/v1/queues/{queue}/receive", data=_packb(body),
                                       headers={"Content-Type": MSGPACK_TYPE, "Accept": MSGPACK_TYPE})
        return list(msgpack.unpackb(raw, raw=False)["messages"])

    async def ack(self, queue: str, receipts: Sequence[str]) -> dict[str, Any]:
        _, _, raw = await self.request("POST", f"/v1/queues/{queue}/ack", data=_packb({"receipts": list(receipts)}),
                                       headers={"Content-Type": MSGPACK_TYPE})
        result: dict[str, Any] = json.loads(raw)
        return result

    async def nack(self, queue: str, receipts: Sequence[str], *, delay_ms: int = 0) -> dict[str, Any]:
        _, _, raw = await self.request("POST", f"/v1/queues/{queue}/nack",
                                       data=_packb({"receipts": list(receipts), "delay_ms": delay_ms}),
                                       headers={"Content-Type": MSGPACK_TYPE})
        result: dict[str, Any] = json.loads(raw)
        return result

    # ---- push streams --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def stream(self, topic: str, partition: int, *, offset: int | None = None,
                     keepalive_ms: int = 5000) -> AsyncIterator[AsyncIterator[Event]]:
        """Open a partition's push stream (SSE); iterate the ``record`` events (``json.loads`` of
        ``event.data`` gives the record). The stream is open when the ``async with`` body runs."""
        params: dict[str, Any] = {"keepalive_ms": keepalive_ms}
        if offset is not None:
            params["offset"] = offset
        async with self._event_stream(f"/v1/topics/{topic}/partitions/{partition}/stream", params) as events:
            yield events

    @contextlib.asynccontextmanager
    async def stream_member(self, group: str, member_id: str, *,
                            auto_offset_reset: OffsetReset = "earliest") -> AsyncIterator[AsyncIterator[Event]]:
        """Open a group member's push stream: ``assignment`` events at each generation, then
        ``record`` events (with topic and partition) of the assigned partitions."""
        async with self._event_stream(f"/v1/groups/{group}/members/{member_id}/stream",
                                      {"auto_offset_reset": auto_offset_reset}) as events:
            yield events

    @contextlib.asynccontextmanager
    async def _event_stream(self, path: str, params: dict[str, Any]) -> AsyncIterator[AsyncIterator[Event]]:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=STREAM_READ_TIMEOUT_S)
        try:
            async with self._http().get(self.url + path, params=params, timeout=timeout,
                                        headers={"Accept": "text/event-stream"}) as response:
                if response.status >= 400:
                    raise _problem(response.status, await response.read())
                yield _events(response)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise LogBrokerError(0, "transport", f"GET {path}: {exc!r}", retriable=True) from exc


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[Event]:
    parser = SseParser()
    pending = b""
    async for chunk in response.content.iter_any():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > STREAM_LINE_BYTES_MAX:
            raise LogBrokerError(0, "transport", f"a stream line exceeds {STREAM_LINE_BYTES_MAX} bytes")
        for line in lines:
            event = parser.feed(line.decode().rstrip("\r"))
            if event is not None:
                yield event


def _packb(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def _problem(status: int, body: bytes) -> LogBrokerError:
    try:
        problem = json.loads(body)
        return LogBrokerError(status, problem.get("code", "error"), problem.get("detail", ""),
                              retriable=bool(problem.get("retriable")) or status in RETRIABLE_STATUSES,
                              extra=problem)
    except ValueError:
        return LogBrokerError(status, "error", body[:200].decode(errors="replace"),
                              retriable=status in RETRIABLE_STATUSES)


@dataclasses.dataclass
class _Pending:
    records: list[ProducerRecord] = dataclasses.field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = dataclasses.field(default_factory=list)
    size_bytes: int = 0
    timer: asyncio.TimerHandle | None = None


class Producer:
    """Batches records per partition (``linger_ms``, ``batch_bytes``) and sends prebuilt batches.

    ``send`` returns a future per record; ``buffer_bytes_max`` bounds what may wait unsent (send
    waits for room), ``in_flight_max`` bounds concurrent requests, ``retries`` bounds resends of
    a batch on retriable errors (at-least-once: a retried batch may be stored twice)."""

    def __init__(self, client: Client, *, linger_ms: int = 5, batch_bytes: int = 1 << 20, acks: str = "1",
                 retries: int = 5, retry_backoff_ms: int = 100, buffer_bytes_max: int = 64 << 20,
                 in_flight_max: int = 8) -> None:
        self.client = client
        self.linger_ms, self.batch_bytes, self.acks = linger_ms, batch_bytes, acks
        self.retries, self.retry_backoff_ms = retries, retry_backoff_ms
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._partitions: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self._in_flight = asyncio.Semaphore(in_flight_max)
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffered = 0
        self._buffer_max = buffer_bytes_max
        self._room = asyncio.Condition()

    async def partitions_for(self, topic: str) -> int:
        if topic not in self._partitions:
            self._partitions[topic] = int((await self.client.describe_topic(topic))["partition_count"])
        return self._partitions[topic]

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes]] = (), partition: int | None = None,
                   timestamp: int | None = None) -> asyncio.Future[RecordMetadata]:
        count = await self.partitions_for(topic)
        if partition is None:
            partition = key_partition(key, count) if key is not None else self._sticky.setdefault(topic, 0) % count
        size = len(value or b"") + len(key or b"") + sum(len(n) + len(v) for n, v in headers) + 16
        async with self._room:
            await self._room.wait_for(lambda: self._buffered + size <= self._buffer_max or self._buffered == 0)
            self._buffered += size
        pending = self._pending.setdefault((topic, partition), _Pending())
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        pending.records.append(ProducerRecord(value, key, tuple(headers), timestamp))
        pending.futures.append(future)
        pending.size_bytes += size
        if pending.size_bytes >= self.batch_bytes:
            self._ship(topic, partition)
        elif pending.timer is None:
            pending.timer = asyncio.get_running_loop().call_later(self.linger_ms / 1000, self._ship, topic, partition)
        return future

    async def send_and_wait(self, topic: str, value: bytes | None, **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, **kwargs))

    def _ship(self, topic: str, partition: int) -> None:
        pending = self._pending.pop((topic, partition), None)
        if pending is None or not pending.records:
            return
        if pending.timer is not None:
            pending.timer.cancel()
        if partition == self._sticky.get(topic, -1) % max(1, self._partitions.get(topic, 1)):
            self._sticky[topic] = self._sticky.get(topic, 0) + 1
        task = asyncio.get_running_loop().create_task(self._send_batch(topic, partition, pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, topic: str, partition: int, pending: _Pending) -> None:
        batch = encode_batch(pending.records)
        try:
            async with self._in_flight:
                base = await self._with_retries(topic, partition, batch)
            for i, future in enumerate(pending.futures):
                if not future.done():
                    future.set_result(RecordMetadata(topic, partition, base + i))
        except LogBrokerError as exc:
            for future in pending.futures:
                if not future.done():
                    future.set_exception(exc)
        finally:
            async with self._room:
                self._buffered -= pending.size_bytes
                self._room.notify_all()

    async def _with_retries(self, topic: str, partition: int, batch: bytes) -> int:
        for attempt in range(self.retries + 1):
            try:
                return await self.client.produce_batch(topic, partition, batch, acks=self.acks)
            except LogBrokerError as exc:
                if not exc.retriable or attempt == self.retries:
                    raise
                await asyncio.sleep(self.retry_backoff_ms * (2 ** attempt) / 1000)
        raise AssertionError("unreachable")

    async def flush(self) -> None:
        """Send everything buffered and wait for every answer."""
        for topic, partition in list(self._pending):
            self._ship(topic, partition)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Consumer:
    """Reads assigned partitions from positions it keeps itself (manual assignment, no group)."""

    def __init__(self, client: Client, *, max_bytes: int = 1 << 20, wait_ms: int = 500,
                 auto_offset_reset: OffsetReset = "earliest") -> None:
        self.client = client
        self.max_bytes, self.wait_ms, self.auto_offset_reset = max_bytes, wait_ms, auto_offset_reset
        self._positions: dict[tuple[str, int], int | None] = {}

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._positions = {tp: self._positions.get(tp) for tp in partitions}

    def assignment(self) -> list[tuple[str, int]]:
        return list(self._positions)

    def positions(self) -> dict[tuple[str, int], int]:
        """The known next offset of each assigned partition (unresolved ones are left out)."""
        return {tp: offset for tp, offset in self._positions.items() if offset is not None}

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset

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
        if not self._positions:
            return []
        records = await self._fetch_all(0)
        if records:
            return records
        wait = self.wait_ms if timeout_ms is None else timeout_ms
        return await self._fetch_all(wait) if wait > 0 else []

    async def _fetch_all(self, wait_ms: int) -> list[ConsumerRecord]:
        tasks = {asyncio.ensure_future(self._fetch_one(tp, wait_ms)): tp for tp in self._positions}
        if wait_ms == 0:
            await asyncio.wait(tasks)
        else:
            _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        out: list[ConsumerRecord] = []
        for task in tasks:
            if task.cancelled():
                continue
            out.extend(task.result())
        return out

    async def _fetch_one(self, tp: tuple[str, int], wait_ms: int) -> list[ConsumerRecord]:
        topic, partition = tp
        offset = await self.position(topic, partition)
        fetched = await self.client.fetch_batches(topic, partition, offset, max_bytes=self.max_bytes, wait_ms=wait_ms)
        records = fetched.records(offset)
        if fetched.next_offset > offset:
            self._positions[tp] = fetched.next_offset
        return [ConsumerRecord(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


# The group and queue consumers live in their own modules and are part of this one's API.
from logbroker.group_consumer import CommitFailedError, GroupConsumer  # noqa: E402
from logbroker.queue_consumer import QueueConsumer, QueueMessage  # noqa: E402

__all__ = ["Client", "CommitFailedError", "Consumer", "ConsumerRecord", "FetchedBatches", "GroupConsumer",
           "LogBrokerError", "Producer", "QueueConsumer", "QueueMessage", "RecordMetadata"]
