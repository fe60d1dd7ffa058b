"""A stand-in node for the client's routing and retry tests: an aiohttp server on 127.0.0.1 that
passes every request on to a real node and answers the real node's answer (streamed, so push
streams pass too), except what a test scripts:

- ``fail(path_part, times, code=..., status=503, retry_after=None)``: the next ``times``
  requests whose path contains ``path_part`` get that problem+json answer (nothing is passed on);
- ``hang(path_part)``: such requests are read and then not answered until the fake stops (the
  client times out after sending);
- ``hint(path_part, leader)``: such requests are passed on, and the answer carries the header a
  node that forwarded a partition call adds (``X-LogBroker-Leader``: the leader is elsewhere);
- ``advertise(node_id, url)``: ``GET /v1/cluster`` answers with that node's ``http_url`` replaced
  (so a test chooses where the client believes a leader is); without it, the real node's own URL
  is replaced by the fake's, which stands in for it.

``requests`` lists ``(method, path)`` of everything that arrived. It is a fake of a cluster node
for the client's retry logic only; the real cluster tests run real nodes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade",
                         "content-encoding"})


@dataclasses.dataclass
class _Failure:
    path_part: str
    times: int
    status: int
    code: str
    retry_after: int | None


class FakeNode:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str]] = []
        self._failures: list[_Failure] = []
        self._hangs: list[str] = []
        self._stopping = asyncio.Event()
        self._advertised: dict[int, str] = {}
        self._hints: dict[str, int] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    def fail(self, path_part: str, times: int = 1, *, code: str = "not_leader", status: int = 503,
             retry_after: int | None = None) -> None:
        self._failures.append(_Failure(path_part, times, status, code, retry_after))

    def hang(self, path_part: str) -> None:
        self._hangs.append(path_part)

    def hint(self, path_part: str, leader: int) -> None:
        self._hints[path_part] = leader

    def advertise(self, node_id: int, url: str) -> None:
        self._advertised[node_id] = url

    def count(self, method: str, path_part: str) -> int:
        return sum(1 for m, p in self.requests if m == method and path_part in p)

    async def start(self) -> FakeNode:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session = aiohttp.ClientSession(auto_decompress=False)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> FakeNode:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        body = await request.read()
        for failure in self._failures:
            if failure.times > 0 and failure.path_part in request.path:
                failure.times -= 1
                return _problem(failure)
        if any(part in request.path for part in self._hangs):
            await self._stopping.wait()
            return web.Response(status=599)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body or None, allow_redirects=False) as upstream:
            if request.path == "/v1/cluster" and upstream.status == 200:
                return web.json_response(self._rewrite(await upstream.json()))
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
            for part, leader in self._hints.items():
                if part in request.path:
                    response.headers["X-LogBroker-Leader"] = str(leader)
            await response.prepare(request)
            try:
                async for chunk in _chunks(upstream):
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:  # the client went away (a closed push stream)
                pass
            return response

    def _rewrite(self, cluster: dict[str, object]) -> dict[str, object]:
        nodes = cluster.get("nodes")
        for node in nodes if isinstance(nodes, list) else []:
            if node.get("node_id") in self._advertised:
                node["http_url"] = self._advertised[node["node_id"]]
            elif str(node.get("http_url", "")).rstrip("/") == self.upstream:
                node["http_url"] = self.url  # the fake stands in for the node it passes requests to
        return cluster


async def _chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    async for chunk in response.content.iter_any():
        yield chunk


def _problem(failure: _Failure) -> web.Response:
    body = {"type": f"https://logbroker.dev/errors/{failure.code}", "title": "Service Unavailable",
            "status": failure.status, "detail": "scripted by the test", "code": failure.code, "retriable": True}
    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
    return web.Response(status=failure.status, body=json.dumps(body).encode(),
                        content_type="application/problem+json", headers=headers)


def closed_port_url() -> str:
    """The URL of a port nothing listens on (bound, then closed): connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
