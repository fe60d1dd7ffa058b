"""Calls to a node's public gRPC API for tests: one Publish, or the first records of a Subscribe."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from grpc_api import stubs

pb, pb_grpc = stubs.load()


async def publish(address: str, request: Any, metadata: Any = ()) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        return await pb_grpc.BrokerStub(channel).Publish(request, metadata=metadata, timeout=10)


async def subscribe(address: str, request: Any, metadata: Any, count: int, *, then: Any = None,
                    timeout_s: float = 20.0) -> list[Any]:
    """The first ``count`` records of a Subscribe; ``then`` runs once the stream is open."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = pb_grpc.BrokerStub(channel).Subscribe(request, metadata=metadata, timeout=timeout_s)
        await call.wait_for_connection()
        if then is not None:
            await asyncio.sleep(0.3)
            await then()
        return await first_records(call, count)


async def first_records(call: Any, count: int) -> list[Any]:
    """The first ``count`` messages of a server stream, then the call cancelled."""
    out: list[Any] = []
    async for message in call:
        out.append(message)
        if len(out) == count:
            break
    call.cancel()
    return out
