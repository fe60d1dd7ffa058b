"""``logbroker.v1.Broker``: Publish and Subscribe over the node's own paths.

Every call authenticates the ``authorization`` metadata as HTTP does (``AuthService``), is
authorized on the topic (write for Publish, read for Subscribe) and charged to the caller's
produce or fetch quota. Records go through ``Node.produce_records`` and ``Node.fetch``, which
forward to the partition's leader, so any node answers.

Subscribe follows the tail with one bounded long-poll at a time and sends the next records only
when gRPC has taken the previous ones (an async generator: a slow client holds the node to one
fetch of ``FETCH_BYTES`` in memory). Access is checked again at least every
``access_recheck_ms``. With a ``group``, the caller becomes a member of that consumer group
through the node's own HTTP API (join, the member's push stream, commits, leave), which already
routes group calls to the node coordinating the group on a cluster.

A stored batch whose records cannot be decoded is passed over (the records around it are sent) and
reported in the node's log and metrics (decision 0220): a ``Record`` stream has no place to say so.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from coordinator.models import validate_name, validate_rack
from grpc_api import stubs
from grpc_api.convert import incoming_records, record_messages
from grpc_api.errors import abort_for
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
STREAMS_MAX: Final = 1_000  # partition subscriptions open on the node at once


def _metadata(context: Any) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


def _decoded(event: dict[str, Any], name: str) -> bytes:
    if event.get(name + "_b64") is not None:
        return base64.b64decode(event[name + "_b64"])
    value = event.get(name)
    return value.encode() if isinstance(value, str) else b""


class BrokerService(pb_grpc.BrokerServicer):  # type: ignore[misc,name-defined]
    def __init__(self, node: Node, self_url: str) -> None:
        self.node = node
        self.self_url = self_url
        self._session: aiohttp.ClientSession | None = None
        self._streams = 0

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _caller(self, context: Any, topic: str, action: str) -> tuple[Principal, QuotaLimits]:
        auth = self.node.auth
        principal, limits = await auth.authenticate(_metadata(context).get("authorization"))
        if auth.enabled:
            await auth.authorize_topic(principal, topic, action)  # type: ignore[arg-type]
        return principal, limits

    async def Publish(self, request: Any, context: Any) -> Any:
        try:
            topic = validate_name(request.topic, internal=True)
            principal, limits = await self._caller(context, topic, "write")
            auth = self.node.auth
            if auth.enabled:
                auth.check_quota(principal, "produce", limits)
            acks = request.acks or "1"
            if acks not in ACKS:
                raise InvalidRequestError(f"acks must be 0, 1 or all, not {acks[:20]!r}")
            records = incoming_records(request.records)
            offsets = await self.node.produce_records(topic, records, acks, request.idempotency_key or None)
            if auth.enabled:
                auth.quotas.charge(principal.name, "produce", limits, request.ByteSize())
        except ANY_ERROR as exc:
            await abort_for(context, exc)
        response = pb.PublishResponse()
        add = response.positions.add
        for position in offsets:
            add(partition=position["partition"], offset=position["offset"])
        return response

    async def Subscribe(self, request: Any, context: Any) -> AsyncIterator[Any]:
        async for batch in self._batches(request, context):
            for record in batch:
                yield record

    async def SubscribeBatches(self, request: Any, context: Any) -> AsyncIterator[Any]:
        async for batch in self._batches(request, context):
            yield pb.Records(records=batch)

    async def _batches(self, request: Any, context: Any) -> AsyncIterator[list[Any]]:
        try:
            topic = validate_name(request.topic, internal=True)
            if request.group:
                try:
                    async for record in self._group_records(request, topic, context):
                        yield [record]
                except (aiohttp.ClientError, HttpProcessingError, TimeoutError) as exc:  # its own listener failed
                    raise NotAvailableError(f"the group's calls failed: {exc}") from exc
            else:
                async for batch in self._partition_records(request, topic, context):
                    yield batch
        except ANY_ERROR as exc:
            await abort_for(context, exc)

    @contextlib.contextmanager
    def _stream_slot(self, principal: Principal, limits: QuotaLimits) -> Iterator[None]:
        """One of the node's ``STREAMS_MAX`` gRPC subscriptions (UNAVAILABLE when none is left) and
        one of the caller's ``streams_max``, shared with their HTTP push streams (RESOURCE_EXHAUSTED
        past it), held while the subscription lasts. A group subscription holds its HTTP push
        stream's instead."""
        if self._streams >= STREAMS_MAX:
            raise NotAvailableError(f"{self._streams} gRPC subscriptions are already open; retry later")
        with self.node.auth.usage.hold(principal, limits, "streams"):
            self._streams += 1
            try:
                yield
            finally:
                self._streams -= 1

    async def _partition_records(self, request: Any, topic: str, context: Any) -> AsyncIterator[list[Any]]:
        node, auth = self.node, self.node.auth
        principal, limits = await self._caller(context, topic, "read")
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
        with self._stream_slot(principal, limits):
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
                if auth.enabled:
                    auth.quotas.charge(principal.name, "fetch", limits, len(result.data))
                skipped: list[Skipped] = []
                batch = record_messages(pb.Record, topic, partition,
                                        iter_fetched_records(bytes(result.data), offset, skipped))
                if skipped:  # stored records that cannot be decoded: the ones around them go on (decision 0220)
                    report_skipped(node.metrics.count_skipped, topic, partition, skipped, "grpc")
                offset = result.next_offset
                if batch:
                    yield batch

    # ---- groups, through the node's own HTTP API --------------------------------------------------

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            # The node's own listener: a certificate made for its advertised name need not match.
            config = self.node.config
            tls = node_client_context(config, verify=False) if config.tls_cert_file else False
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls),
                                                  timeout=aiohttp.ClientTimeout(total=None,
                                                                                sock_connect=GROUP_CALL_TIMEOUT_S))
        return self._session

    async def _call(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Any:
        async with asyncio.timeout(GROUP_CALL_TIMEOUT_S):
            async with self._http().request(method, self.self_url + path, json=body, headers=headers) as response:
                data = await response.json(content_type=None) if response.status != 204 else None
                if response.status >= 400:
                    raise _Refused(data if isinstance(data, dict) else {"code": "internal", "detail": "no detail"})
                return data

    async def _group_records(self, request: Any, topic: str, context: Any) -> AsyncIterator[Any]:
        group = group_name(request.group)
        rack = validate_rack(request.rack)
        authorization = _metadata(context).get("authorization")
        headers = {"Authorization": authorization} if authorization else {}
        await self._caller(context, topic, "read")
        joined = await self._call("POST", f"/v1/groups/{group}/members", headers, {"topics": [topic]})
        member, generation = joined["member_id"], joined["generation"]
        await context.send_initial_metadata(())
        pending: dict[tuple[str, int], int] = {}
        committed_at = time.monotonic()

        async def commit() -> None:
            nonlocal committed_at
            if pending:
                offsets = [{"topic": t, "partition": p, "offset": o} for (t, p), o in pending.items()]
                pending.clear()
                with contextlib.suppress(_Refused):  # a new generation: the next owner starts from the last commit
                    await self._call("POST", f"/v1/groups/{group}/offsets", headers,
                                     {"member_id": member, "generation": generation, "offsets": offsets})
            committed_at = time.monotonic()

        try:
            # Every byte field as base64: an event's line is then at most 4/3 of its record plus a
            # little, and no record is too long to read (text escapes could make it 6 times as long).
            line_max = 2 * self.node.config.request_body_bytes_max + EVENT_OVERHEAD_BYTES
            params = {"encoding": "base64", **({"rack": rack} if rack else {})}
            async with self._http().get(f"{self.self_url}/v1/groups/{group}/members/{member}/stream",
                                        params=params, headers={**headers, "Accept": "text/event-stream"}) as response:
                if response.status >= 400:
                    raise _Refused(await response.json(content_type=None))
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
            await asyncio.shield(self._leave(group, member, headers, commit))

    async def _leave(self, group: str, member: str, headers: dict[str, str], commit: Any) -> None:
        try:
            await commit()
            await self._call("DELETE", f"/v1/groups/{group}/members/{member}", headers)
        except (_Refused, aiohttp.ClientError, TimeoutError):
            pass  # the session lapses on its own


class _Refused(InvalidRequestError):
    """A group call the node's HTTP API refused: its problem's code and detail, as they were."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(str(problem.get("detail", "refused")))
        self.code = str(problem.get("code", "internal"))
        self.retriable = bool(problem.get("retriable", False))
