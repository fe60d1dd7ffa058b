"""``EtcdClient.reconnect`` against a real etcd: the client continues on a new connection; a
call in flight on the old one, ended when it closes, is an unavailable etcd to its caller (never
a cancellation of the caller's task), while a cancellation of the caller's own task stays one.
A paused etcd (SIGSTOP) keeps a call in flight for as long as the test needs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from coordinator.errors import CoordinatorUnavailableError
from coordinator.etcd_client import EtcdClient, op_put
from tests.support.etcd import EtcdServer


@contextlib.contextmanager
def paused(server: EtcdServer) -> Iterator[None]:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest_asyncio.fixture(loop_scope="function")
async def client(own_etcd: EtcdServer) -> AsyncIterator[EtcdClient]:
    c = EtcdClient([own_etcd.endpoint])
    yield c
    await c.close()


@pytest.mark.asyncio
async def test_a_call_in_flight_at_a_reconnect_is_unavailable_and_the_next_is_answered(own_etcd, client):
    await client.txn([], [op_put(b"/reconnect/a", b"1")])
    assert client.connections == 1
    with paused(own_etcd):
        pending = asyncio.create_task(client.txn([], [op_put(b"/reconnect/b", b"2")]))
        await asyncio.sleep(0.2)
        assert not pending.done()
        client.reconnect()
        with pytest.raises(CoordinatorUnavailableError, match="connection was replaced"):
            await asyncio.wait_for(pending, 2.0)
    assert client.connections == 2
    revision, kvs = await client.range_prefix(b"/reconnect/")  # answered on the new connection
    assert revision > 0 and b"/reconnect/a" in [bytes(kv.key) for kv in kvs]  # b's outcome is unknown


@pytest.mark.asyncio
async def test_the_callers_own_cancellation_stays_a_cancellation(own_etcd, client):
    await client.status()
    with paused(own_etcd):
        pending = asyncio.create_task(client.txn([], [op_put(b"/cancel/a", b"1")]))
        await asyncio.sleep(0.2)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending


@pytest.mark.asyncio
async def test_a_keepalive_whose_stream_never_opened_ends_within_its_limit_after_a_reconnect():
    """A stream call's write waits for the stream to open; the channel closed under it by
    ``reconnect`` never opens it, and gRPC's deadline does not end that wait: the call's own
    limit does (else the session's keepalive loop would wait for ever)."""
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        c = EtcdClient([f"127.0.0.1:{silent.getsockname()[1]}"])
        try:
            pending = asyncio.create_task(c.keepalive(1, timeout_s=1.0))
            await asyncio.sleep(0.05)
            c.reconnect()
            started = time.monotonic()
            with pytest.raises(CoordinatorUnavailableError):
                await asyncio.wait_for(pending, 3.0)
            assert time.monotonic() - started < 1.5
        finally:
            await c.close()
