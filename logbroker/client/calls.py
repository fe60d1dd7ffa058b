"""The consumer group, queue and push-stream calls of ``logbroker.client.Client`` (a mixin kept
in its own module so that each stays small; ``Client`` provides the transport)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final, Literal, TypeVar

import aiohttp
import msgpack

from logbroker.client.errors import LogBrokerError, problem_error, problem_of_text, transport_error
from logbroker.client.sse import Event, SseParser

MSGPACK_TYPE: Final = "application/x-msgpack"
GROUP_LIST_PAGES_MAX: Final = 1_000  # 1,000 pages of up to 1,000 groups: more than a node holds
STREAM_READ_TIMEOUT_S: Final = 120.0
STREAM_CONNECT_TIMEOUT_S: Final = 10.0
STREAM_LINE_BYTES_MAX: Final = 64 << 20
T = TypeVar("T")


def _packb(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


class GroupQueueCalls:
    url: str

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      json_body: Any = None, data: bytes | None = None, headers: dict[str, str] | None = None,
                      partition: tuple[str, int] | None = None,
                      idempotent: bool | None = None) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError

    async def routed(self, call: Callable[[str], Awaitable[T]], *, partition: tuple[str, int] | None = None,
                     idempotent: bool = False) -> T:
        raise NotImplementedError

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _http(self) -> aiohttp.ClientSession:
        raise NotImplementedError

    async def _auth_header(self) -> dict[str, str]:
        raise NotImplementedError

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
                             offsets: Sequence[tuple[str, int, int]], *, sequence: int | None = None) -> dict[str, Any]:
        """Commit ``offsets`` as ``member_id``; ``sequence`` (increasing per member) keeps a
        commit that arrives late from overwriting a later one (the answer lists those partitions
        under ``superseded``)."""
        body: dict[str, Any] = {"member_id": member_id, "generation": generation,
                                "offsets": [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]}
        if sequence is not None:
            body["sequence"] = sequence
        result: dict[str, Any] = await self._json("POST", f"/v1/groups/{group}/offsets", json_body=body)
        return result

    async def describe_group(self, group: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/groups/{group}")
        return result

    async def list_groups(self, *, page_size: int | None = None,
                          pages_max: int = GROUP_LIST_PAGES_MAX) -> list[dict[str, Any]]:
        """Every group the caller may see, following ``next_after`` page by page (pages of
        ``page_size``, the node's default when None; at most ``pages_max`` pages)."""
        groups: list[dict[str, Any]] = []
        after: str | None = None
        for _ in range(pages_max):
            params = {k: str(v) for k, v in (("after", after), ("limit", page_size)) if v is not None}
            page = await self._json("GET", "/v1/groups", params=params or None)
            groups.extend(page["groups"])
            after = page.get("next_after")
            if not after:
                break
        return groups

    async def delete_group(self, group: str) -> None:
        """Delete an empty group and its committed offsets (its owner or an admin)."""
        await self.request("DELETE", f"/v1/groups/{group}")

    async def get_group_acl(self, group: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", f"/v1/groups/{group}/acl")
        return result

    async def set_group_acl(self, group: str, user: str, permissions: Sequence[str]) -> dict[str, Any]:
        """Grant ``["read"]`` (join, heartbeat, leave, commit) on a group, or revoke with ``[]``."""
        result: dict[str, Any] = await self._json("PUT", f"/v1/groups/{group}/acl",
                                                  json_body={"user": user, "permissions": list(permissions)})
        return result

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

    async def describe_queue(self, queue: str) -> dict[str, Any]:
        """``GET /v1/queues/{name}``: per partition, what is done, in flight and not yet delivered."""
        result: dict[str, Any] = await self._json("GET", f"/v1/queues/{queue}")
        return result

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
        result: dict[str, Any] = _json_loads(raw)
        return result

    async def nack(self, queue: str, receipts: Sequence[str], *, delay_ms: int = 0) -> dict[str, Any]:
        _, _, raw = await self.request("POST", f"/v1/queues/{queue}/nack",
                                       data=_packb({"receipts": list(receipts), "delay_ms": delay_ms}),
                                       headers={"Content-Type": MSGPACK_TYPE})
        result: dict[str, Any] = _json_loads(raw)
        return result

    # ---- push streams --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def stream(self, topic: str, partition: int, *, offset: int | None = None,
                     keepalive_ms: int = 5000) -> AsyncIterator[AsyncIterator[Event]]:
        """Open a partition's push stream (SSE); iterate the ``record`` events (``json.loads`` of
        ``event.data`` gives the record). The stream is open when the ``async with`` body runs; it
        is opened on the partition's leader, and opening is retried like a read."""
        params: dict[str, Any] = {"keepalive_ms": keepalive_ms}
        if offset is not None:
            params["offset"] = offset
        async with self._event_stream(f"/v1/topics/{topic}/partitions/{partition}/stream", params,
                                      partition=(topic, partition)) as events:
            yield events

    @contextlib.asynccontextmanager
    async def stream_member(self, group: str, member_id: str, *,
                            auto_offset_reset: Literal["earliest", "latest"] = "earliest",
                            ) -> AsyncIterator[AsyncIterator[Event]]:
        """Open a group member's push stream: ``assignment`` events at each generation, then
        ``record`` events (with topic and partition) of the assigned partitions."""
        async with self._event_stream(f"/v1/groups/{group}/members/{member_id}/stream",
                                      {"auto_offset_reset": auto_offset_reset}) as events:
            yield events


    @contextlib.asynccontextmanager
    async def _event_stream(self, path: str, params: dict[str, Any], *, partition: tuple[str, int] | None = None,
                            ) -> AsyncIterator[AsyncIterator[Event]]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=STREAM_CONNECT_TIMEOUT_S,
                                        sock_read=STREAM_READ_TIMEOUT_S)

        async def open_on(url: str) -> aiohttp.ClientResponse:
            headers = {"Accept": "text/event-stream", **(await self._auth_header())}
            try:
                response = await self._http().get(url + path, params=params, timeout=timeout, headers=headers)
                if response.status >= 400:
                    async with response:
                        raise problem_error(response.status, await response.read(), response.headers)
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise transport_error(url, f"GET {path}", exc) from exc
            return response

        response = await self.routed(open_on, partition=partition, idempotent=True)
        async with response:
            try:
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
            if event is not None and event.kind == "error":  # the node ended the stream (decision 0175)
                raise problem_of_text(event.data)
            if event is not None:
                yield event


def _json_loads(raw: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(raw)
    return result
