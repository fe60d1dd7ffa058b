"""The Python client (asyncio, on aiohttp): admin calls, a batching ``Producer`` and a ``Consumer``
with manual partition assignment. ``logbroker.sync_client`` wraps these for scripts.

The producer builds binary batches itself (``segments.batch``) and sends each as one prebuilt
batch, so the broker only validates and appends; the consumer fetches raw batches and verifies
their checksums before decoding. Every buffer and retry is bounded (see the constructor limits).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import ssl
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal

import aiohttp

from logbroker.client_calls import GroupQueueCalls
from logbroker.client_errors import LogBrokerError, problem_error
from logbroker.consumer_batch import ConsumerBatch, ConsumerRecord, decode_fetched
from logbroker.records import key_partition
from segments.batch import BATCH_RECORDS_MAX, ProducerRecord, Record, encode_batch

DEFAULT_URL: Final = "http://127.0.0.1:8080"
BATCH_TYPE: Final = "application/vnd.logbroker.batch"
TOKEN_ENV: Final = "LOGBROKER_TOKEN"
USER_ENV: Final = "LOGBROKER_USER"
PASSWORD_ENV: Final = "LOGBROKER_PASSWORD"
CA_FILE_ENV: Final = "LOGBROKER_CA_FILE"
REFRESH_MARGIN_S: Final = 30.0
DIRECT_READ_BYTES_MIN: Final = 256 * 1024
DIRECT_READ_BYTES_MAX: Final = 256 * 1024 * 1024
OffsetReset = Literal["earliest", "latest"]


@dataclasses.dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class FetchedBatches:
    data: bytes
    next_offset: int
    high_watermark: int

    def records(self, from_offset: int) -> list[Record]:
        """Decode (checksums verified) the records at or after ``from_offset``."""
        batch = decode_fetched(self.data, "", 0, from_offset)
        rows = zip(batch.offsets, batch.timestamps, batch.keys, batch.values, map(list, batch.headers), strict=True)
        return list(map(Record._make, rows))


class Client(GroupQueueCalls):
    """Admin and low-level data calls against one node.

    Credentials: a bearer ``token``, or ``username``/``password`` (the client gets a token with
    them and gets a new one before it expires, or once when the node answers 401). With none
    given, ``LOGBROKER_TOKEN``, ``LOGBROKER_USER`` and ``LOGBROKER_PASSWORD`` are read. For HTTPS
    with a private CA, ``ca_file`` (or ``LOGBROKER_CA_FILE``) names the CA certificate."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout_s: float = 60.0,
                 session: aiohttp.ClientSession | None = None, token: str | None = None,
                 username: str | None = None, password: str | None = None, ca_file: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session = session
        self._own_session = session is None
        if token is None and username is None and password is None:
            token, username, password = (os.environ.get(TOKEN_ENV) or None, os.environ.get(USER_ENV) or None,
                                         os.environ.get(PASSWORD_ENV) or None)
        self._credentials = TokenSource(self, token, username, password)
        self._ca_file = ca_file or os.environ.get(CA_FILE_ENV) or None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            tls = ssl.create_default_context(cafile=self._ca_file) if self._ca_file else None
            self._session = aiohttp.ClientSession(timeout=self._timeout,
                                                  connector=aiohttp.TCPConnector(limit=64, ssl=tls or True))
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      json_body: Any = None, data: bytes | None = None,
                      headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        for attempt in (0, 1):
            auth = await self._credentials.header()
            all_headers = {**(headers or {}), **auth} if auth else headers
            try:
                return await self._send(method, path, params=params, json_body=json_body, data=data,
                                        headers=all_headers)
            except LogBrokerError as exc:
                if exc.status != 401 or attempt or not self._credentials.renewable:
                    raise
                self._credentials.expire()
        raise AssertionError("unreachable")

    async def _send(self, method: str, path: str, *, params: dict[str, Any] | None, json_body: Any,
                    data: bytes | None, headers: dict[str, str] | None) -> tuple[int, dict[str, str], bytes]:
        try:
            async with self._http().request(method, self.url + path, params=params, json=json_body, data=data,
                                            headers=headers) as response:
                body = await _read_body(response)
                if response.status >= 400:
                    raise problem_error(response.status, body)
                return response.status, dict(response.headers), body
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise LogBrokerError(0, "transport", f"{method} {path}: {exc!r}", retriable=True) from exc

    async def login(self, username: str, password: str) -> dict[str, Any]:
        """``POST /v1/auth/token``: the token answer (``access_token``, ``expires_in``)."""
        _, _, body = await self._send("POST", "/v1/auth/token", params=None, data=None, headers=None,
                                      json_body={"username": username, "password": password})
        result: dict[str, Any] = json.loads(body)
        return result

    async def _auth_header(self) -> dict[str, str]:
        return await self._credentials.header() or {}

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

    # ---- users and access ----------------------------------------------------------------------

    async def create_user(self, username: str, password: str, *, role: str = "user",
                          quotas: dict[str, int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"username": username, "password": password, "role": role}
        if quotas:
            body["quotas"] = quotas
        result: dict[str, Any] = await self._json("POST", "/v1/users", json_body=body)
        return result

    async def list_users(self) -> list[dict[str, Any]]:
        return list((await self._json("GET", "/v1/users"))["users"])

    async def delete_user(self, username: str, *, reassign_to: str | None = None) -> dict[str, Any]:
        params = {"reassign_to": reassign_to} if reassign_to else None
        result: dict[str, Any] = await self._json("DELETE", f"/v1/users/{username}", params=params)
        return result

    async def change_password(self, username: str, password: str) -> None:
        await self.request("PUT", f"/v1/users/{username}/password", json_body={"password": password})

    async def user_topics(self, username: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/users/{username}/topics")
        return result

    async def get_acl(self, topic: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/topics/{topic}/acl")
        return result

    async def set_acl(self, topic: str, user: str, permissions: Sequence[str]) -> dict[str, Any]:
        """Set ``user``'s permissions on ``topic`` (``read``, ``write``; empty revokes)."""
        result: dict[str, Any] = await self._json("PUT", f"/v1/topics/{topic}/acl",
                                                  json_body={"user": user, "permissions": list(permissions)})
        return result

    async def set_owner(self, topic: str, owner: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("PUT", f"/v1/topics/{topic}/owner", json_body={"owner": owner})
        return result

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


async def _read_body(response: aiohttp.ClientResponse) -> bytes:
    """The whole body. A large one with a known length is copied once, chunk by chunk, into a
    buffer of that length: ``response.read()`` joins the chunks twice, which costs a consumer
    a tenth of its time at 4 MiB fetches."""
    length = response.content_length
    if length is None or not DIRECT_READ_BYTES_MIN <= length <= DIRECT_READ_BYTES_MAX \
            or "Content-Encoding" in response.headers:
        return await response.read()  # grows with what arrives, whatever the length claims
    buf = bytearray(length)
    view = memoryview(buf)
    position = 0
    while chunk := (await response.content.readchunk())[0]:
        end = position + len(chunk)
        if end > length:
            raise aiohttp.ClientPayloadError(f"body longer than its Content-Length of {length}")
        view[position:end] = chunk
        position = end
    if position != length:
        raise aiohttp.ClientPayloadError(f"body of {position} bytes, Content-Length said {length}")
    # A bytearray is a bytes-like object for every reader of a body (memoryview, msgpack, json).
    return buf  # type: ignore[return-value]


class TokenSource:
    """The bearer token a ``Client`` sends: a fixed one, or one got with a username and password
    and renewed before it expires (``REFRESH_MARGIN_S`` or a fifth of its lifetime before, whichever
    is sooner), or when the node refuses it; one login at a time."""

    def __init__(self, client: Client, token: str | None, username: str | None, password: str | None) -> None:
        if (username is None) != (password is None):
            raise ValueError("username and password go together")
        self._client = client
        self._token = token
        self._username, self._password = username, password
        self._expires_at = math.inf if token else 0.0
        self._lock = asyncio.Lock()

    @property
    def renewable(self) -> bool:
        return self._username is not None

    def expire(self) -> None:
        if self.renewable:
            self._expires_at = 0.0

    async def header(self) -> dict[str, str] | None:
        if self.renewable and time.monotonic() >= self._expires_at:
            async with self._lock:
                if time.monotonic() >= self._expires_at:
                    assert self._username is not None and self._password is not None
                    answer = await self._client.login(self._username, self._password)
                    self._token = str(answer["access_token"])
                    lifetime = float(answer["expires_in"])
                    self._expires_at = time.monotonic() + lifetime - min(REFRESH_MARGIN_S, lifetime / 5)
        return {"Authorization": f"Bearer {self._token}"} if self._token else None


@dataclasses.dataclass
class _Pending:
    records: list[ProducerRecord] = dataclasses.field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = dataclasses.field(default_factory=list)
    size_bytes: int = 0
    timer: asyncio.TimerHandle | None = None


class Producer:
    """Batches records per partition (``linger_ms``, ``batch_bytes``, at most ``BATCH_RECORDS_MAX``
    records: what the broker takes in one batch) and sends prebuilt batches.

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
        if pending.size_bytes >= self.batch_bytes or len(pending.records) >= BATCH_RECORDS_MAX:
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
        if not self._positions:
            return []
        batches = await self._fetch_all(0)
        if batches:
            return batches
        wait = self.wait_ms if timeout_ms is None else timeout_ms
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


# The group and queue consumers live in their own modules and are part of this one's API.
from logbroker.group_consumer import CommitFailedError, GroupConsumer  # noqa: E402
from logbroker.queue_consumer import QueueConsumer, QueueMessage  # noqa: E402

__all__ = ["Client", "CommitFailedError", "Consumer", "ConsumerBatch", "ConsumerRecord", "FetchedBatches",
           "GroupConsumer", "LogBrokerError", "Producer", "QueueConsumer", "QueueMessage", "RecordMetadata"]
