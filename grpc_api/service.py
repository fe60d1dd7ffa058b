"""``logbroker.v1.Broker``: Publish and Subscribe over the node's own paths.

Every call comes through ``grpc_api.gate``, which authenticated the ``authorization`` metadata as
HTTP does (``AuthService``) before the request arrived; here it is authorized on the topic (write
for Publish, read for Subscribe) and charged to the caller's produce or fetch quota. Records go
through ``Node.produce_records`` and ``Node.fetch``, which forward to the partition's leader, so any
node answers.

Subscribe follows the tail with one bounded long-poll at a time and sends the next records only
when gRPC has taken the previous ones (an async generator: a slow client holds the node to one
fetch of ``FETCH_BYTES`` in memory). Access is checked again at least every
``access_recheck_ms``. With a ``group``, the caller becomes a member of that consumer group
through the node's own HTTP API (join, the member's push stream, commits, leave), which already
routes group calls to the node coordinating the group on a cluster; each user's calls go through
a client of their own (``grpc_api.group_clients``), so no user's subscriptions wait on another's.

A stored batch whose records cannot be decoded is passed over (the records around it are sent) and
reported in the node's log and metrics (decision 0220): a ``Record`` stream has no place to say so.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any, Final

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from coordinator.models import validate_name, validate_rack
from grpc_api import stubs
from grpc_api.convert import incoming_records, record_messages
from grpc_api.errors import abort_for
from grpc_api.gate import Caller, authorization_of
from grpc_api.group_clients import GroupClients
from http_api.tls import node_client_context
from logbroker.auth.permissions import Principal
from logbroker.auth.quotas import QuotaLimits
from logbroker.errors import ANY_ERROR, InvalidRequestError, NotAvailableError
from logbroker.groups.requests import group_name
from logbroker.node import Node
from logbroker.records import Skipped, iter_fetched_records
from logbroker.unreadable import report_skipped

pb, pb_grpc = stubs.load()
FETCH_BYTES: Final = 1024 * 1024
WAIT_MS: Final = 1000
QUOTA_PAUSE_MAX_S: Final = 1.0
COMMIT_EVERY_S: Final = 1.0
LATEST, EARLIEST = -1, -2
ACKS: Final = frozenset({"0", "1", "all"})
GROUP_CALL_TIMEOUT_S: Final = 30.0
EVENT_OVERHEAD_BYTES: Final = 64 * 1024  # an SSE record event's fields besides its bytes (headers' names, ...)
STREAMS_MAX: Final = 1_000  # gRPC subscriptions (of a partition or in a group) open on the node at once


def _decoded(event: dict[str, Any], name: str) -> bytes:
    if event.get(name + "_b64") is not None:
        return base64.b64decode(event[name + "_b64"])
    value = event.get(name)
    return value.encode() if isinstance(value, str) else b""


class BrokerService:
    """The methods of ``logbroker.v1.Broker``, each called by ``CallGate`` with the caller it authenticated."""

    def __init__(self, node: Node, self_url: str) -> None:
        self.node = node
        self.self_url = self_url
        self._streams = 0
        self._tls: ssl.SSLContext | None = None
        self._clients = GroupClients(self._new_session, STREAMS_MAX)

    async def close(self) -> None:
        await self._clients.close()

    async def _caller(self, context: Any, topic: str, action: str) -> Caller:
        """The caller authenticated again from the call's metadata (an open stream's recheck)."""
        return await self._authorized(await self.node.auth.authenticate(authorization_of(context)), topic, action)

    async def _authorized(self, caller: Caller, topic: str, action: str) -> Caller:
        auth = self.node.auth
        if auth.enabled:
            await auth.authorize_topic(caller[0], topic, action)  # type: ignore[arg-type]
        return caller

    async def Publish(self, request: Any, context: Any, caller: Caller) -> Any:
        charged: tuple[Principal, QuotaLimits | None, str] | None = None
        offsets: list[dict[str, int]] = []
        try:
            topic = validate_name(request.topic, internal=True)
            principal, limits = await self._authorized(caller, topic, "write")
            auth = self.node.auth
            if auth.enabled:
                auth.check_quota(principal, "produce", limits)
            charged = (principal, limits if auth.enabled else None, topic)
            acks = request.acks or "1"
            if acks not in ACKS:
                raise InvalidRequestError(f"acks must be 0, 1 or all, not {acks[:20]!r}")
            records = incoming_records(request.records)
            offsets = await self.node.produce_records(topic, records, acks, request.idempotency_key or None,
                                                     writer=principal.name)
        except ANY_ERROR as exc:
            await abort_for(context, exc)
        finally:  # stored or refused, the message was received and decoded: charged either way
            if charged is not None:
                self.node.auth.meter.charge(charged[0].name, "produce", charged[1], request.ByteSize(),
                                            topic=charged[2], records=len(offsets))
        response = pb.PublishResponse()
        add = response.positions.add
        for position in offsets:
            add(partition=position["partition"], offset=position["offset"])
        return response

    async def Subscribe(self, request: Any, context: Any, caller: Caller) -> AsyncGenerator[Any, None]:
        async for batch in self._batches(request, context, caller):
            for record in batch:
                yield record

    async def SubscribeBatches(self, request: Any, context: Any, caller: Caller) -> AsyncGenerator[Any, None]:
        async for batch in self._batches(request, context, caller):
            yield pb.Records(records=batch)

    async def _batches(self, request: Any, context: Any, caller: Caller) -> AsyncIterator[list[Any]]:
        try:
            topic = validate_name(request.topic, internal=True)
            if request.group:
                try:
                    async for record in self._group_records(request, topic, context, caller):
                        yield [record]
                except (aiohttp.ClientError, HttpProcessingError, TimeoutError) as exc:  # its own listener failed
                    raise NotAvailableError(f"the group's calls failed: {exc}") from exc
            else:
                async for batch in self._partition_records(request, topic, context, caller):
                    yield batch
        except ANY_ERROR as exc:
            await abort_for(context, exc)

    @contextlib.contextmanager
    def _node_slot(self) -> Iterator[None]:
        """One of the node's ``STREAMS_MAX`` gRPC subscriptions (UNAVAILABLE when none is left),
        held while the subscription lasts."""
        if self._streams >= STREAMS_MAX:
            raise NotAvailableError(f"{self._streams} gRPC subscriptions are already open; retry later")
        self._streams += 1
        try:
            yield
        finally:
            self._streams -= 1

    @contextlib.contextmanager
    def _stream_slot(self, principal: Principal, limits: QuotaLimits) -> Iterator[None]:
        """A node slot and one of the caller's ``streams_max``, shared with their HTTP push streams
        (RESOURCE_EXHAUSTED past it). A group subscription holds its HTTP push stream's instead."""
        with self._node_slot(), self.node.auth.usage.hold(principal, limits, "streams"):
            yield

    async def _partition_records(self, request: Any, topic: str, context: Any,
                                 caller: Caller) -> AsyncIterator[list[Any]]:
        node, auth = self.node, self.node.auth
        principal, limits = await self._authorized(caller, topic, "read")
        partition = request.partition
        if partition < 0:
            raise InvalidRequestError("partition must be a non-negative integer")
        rack = validate_rack(request.rack)
        offset = request.offset
        if offset < EARLIEST:
            raise InvalidRequestError("offset must be >= 0, -1 (the end) or -2 (the earliest)")
        if offset < 0:
            found = (await node.list_offset(topic, partition, "latest" if offset == LATEST else "earliest"))["offset"]
            offset = int(found or 0)
        with self._stream_slot(principal, limits), node.auth.meter.streaming(principal.name, topic):
            await context.send_initial_metadata(())  # subscribed: what is appended from now on reaches the caller
            checked = time.monotonic()
            while True:
                if time.monotonic() - checked >= node.config.access_recheck_ms / 1000:
                    principal, limits = await self._caller(context, topic, "read")
                    checked = time.monotonic()
                if auth.enabled:
                    delay = auth.quotas.delay_s(principal.name, "fetch", limits)
                    if delay > 0:
                        await asyncio.sleep(min(delay, QUOTA_PAUSE_MAX_S))
                        continue
                result, _ = await node.fetch(topic, partition, offset, FETCH_BYTES, WAIT_MS, client_rack=rack)
                if not result.data:
                    continue
                auth.meter.charge(principal.name, "fetch", limits if auth.enabled else None, len(result.data),
                                  topic=topic, records=max(0, result.next_offset - offset), requests=0)
                skipped: list[Skipped] = []
                batch = record_messages(pb.Record, topic, partition,
                                        iter_fetched_records(bytes(result.data), offset, skipped))
                if skipped:  # stored records that cannot be decoded: the ones around them go on (decision 0220)
                    report_skipped(node.metrics.count_skipped, topic, partition, skipped, "grpc")
                offset = result.next_offset
                if batch:
                    yield batch

    # ---- groups, through the node's own HTTP API --------------------------------------------------

    def _new_session(self, connections: int) -> aiohttp.ClientSession:
        config = self.node.config
        if config.tls_cert_file and self._tls is None:
            # The node's own listener: a certificate made for its advertised name need not match.
            self._tls = node_client_context(config, verify=False)
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._tls or False, limit=connections),
                                     timeout=aiohttp.ClientTimeout(total=None, sock_connect=GROUP_CALL_TIMEOUT_S))

    async def _call(self, http: aiohttp.ClientSession, method: str, path: str, headers: dict[str, str],
                    body: Any = None) -> Any:
        async with asyncio.timeout(GROUP_CALL_TIMEOUT_S):
            async with http.request(method, self.self_url + path, json=body, headers=headers) as response:
                data = await response.json(content_type=None) if response.status != 204 else None
                if response.status >= 400:
                    raise _Refused(data if isinstance(data, dict) else {"code": "internal", "detail": "no detail"})
                return data

    async def _group_records(self, request: Any, topic: str, context: Any, caller: Caller) -> AsyncIterator[Any]:
        group = group_name(request.group)
        rack = validate_rack(request.rack)
        authorization = authorization_of(context)
        headers = {"Authorization": authorization} if authorization else {}
        principal, limits = await self._authorized(caller, topic, "read")
        with self._node_slot():
            # An admin's push streams are not counted (quotas exempt admins): their client has the node's slots.
            http = self._clients.acquire(principal.name, 0 if principal.is_admin else limits.streams_max)
            try:
                joined = await self._call(http, "POST", f"/v1/groups/{group}/members", headers, {"topics": [topic]})
            except BaseException:
                await asyncio.shield(self._clients.release(principal.name))
                raise
            records = self._member_records(http, principal.name, group, joined, rack, headers, context)
            async with contextlib.aclosing(records):
                async for record in records:
                    yield record

    async def _member_records(self, http: aiohttp.ClientSession, user: str, group: str, joined: Any, rack: str | None,
                              headers: dict[str, str], context: Any) -> AsyncGenerator[Any, None]:
        """The records of a joined member's push stream, committed as they go; then the member
        leaves and ``user``'s client is released."""
        member, generation = joined["member_id"], joined["generation"]
        pending: dict[tuple[str, int], int] = {}
        committed_at = time.monotonic()
        numbers = itertools.count()  # each commit's sequence: a late one never undoes a later one

        async def commit() -> None:
            nonlocal committed_at
            if pending:
                offsets = [{"topic": t, "partition": p, "offset": o} for (t, p), o in pending.items()]
                pending.clear()
                with contextlib.suppress(_Refused):  # a new generation: the next owner starts from the last commit
                    await self._call(http, "POST", f"/v1/groups/{group}/offsets", headers,
                                     {"member_id": member, "generation": generation, "offsets": offsets,
                                      "sequence": next(numbers)})
            committed_at = time.monotonic()

        try:
            # Every byte field as base64: an event's line is then at most 4/3 of its record plus a
            # little, and no record is too long to read (text escapes could make it 6 times as long).
            line_max = 2 * self.node.config.request_body_bytes_max + EVENT_OVERHEAD_BYTES
            params = {"encoding": "base64", **({"rack": rack} if rack else {})}
            async with http.get(f"{self.self_url}/v1/groups/{group}/members/{member}/stream",
                                params=params, headers={**headers, "Accept": "text/event-stream"}) as response:
                if response.status >= 400:
                    raise _Refused(await response.json(content_type=None))
                await context.send_initial_metadata(())  # subscribed: the member's stream is open
                kind = ""
                while raw := await response.content.readline(max_line_length=line_max):
                    line = raw.decode().rstrip("\n")
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("data:"):
                        event = json.loads(line[5:])
                        if kind == "assignment":
                            await commit()
                            generation = event["generation"]
                        elif kind == "record":
                            yield pb.Record(topic=event["topic"], partition=event["partition"],
                                            offset=event["offset"], timestamp_ms=event["timestamp"],
                                            key=_decoded(event, "key"), value=_decoded(event, "value"),
                                            headers={h["name"]: _decoded(h, "value") for h in event.get("headers", [])})
                            pending[(event["topic"], event["partition"])] = event["offset"] + 1
                            if time.monotonic() - committed_at >= COMMIT_EVERY_S:
                                await commit()
                        elif kind == "skipped":  # reported by the stream; the group moves past it
                            pending[(event["topic"], event["partition"])] = event["next_offset"]
                        elif kind == "error":
                            raise _Refused(event)
        finally:
            await asyncio.shield(self._leave(http, user, f"/v1/groups/{group}/members/{member}", headers, commit))

    async def _leave(self, http: aiohttp.ClientSession, user: str, path: str, headers: dict[str, str],
                     commit: Any) -> None:
        try:
            await commit()
            await self._call(http, "DELETE", path, headers)
        except (_Refused, aiohttp.ClientError, TimeoutError):
            pass  # the session lapses on its own
        finally:
            await self._clients.release(user)


class _Refused(InvalidRequestError):
    """A group call the node's HTTP API refused: its problem's code and detail, as they were."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(str(problem.get("detail", "refused")))
        self.code = str(problem.get("code", "internal"))
        self.retriable = bool(problem.get("retriable", False))
