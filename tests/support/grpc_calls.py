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
        out: list[Any] = []
        await call.wait_for_connection()
        if then is not None:
            await asyncio.sleep(0.3)
            await then()
        async for record in call:
            out.append(record)
            if len(out) == count:
                break
        call.cancel()
        return out
