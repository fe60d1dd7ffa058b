"""The internal RPC transport on its own (no node): calls answered by id in any order, a
stream's calls in order, how a call ends telling what the other side may have done (never sent,
lost after sending, past its deadline), reconnection, bounds, and frames that are not ours."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from internal_rpc.client import RpcClient
from internal_rpc.errors import RpcCallError, Status
from internal_rpc.frames import MESSAGE_BYTES_MAX, encode
from internal_rpc.server import RpcServer
from logbroker.errors import NotLeaderError

pytestmark = pytest.mark.asyncio
TOKEN = "t0ken"


class Handlers:
    def __init__(self) -> None:
        self.order: list[int] = []
        self.cancelled = 0
        self.release = asyncio.Event()

    async def echo(self, request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(request.get("sleep", 0))
        self.order.append(request.get("n", -1))
        return {"n": request.get("n"), "data": request.get("data", b"")}

    async def hang(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return {}

    async def refuse(self, request: dict[str, Any]) -> dict[str, Any]:
        raise NotLeaderError("not here", node=3)

    async def crash(self, request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("bug")


async def serve(handlers: Handlers, port: int = 0) -> RpcServer:
    server = RpcServer("127.0.0.1", port, {"S": {"Echo": handlers.echo, "Hang": handlers.hang,
                                                 "Refuse": handlers.refuse, "Crash": handlers.crash}},
                       tls=None, cluster_token=TOKEN)
    await server.start()
    return server


async def test_concurrent_calls_are_answered_by_id_in_any_order():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        answers = await asyncio.gather(*(client.call("S", "Echo", {"n": n, "sleep": (5 - n) / 100})
                                         for n in range(5)))
        assert [a["n"] for a in answers] == list(range(5))
        assert handlers.order == [4, 3, 2, 1, 0]  # ran concurrently: the shortest sleep answered first


async def test_a_streams_calls_run_in_order_and_a_handlers_error_keeps_it_open():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        stream = client.stream("S", "Echo")
        answers = await asyncio.gather(*(stream.call({"n": n, "sleep": (5 - n) / 100}, deadline_s=5)
                                         for n in range(5)))
        assert [a["n"] for a in answers] == list(range(5)) and handlers.order == list(range(5))
        refusing = client.stream("S", "Refuse")
        with pytest.raises(RpcCallError) as refused:
            await refusing.call({}, deadline_s=5)
        assert refused.value.answered and refused.value.code == "not_leader" and refused.value.retriable
        assert refused.value.extra == {"node": 3} and not refusing.closed
        with pytest.raises(RpcCallError) as crashed:
            await client.call("S", "Crash", {})
        assert crashed.value.code == "internal" and crashed.value.answered and not crashed.value.retriable
        with pytest.raises(RpcCallError) as unknown:
            await client.call("S", "Nope", {})
        assert unknown.value.status is Status.UNIMPLEMENTED and not unknown.value.answered


async def test_a_deadline_ends_the_call_and_a_given_up_stream_cancels_its_handler():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        with pytest.raises(RpcCallError) as late:
            await client.call("S", "Hang", {}, deadline_s=0.2)
        assert late.value.status is Status.DEADLINE_EXCEEDED and not late.value.answered
        for _ in range(50):  # the server ends the handler at the deadline the call carried
            if handlers.cancelled == 1:
                break
            await asyncio.sleep(0.02)
        assert handlers.cancelled == 1
        stream = client.stream("S", "Hang")
        task = asyncio.create_task(stream.call({}, deadline_s=30))
        await asyncio.sleep(0.1)
        stream.close()
        for _ in range(50):
            if handlers.cancelled == 2:
                break
            await asyncio.sleep(0.02)
        assert handlers.cancelled == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await client.call("S", "Echo", {"n": 7}))["n"] == 7  # the connection lives on


async def test_a_lost_connection_is_unknown_after_sending_and_unavailable_before():
    handlers = Handlers()
    server = await serve(handlers)
    port = server.port
    async with RpcClient(f"127.0.0.1:{port}", tls=None, cluster_token=TOKEN) as client:
        assert (await client.call("S", "Echo", {"n": 1}))["n"] == 1
        pending = asyncio.create_task(client.call("S", "Hang", {}, deadline_s=10))
        await asyncio.sleep(0.1)
        await server.close()
        with pytest.raises(RpcCallError) as lost:
            await pending
        assert lost.value.status is Status.UNKNOWN and not lost.value.answered
        with pytest.raises(RpcCallError) as down:
            await client.call("S", "Echo", {"n": 2}, deadline_s=2)
        assert down.value.status is Status.UNAVAILABLE and down.value.retriable
        again = await serve(handlers, port)  # the same address: the client connects anew
        try:
            assert (await client.call("S", "Echo", {"n": 3}))["n"] == 3
        finally:
            await again.close()


async def test_a_wrong_token_is_refused_before_any_call():
    handlers = Handlers()
    async with await serve(handlers) as server:
        for token in (None, "other", ""):
            async with RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=token) as client:
                stream = client.stream("S", "Echo")
                with pytest.raises(RpcCallError) as refused:
                    await stream.call({"n": 1}, deadline_s=5)
                assert refused.value.status is Status.UNAUTHENTICATED and stream.closed
        assert handlers.order == []


async def test_large_messages_travel_and_oversized_ones_are_refused_before_sending():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        data = bytes(range(256)) * (32 * 1024)  # 8 MiB
        assert (await client.call("S", "Echo", {"data": data}))["data"] == data
        with pytest.raises(RpcCallError) as big:
            await client.call("S", "Echo", {"data": b"x" * (MESSAGE_BYTES_MAX + 1)})
        assert big.value.status is Status.RESOURCE_EXHAUSTED and handlers.order == [-1]


async def test_frames_that_are_not_ours_end_only_their_connection():
    handlers = Handlers()
    refusal = b"".join(encode({"e": "unauthenticated", "d": "missing or wrong cluster token"}))
    async with await serve(handlers) as server:
        for junk in (b"GET / HTTP/1.1\r\n\r\n", struct.pack(">I", 3) + b"\xc1\xc1\xc1",
                     struct.pack(">I", MESSAGE_BYTES_MAX + 1), *encode({"hello": 1, "token": TOKEN})[:1]):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(junk)
            writer.write_eof()
            answer = await asyncio.wait_for(reader.read(), 5)  # the server closes: EOF
            writer.close()
            assert answer in (b"", refusal)
        async with RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=TOKEN) as client:
            assert (await client.call("S", "Echo", {"n": 9}))["n"] == 9


async def test_a_connect_that_failed_after_its_caller_gave_up_is_not_the_next_calls_answer(monkeypatch):
    from internal_rpc import client as client_module

    monkeypatch.setattr(client_module, "CONNECT_TIMEOUT_S", 0.5)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, never says hello

    mute = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = mute.sockets[0].getsockname()[1]
    async with RpcClient(f"127.0.0.1:{port}", tls=None, cluster_token=TOKEN) as client:
        with pytest.raises(RpcCallError) as early:
            await client.call("S", "Echo", {"n": 1}, deadline_s=0.1)
        assert early.value.status is Status.UNAVAILABLE  # given up before anything was sent
        await asyncio.sleep(0.8)  # the connect it left behind has failed by now, unseen
        mute.close()
        await mute.wait_closed()
        server = await serve(Handlers(), port)
        try:
            assert (await client.call("S", "Echo", {"n": 2}, deadline_s=5))["n"] == 2
        finally:
            await server.close()


async def test_a_callers_node_id_is_reported_when_its_connection_ends():
    gone: list[int] = []
    server = RpcServer("127.0.0.1", 0, {"S": {"Echo": Handlers().echo}}, tls=None, cluster_token=TOKEN,
                       on_peer_gone=gone.append)
    await server.start()
    held = RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=TOKEN, node_id=8)
    try:
        await held.call("S", "Echo", {"n": 0})
        async with RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=TOKEN, node_id=7) as named:
            await named.call("S", "Echo", {"n": 1})
        async with RpcClient(f"127.0.0.1:{server.port}", tls=None, cluster_token=TOKEN) as anonymous:
            await anonymous.call("S", "Echo", {"n": 2})
        for _ in range(100):
            if gone:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert gone == [7], "only a caller that named itself is reported, once"
    finally:
        await server.close()
        await held.close()
    assert gone == [7], "a connection the server itself ends is not reported"


async def test_a_call_given_up_after_a_silence_closes_its_connection_and_the_next_connects_anew():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        assert (await client.call("S", "Echo", {"n": 1}))["n"] == 1
        first = client._connection
        quick = asyncio.create_task(client.call("S", "Hang", {}, deadline_s=30))
        await asyncio.sleep(0.2)
        quick.cancel()  # given up soon: the connection stays
        with pytest.raises(asyncio.CancelledError):
            await quick
        assert client._connection is first and first.lost is None
        silent = asyncio.create_task(client.call("S", "Hang", {}, deadline_s=30))
        await asyncio.sleep(1.1)  # nothing arrives on the connection meanwhile: a cut, or a paused node
        silent.cancel()
        with pytest.raises(asyncio.CancelledError):
            await silent
        assert first.lost is not None, "frames sent now would queue behind the kernel's retransmissions"
        assert (await client.call("S", "Echo", {"n": 2}))["n"] == 2
        assert client._connection is not first
        talking = asyncio.create_task(client.call("S", "Hang", {}, deadline_s=30))
        await asyncio.sleep(0.6)
        assert (await client.call("S", "Echo", {"n": 3}))["n"] == 3  # the other node answers meanwhile
        await asyncio.sleep(0.6)
        second = client._connection
        talking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await talking
        assert second is not None and second.lost is None, "a connection that answered since is not silent"


async def test_a_short_deadline_that_lapses_leaves_the_connection_and_its_long_waits_alone():
    handlers = Handlers()
    async with await serve(handlers) as server, RpcClient(f"127.0.0.1:{server.port}", tls=None,
                                                          cluster_token=TOKEN) as client:
        assert (await client.call("S", "Echo", {"n": 1}))["n"] == 1
        first = client._connection
        long_poll = asyncio.create_task(client.call("S", "Hang", {}, deadline_s=30))
        await asyncio.sleep(0.05)
        with pytest.raises(RpcCallError):
            await client.call("S", "Hang", {}, deadline_s=0.3)  # lapses: nothing heard for 0.3 s
        assert client._connection is first and first.lost is None, "a lapsed short deadline is no evidence"
        assert not long_poll.done(), "the long wait on the same connection goes on"
        long_poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long_poll
