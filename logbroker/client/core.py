"""``Client``: the HTTP API of a node or a cluster (admin, users and access, produce and fetch;
the group, queue and push-stream calls come from ``logbroker.client.calls``), with bearer tokens
got and renewed from a username and password. Calls go to a partition's leader when they concern
one (``logbroker.client.metadata``) and are retried only when that is safe
(``logbroker.client.routing``). Every call has a timeout; the connection pool and the retries are
bounded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import aiohttp

from logbroker.client.calls import GroupQueueCalls
from logbroker.client.consumer_batch import decode_fetched
from logbroker.client.errors import RETRIABLE_STATUSES, LogBrokerError, problem_error, transport_error
from logbroker.client.metadata import (
    LEADER_HINT,
    METADATA_MAX_AGE_S,
    MetadataCache,
    parse_bootstrap,
    parse_in_sync,
    parse_leaders,
    parse_nodes,
)
from logbroker.client.produce_stream import IN_FLIGHT_MAX, ProduceStream
from logbroker.client.routing import RetryPolicy, decide
from logbroker.client.subscription import PENDING_BYTES_MAX, Subscription
from segments.batch import Record

DEFAULT_URL: Final = "http://127.0.0.1:8080"
BATCH_TYPE: Final = "application/vnd.logbroker.batch"
TOKEN_ENV: Final = "LOGBROKER_TOKEN"
USER_ENV: Final = "LOGBROKER_USER"
PASSWORD_ENV: Final = "LOGBROKER_PASSWORD"
CA_FILE_ENV: Final = "LOGBROKER_CA_FILE"
CERT_FILE_ENV: Final = "LOGBROKER_CERT_FILE"
KEY_FILE_ENV: Final = "LOGBROKER_KEY_FILE"
REFRESH_MARGIN_S: Final = 30.0
DIRECT_READ_BYTES_MIN: Final = 256 * 1024
DIRECT_READ_BYTES_MAX: Final = 256 * 1024 * 1024
CONNECT_TIMEOUT_S: Final = 10.0
# A metadata read not answered this soon is asked of the next node as well (first answer wins): a
# paused or cut-off node accepts connections and answers nothing, and every call waits on the read.
METADATA_HEDGE_S: Final = 0.25
T = TypeVar("T")


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
    """Admin and low-level data calls against a node or a cluster.

    ``url``: one node's URL, several (a list, or one comma-separated string), any of which may be
    down: the client reads the cluster's nodes and each topic's partition leaders from whichever
    answers (``logbroker.client.metadata``, kept ``metadata_max_age_s``), sends partition-scoped
    calls (produce to a partition, fetch, offsets, push streams) straight to the partition's
    leader, and every other call, or one whose leader is unknown or unreachable, to any node
    (which forwards). A call that fails with a retriable cluster error (503 ``not_leader``,
    ``no_leader``, ``not_enough_replicas``, ``coordinator_unavailable``) or cannot connect is sent
    again, after reading the metadata again, up to ``retry.attempts`` tries with backoff
    (``Retry-After`` honoured, capped); a read is also sent again after a timeout, a write never
    (it may have been applied: a produce sent twice would be stored twice). See
    ``logbroker.client.routing``.

    Credentials: a bearer ``token``, or ``username``/``password`` (the client gets a token with
    them and gets a new one before it expires, or once when the node answers 401). With none
    given, ``LOGBROKER_TOKEN``, ``LOGBROKER_USER`` and ``LOGBROKER_PASSWORD`` are read. For HTTPS
    with a private CA, ``ca_file`` (or ``LOGBROKER_CA_FILE``) names the CA certificate; where the
    nodes require client certificates (``--tls-client-ca-file``), ``cert_file`` and ``key_file``
    (or ``LOGBROKER_CERT_FILE``/``LOGBROKER_KEY_FILE``) name this client's."""

    def __init__(self, url: str | Sequence[str] = DEFAULT_URL, *, timeout_s: float = 60.0,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, session: aiohttp.ClientSession | None = None,
                 token: str | None = None, username: str | None = None, password: str | None = None,
                 ca_file: str | None = None, metadata_max_age_s: float = METADATA_MAX_AGE_S,
                 retry: RetryPolicy | None = None, client_rack: str | None = None,
                 cert_file: str | None = None, key_file: str | None = None) -> None:
        """``client_rack`` (Kafka's ``client.rack``): fetches go to an in-sync replica in that rack
        when there is one, which serves up to its high watermark; else to the leader."""
        self.bootstrap = parse_bootstrap(url)
        self.client_rack = client_rack or None
        self.url = self.bootstrap[0]
        self.retry = retry or RetryPolicy()
        self._metadata = MetadataCache(self.bootstrap, max_age_s=metadata_max_age_s)
        self._lookups: dict[str | None, asyncio.Task[None]] = {}  # one metadata read per topic at a time
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(connect_timeout_s, timeout_s))
        self._session = session
        self._own_session = session is None
        if token is None and username is None and password is None:
            token, username, password = (os.environ.get(TOKEN_ENV) or None, os.environ.get(USER_ENV) or None,
                                         os.environ.get(PASSWORD_ENV) or None)
        self._credentials = TokenSource(self, token, username, password)
        self._ca_file = ca_file or os.environ.get(CA_FILE_ENV) or None
        self._cert_file = cert_file or os.environ.get(CERT_FILE_ENV) or None
        self._key_file = key_file or os.environ.get(KEY_FILE_ENV) or None
        if bool(self._cert_file) != bool(self._key_file):
            raise ValueError("cert_file and key_file go together")

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            tls = ssl.create_default_context(cafile=self._ca_file) if self._ca_file or self._cert_file else None
            if tls is not None and self._cert_file:
                tls.load_cert_chain(self._cert_file, self._key_file)
            self._session = aiohttp.ClientSession(timeout=self._timeout,
                                                  connector=aiohttp.TCPConnector(limit=64, ssl=tls or True))
        return self._session

    async def close(self) -> None:
        lookups = list(self._lookups.values())
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      json_body: Any = None, data: bytes | None = None, headers: dict[str, str] | None = None,
                      partition: tuple[str, int] | None = None, idempotent: bool | None = None,
                      near: bool = False) -> tuple[int, dict[str, str], bytes]:
        """Send a call to ``partition``'s leader (when given and known) or any node, retried as
        the class says. ``idempotent`` (default: a GET is) allows a retry after a timeout.
        ``near``: a read that an in-sync replica in ``client_rack`` may serve instead."""

        async def once(url: str) -> tuple[int, dict[str, str], bytes]:
            return await self._authorized(url, method, path, params=params, json_body=json_body, data=data,
                                          headers=headers)

        answer = await self.routed(once, partition=partition, idempotent=method == "GET" if idempotent is None
                                   else idempotent, near=near)
        if partition is not None and LEADER_HINT in answer[1] and not near:  # forwarded: leadership moved
            self._metadata.invalidate(partition[0])
        return answer

    async def routed(self, call: Callable[[str], Awaitable[T]], *, partition: tuple[str, int] | None = None,
                     idempotent: bool = False, discover: bool = True, near: bool = False) -> T:
        """``call(url)`` on the partition's leader or any node, sent again (to the node the
        refreshed metadata names) while ``routing.decide`` allows. ``discover=False`` (the login,
        which metadata reads wait for) reads no metadata: it only tries the nodes already known."""
        for attempt in range(self.retry.attempts):
            url = await self._target(partition, near=near and attempt == 0)
            try:
                result = await call(url)
            except LogBrokerError as exc:
                if exc.status != 0:  # it answered: not silent, whatever it said
                    self._metadata.mark_answered(url)
                decision = decide(exc, attempt, self.retry, idempotent=idempotent, jitter=random.random())
                if not decision.retry:
                    raise
                if decision.mark_down:
                    self._metadata.mark_down(url, time.monotonic())
                if decision.refresh:
                    self._metadata.invalidate(partition[0] if partition else None)
                await asyncio.sleep(decision.delay_s)
                if decision.refresh and partition is None and discover:
                    await self._lookup(None)  # other nodes to try (a partition call looks up in _target)
            else:
                self._metadata.mark_up(url)
                return result
        raise AssertionError("unreachable: the last attempt raises")

    async def _target(self, partition: tuple[str, int] | None, *, near: bool = False) -> str:
        """The URL to send a call to: the partition's leader when known and reachable (for a
        ``near`` read, an in-sync replica in ``client_rack`` first), else the best of the others.
        A retry goes to the leader: the rack's replica may be what failed."""
        leader = None
        if partition is not None:
            topic, number = partition
            now = time.monotonic()
            if self._metadata.nodes_stale(now) or self._metadata.topic_stale(topic, now):
                await self._lookup(topic)
            if near and self.client_rack:
                leader = self._metadata.rack_url(topic, number, self.client_rack, time.monotonic())
            leader = leader or self._metadata.leader_url(topic, number, time.monotonic())
        return self._metadata.candidates(time.monotonic(), leader)[0]

    async def _lookup(self, topic: str | None) -> None:
        """Read the nodes and ``topic``'s leaders again, once for all callers waiting on them."""
        task = self._lookups.get(topic)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._read_metadata(topic))
            self._lookups[topic] = task
            task.add_done_callback(lambda done: self._lookup_done(topic, done))
        await asyncio.shield(task)

    def _lookup_done(self, topic: str | None, task: asyncio.Task[None]) -> None:
        if self._lookups.get(topic) is task:
            del self._lookups[topic]
        if not task.cancelled():
            task.exception()  # seen, even when every caller waiting on it was cancelled

    async def _read_metadata(self, topic: str | None) -> None:
        """Fill the cache from the first node that answers (each tried once, no waits): a node
        that cannot be reached or answers 5xx is passed over; a 4xx, or no answer at all, leaves
        the routing to any node for a short while."""
        if self._metadata.nodes_stale(time.monotonic()):
            body = await self._metadata_get("/v1/cluster")
            if body is None:
                self._metadata.nodes_failed(time.monotonic())
            else:
                self._metadata.set_nodes(parse_nodes(body), time.monotonic())
        if topic is not None and self._metadata.topic_stale(topic, time.monotonic()):
            body = await self._metadata_get(f"/v1/topics/{topic}?offsets=false")  # asks no other node
            if body is None:
                self._metadata.topic_failed(topic, time.monotonic())
            else:
                self._metadata.set_topic(topic, parse_leaders(body), time.monotonic(), parse_in_sync(body))

    async def _metadata_get(self, path: str) -> Any:
        """``path`` read from the candidates, best first: the next is asked once the ones asked
        have failed or have not answered within ``METADATA_HEDGE_S``; the first answer wins and
        the other reads are cancelled. None when every one failed."""
        waiting = list(self._metadata.candidates(time.monotonic()))
        asked: dict[asyncio.Task[tuple[int, dict[str, str], bytes]], str] = {}
        try:
            while waiting or asked:
                if waiting:
                    url = waiting.pop(0)
                    task = asyncio.ensure_future(self._authorized(url, "GET", path, params=None, json_body=None,
                                                                  data=None, headers=None))
                    task.add_done_callback(_retrieved)
                    asked[task] = url
                done, _ = await asyncio.wait(asked, timeout=METADATA_HEDGE_S if waiting else None,
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    url = asked.pop(task)
                    try:
                        _, _, body = task.result()
                    except LogBrokerError as exc:
                        if exc.status != 0:
                            self._metadata.mark_answered(url)
                        if 0 < exc.status < 500:
                            return None  # the same answer everywhere (no such topic, not allowed)
                        if exc.status == 0:
                            self._metadata.mark_down(url, time.monotonic())
                        continue
                    self._metadata.mark_up(url)
                    try:
                        return json.loads(body)
                    except ValueError:
                        return None
            return None
        finally:
            for task in asked:
                task.cancel()

    async def _authorized(self, url: str, method: str, path: str, *, params: dict[str, Any] | None,
                          json_body: Any, data: bytes | None,
                          headers: dict[str, str] | None) -> tuple[int, dict[str, str], bytes]:
        """One call with the bearer token; once more with a new token when the node answers 401."""
        for attempt in (0, 1):
            auth = await self._credentials.header()
            all_headers = {**(headers or {}), **auth} if auth else headers
            try:
                return await self._send(url, method, path, params=params, json_body=json_body, data=data,
                                        headers=all_headers)
            except LogBrokerError as exc:
                if exc.status != 401 or attempt or not self._credentials.renewable:
                    raise
                self._credentials.expire()
        raise AssertionError("unreachable")

    async def _send(self, url: str, method: str, path: str, *, params: dict[str, Any] | None, json_body: Any,
                    data: bytes | None, headers: dict[str, str] | None) -> tuple[int, dict[str, str], bytes]:
        try:
            async with self._http().request(method, url + path, params=params, json=json_body, data=data,
                                            headers=headers) as response:
                body = await _read_body(response)
                if response.status >= 400:
                    raise problem_error(response.status, body, response.headers)
                return response.status, dict(response.headers), body
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(url, f"{method} {path}", exc) from exc

    async def login(self, username: str, password: str) -> dict[str, Any]:
        """``POST /v1/auth/token``: the token answer (``access_token``, ``expires_in``)."""
        async def once(url: str) -> tuple[int, dict[str, str], bytes]:
            return await self._send(url, "POST", "/v1/auth/token", params=None, data=None, headers=None,
                                    json_body={"username": username, "password": password})

        _, _, body = await self.routed(once, discover=False)
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

    async def describe_topic(self, name: str, *, offsets: bool = True) -> dict[str, Any]:
        """The topic, its config and its partitions' placement; with ``offsets`` also each
        partition's offsets and size, which the node asks the partition's leader for."""
        result: dict[str, Any] = await self._json("GET", f"/v1/topics/{name}",
                                                  params=None if offsets else {"offsets": "false"})
        return result

    async def alter_topic_config(self, name: str, changes: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /v1/topics/{name}/config``: change the given config keys of a live topic (None
        puts a key back to its default; owner or admin). Returns the topic as described after."""
        result: dict[str, Any] = await self._json("PATCH", f"/v1/topics/{name}/config", json_body=changes,
                                                  idempotent=True)  # it sets values: sending it again is harmless
        return result

    async def list_topics(self) -> list[dict[str, Any]]:
        result = await self._json("GET", "/v1/topics")
        return list(result["topics"])

    async def cluster(self) -> dict[str, Any]:
        """``GET /v1/cluster``: the nodes (with ``alive`` from their leases) and the placement of
        the topics the caller may see."""
        result: dict[str, Any] = await self._json("GET", "/v1/cluster")
        return result

    async def rebalance(self) -> dict[str, Any]:
        """Spread the partitions evenly over the live nodes (admin); the moves made."""
        result: dict[str, Any] = await self._json("POST", "/v1/cluster/rebalance")
        return result

    async def decommission(self, node_id: int) -> dict[str, Any]:
        """Move every partition off node ``node_id`` (admin); the moves made."""
        result: dict[str, Any] = await self._json("POST", "/v1/cluster/decommission", json_body={"node_id": node_id})
        return result

    async def list_offset(self, topic: str, partition: int, at: str | int = "latest") -> int:
        result = await self._json("GET", f"/v1/topics/{topic}/partitions/{partition}/offsets", params={"at": str(at)},
                                  partition=(topic, partition))
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

    async def change_password(self, username: str, password: str, *, current_password: str | None = None) -> None:
        """Set ``username``'s password. Changing your own needs your ``current_password`` (a token
        alone is not enough); an admin resetting another user's does not."""
        body = {"password": password}
        if current_password is not None:
            body["current_password"] = current_password
        await self.request("PUT", f"/v1/users/{username}/password", json_body=body)

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
        """Produce JSON records (``{"key", "value", "headers", "partition", "timestamp"}``) through
        any node. Sent again only when nothing was appended (a cluster 503, no connection)."""
        result = await self._json("POST", f"/v1/topics/{topic}/records", params={"acks": acks},
                                  json_body={"records": records})
        return list(result["offsets"])

    async def init_producer(self) -> tuple[int, int]:
        """A producer id and epoch issued to this client's user, for idempotent prebuilt batches."""
        result = await self._json("POST", "/v1/producers", idempotent=True)
        return int(result["producer_id"]), int(result["producer_epoch"])

    async def leader_url(self, topic: str, partition: int, *, refresh: bool = False) -> str | None:
        """The partition's leader as the metadata last named it (None: not known). ``refresh``:
        read the nodes and the topic's leaders again first (one read for all callers waiting on
        it)."""
        if refresh:
            self._metadata.invalidate(topic)
            await self._lookup(topic)
        return self._metadata.leader_url(topic, partition, time.monotonic())

    async def target_url(self, topic: str, partition: int) -> str:
        """Where a call to the partition goes now (``produce_batch``'s node): its leader when
        known and reachable, else the best other node."""
        return await self._target((topic, partition))

    def mark_silent(self, urls: Iterable[str]) -> None:
        """Calls to ``urls`` have gone unanswered for long (a producer's hedge): metadata reads and
        calls without a known leader ask the other nodes first for a while, or until they answer."""
        now = time.monotonic()
        for url in urls:
            self._metadata.mark_silent(url, now)

    async def produce_batch(self, topic: str, partition: int, batch: bytes, *, acks: str = "1") -> int:
        """Send one prebuilt batch to the partition's leader; returns its base offset. Sent again
        only when nothing was appended (a cluster 503, no connection): never after a timeout."""
        result = await self._json("POST", f"/v1/topics/{topic}/records", params={"acks": acks, "partition": partition},
                                  data=batch, headers={"Content-Type": BATCH_TYPE}, partition=(topic, partition))
        return int(result["offsets"][0]["offset"])

    async def produce_stream(self, topic: str, partition: int, *, acks: str = "1",
                             in_flight_max: int = IN_FLIGHT_MAX) -> ProduceStream:
        """Open a produce stream (a WebSocket) to the partition's leader: prebuilt batches sent
        one after another on one connection, each answered in order (``ProduceStream.send``).
        A refused upgrade raises ``LogBrokerError`` with the node's status."""
        url, socket = await self._partition_socket(topic, partition, "produce", {"acks": acks})
        return ProduceStream(socket, url, in_flight_max=in_flight_max)

    async def subscribe(self, topic: str, partition: int, *, offset: int | None = None) -> Subscription:
        """Open a subscribe stream (a WebSocket) on the partition's leader: its stored batches
        from ``offset`` (default: the end) pushed as they are appended; iterate the returned
        ``Subscription`` for ``ConsumerBatch`` objects, and close it when done. The binary twin
        of ``stream`` (no JSON on either side). A refused upgrade raises ``LogBrokerError`` with
        the node's status."""
        params = {} if offset is None else {"offset": offset}
        url, socket = await self._partition_socket(topic, partition, "subscribe", params,
                                                   max_msg_size=PENDING_BYTES_MAX)
        return Subscription(socket, url, topic, partition, 0 if offset is None else offset)

    async def _partition_socket(self, topic: str, partition: int, kind: str, params: dict[str, Any], *,
                                max_msg_size: int = 4 * 1024 * 1024) -> tuple[str, aiohttp.ClientWebSocketResponse]:
        """A WebSocket to ``/v1/topics/{topic}/partitions/{partition}/{kind}`` on the partition's
        leader, and that node's URL; a refused upgrade is ``LogBrokerError`` with its status."""
        url = await self._target((topic, partition))
        path = f"/v1/topics/{topic}/partitions/{partition}/{kind}"
        try:
            socket = await self._http().ws_connect(url + path, params=params, max_msg_size=max_msg_size,
                                                   headers=await self._credentials.header() or None)
        except aiohttp.WSServerHandshakeError as exc:
            raise LogBrokerError(exc.status, "refused", f"{path} on {url}: {exc.message}",
                                 retriable=exc.status in RETRIABLE_STATUSES) from exc
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise transport_error(url, f"GET {path}", exc) from exc
        return url, socket

    async def fetch_batches(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
                            wait_ms: int = 0) -> FetchedBatches:
        params: dict[str, Any] = {"offset": offset, "max_bytes": max_bytes, "wait_ms": wait_ms}
        if self.client_rack:
            params["rack"] = self.client_rack
        _, headers, body = await self.request(
            "GET", f"/v1/topics/{topic}/partitions/{partition}/records", params=params,
            headers={"Accept": BATCH_TYPE}, partition=(topic, partition), near=True)
        return FetchedBatches(body, int(headers["X-LogBroker-Next-Offset"]), int(headers["X-LogBroker-High-Watermark"]))


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Mark a read's outcome seen (a hedged read that lost the race may fail unheard)."""
    if not task.cancelled():
        task.exception()


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

