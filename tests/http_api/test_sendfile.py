"""``send_slice`` on its own, over a real loopback socket: a slice that the file no longer holds
(the segment was truncated after the slice was taken) is refused, never sent short."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from http_api.sendfile import SendfileGate, send_slice
from logbroker.errors import NotAvailableError
from segments.log import LogSlice
from segments.segment import Extent


@pytest.mark.asyncio
@pytest.mark.parametrize(("file_bytes", "slice_bytes"), [(100, 100), (100, 200)])
async def test_small_slices_are_sent_whole_or_refused(tmp_path, file_bytes, slice_bytes):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * file_bytes)
    outcomes: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        piece = LogSlice(os.open(path, os.O_RDONLY), Extent(0, slice_bytes, 0, 1))
        try:
            return await send_slice(request, web.StreamResponse(headers={"X-Next": "1"}), piece, gate)
        except NotAvailableError:
            outcomes.append("refused")
            return web.Response(status=503)

    app = web.Application()
    app.router.add_get("/", handler)
    with ThreadPoolExecutor(max_workers=1) as executor:
        gate = SendfileGate(executor, 1)
        async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as session, \
                session.get(server.make_url("/")) as response:
            body = await response.read()
    if slice_bytes == file_bytes:
        assert response.status == 200 and body == b"x" * file_bytes and response.headers["X-Next"] == "1"
    else:
        assert response.status == 503 and outcomes == ["refused"]
