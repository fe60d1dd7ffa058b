"""The simulated network: streams in order after their delay, partitions that hold data until the
heal (and break a connection cut too long), resets, refusals, flow control; and the broker's real
internal RPC client and server over it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from internal_rpc.client import RpcClient
from internal_rpc.errors import RpcCallError, Status
from internal_rpc.server import RpcServer
from sim.loop import SimLoop, run
from sim.network import HIGH_WATER_BYTES, NetworkOptions, SimNetwork
from sim.trace import Trace

PORT = 7000


def simulate(main: Callable[[SimNetwork], Awaitable[Any]], *, seed: int = 1,
             options: NetworkOptions | None = None) -> Any:
    loop = SimLoop()
    network = SimNetwork(loop, random.Random(seed), Trace(), options or NetworkOptions())

    async def go() -> Any:
        return await main(network)

    return run(go(), loop=loop)


async def echo_server(network: SimNetwork, host: str = "a") -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def start() -> asyncio.Server:
        return await asyncio.start_server(handle, "0.0.0.0", PORT)

    return await network.spawn(host, start())


def test_a_stream_arrives_whole_and_in_order_after_its_delay():
    async def main(network: SimNetwork) -> tuple[bytes, float]:
        await echo_server(network)

        async def client() -> tuple[bytes, float]:
            loop = asyncio.get_running_loop()
            reader, writer = await asyncio.open_connection("a", PORT)
            sent = b"".join(i.to_bytes(4, "big") for i in range(5000))
            start = loop.time()
            for i in range(0, len(sent), 333):
                writer.write(sent[i:i + 333])
            got = await reader.readexactly(len(sent))
            elapsed = loop.time() - start
            writer.close()
            assert got == sent
            return got, elapsed

        return await network.spawn("b", client())

    _, elapsed = simulate(main)
    assert 2 * NetworkOptions().delay_min_s <= elapsed <= 2 * NetworkOptions().delay_max_s


def test_a_partition_holds_data_until_the_heal():
    async def main(network: SimNetwork) -> None:
        await echo_server(network)

        async def client() -> None:
            reader, writer = await asyncio.open_connection("a", PORT)
            network.cut("a", "b")
            writer.write(b"ping")
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(5):
                    await reader.readexactly(4)
            network.heal("b", "a")
            async with asyncio.timeout(1):
                assert await reader.readexactly(4) == b"ping"  # retransmitted, not lost
            writer.close()

        await network.spawn("b", client())

    simulate(main)


def test_a_connection_cut_too_long_breaks_on_both_sides():
    async def main(network: SimNetwork) -> float:
        await echo_server(network)

        async def client() -> float:
            loop = asyncio.get_running_loop()
            reader, _ = await asyncio.open_connection("a", PORT)
            network.cut("a", "b")
            start = loop.time()
            with pytest.raises(TimeoutError):
                await reader.read(1)
            return loop.time() - start

        return await network.spawn("b", client())

    assert simulate(main, options=NetworkOptions(cut_break_s=7.0)) == 7.0


def test_a_connect_across_a_cut_waits_for_the_heal_or_gives_up():
    async def main(network: SimNetwork) -> None:
        await echo_server(network)
        network.cut("a", "b")

        async def client() -> None:
            loop = asyncio.get_running_loop()
            loop.call_later(3, network.heal, "a", "b")
            start = loop.time()
            _, writer = await asyncio.open_connection("a", PORT)
            assert 3 <= loop.time() - start < 5
            writer.close()
            network.cut("a", "b")
            start = loop.time()
            with pytest.raises(TimeoutError):
                await asyncio.open_connection("a", PORT)
            assert loop.time() - start >= NetworkOptions().connect_give_up_s

        await network.spawn("b", client())

    simulate(main)


def test_no_listener_refuses_and_a_reset_breaks_both_sides():
    async def main(network: SimNetwork) -> None:
        server = await echo_server(network)

        async def client() -> None:
            with pytest.raises(ConnectionRefusedError):
                await asyncio.open_connection("a", PORT + 1)
            reader, writer = await asyncio.open_connection("a", PORT)
            writer.write(b"x")
            assert await reader.readexactly(1) == b"x"
            network.reset("a", "b")
            with pytest.raises(ConnectionResetError):
                await reader.read(1)
            server.close()
            with pytest.raises(ConnectionRefusedError):
                await asyncio.open_connection("a", PORT)

        await network.spawn("b", client())

    simulate(main)


def test_close_is_an_end_of_stream_at_the_other_side():
    async def main(network: SimNetwork) -> bytes:
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            got.set_result(await reader.read())  # to EOF
            writer.close()

        await network.spawn("a", asyncio.start_server(handle, "0.0.0.0", PORT))

        async def client() -> None:
            _, writer = await asyncio.open_connection("a", PORT)
            writer.write(b"all of it")
            writer.close()
            await writer.wait_closed()

        await network.spawn("b", client())
        return await got

    assert simulate(main) == b"all of it"


def test_a_reader_that_stops_reading_pauses_its_writer():
    async def main(network: SimNetwork) -> None:
        accepted: asyncio.Future[asyncio.StreamReader] = asyncio.get_running_loop().create_future()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(reader)
            await asyncio.sleep(3600)

        await network.spawn("a", asyncio.start_server(handle, "0.0.0.0", PORT))

        async def client() -> None:
            _, writer = await asyncio.open_connection("a", PORT)
            chunk = b"x" * 65536
            total = 0
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(10):
                    while True:
                        writer.write(chunk)
                        total += len(chunk)
                        await writer.drain()
            # the writer was held back: what is unread stays within the reader's buffer and the link's
            assert HIGH_WATER_BYTES < total < 4 * HIGH_WATER_BYTES
            reader = await accepted
            assert len(await reader.readexactly(total)) == total  # nothing lost while paused
            writer.close()

        await network.spawn("b", client())

    simulate(main)


def test_loopback_is_the_callers_own_host():
    async def main(network: SimNetwork) -> bytes:
        await echo_server(network, "a")

        async def client() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
            writer.write(b"self")
            data = await reader.readexactly(4)
            writer.close()
            return data

        assert await network.spawn("a", client()) == b"self"
        with pytest.raises(ConnectionRefusedError):  # b has no listener of its own
            await network.spawn("b", client())
        return b"ok"

    assert simulate(main) == b"ok"


# ---- the real internal RPC over it ------------------------------------------------------------


async def rpc_pair(network: SimNetwork, handler_delay_s: float = 0.0) -> tuple[RpcServer, RpcClient]:
    async def echo(request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(handler_delay_s)
        return {"echo": request}

    async def start() -> RpcServer:
        server = RpcServer("0.0.0.0", PORT, {"T": {"echo": echo}}, tls=None, cluster_token="secret")
        await server.start()
        return server

    server = await network.spawn("a", start())
    return server, RpcClient(f"a:{PORT}", tls=None, cluster_token="secret", deadline_s=2.0, node_id=2)


def test_rpc_calls_fail_under_a_partition_and_succeed_after_the_heal():
    async def main(network: SimNetwork) -> list[Any]:
        server, client = await rpc_pair(network)

        async def calls() -> list[Any]:
            loop = asyncio.get_running_loop()
            seen: list[Any] = [await client.call("T", "echo", {"n": 1})]
            network.cut("a", "b")
            start = loop.time()
            with pytest.raises(RpcCallError) as failed:
                await client.call("T", "echo", {"n": 2})
            seen += [failed.value.status, loop.time() - start]
            network.heal("a", "b")
            seen.append(await client.call("T", "echo", {"n": 3}))
            await client.close()
            return seen

        seen = await network.spawn("b", calls())
        await server.close()
        return seen

    assert simulate(main) == [{"echo": {"n": 1}}, Status.DEADLINE_EXCEEDED, 2.0, {"echo": {"n": 3}}]


def test_rpc_deadline_and_a_lost_connection_on_virtual_time():
    async def main(network: SimNetwork) -> list[Status]:
        server, client = await rpc_pair(network, handler_delay_s=5.0)

        async def calls() -> list[Status]:
            statuses = []
            for action in (None, "reset"):
                call = asyncio.ensure_future(client.call("T", "echo", {}, deadline_s=10.0 if action else 1.0))
                await asyncio.sleep(0.5)
                if action == "reset":
                    network.reset("a", "b")
                with pytest.raises(RpcCallError) as failed:
                    await call
                statuses.append(failed.value.status)
            await client.close()
            return statuses

        statuses = await network.spawn("b", calls())
        await server.close()
        return statuses

    assert simulate(main) == [Status.DEADLINE_EXCEEDED, Status.UNKNOWN]


def test_rpc_without_the_cluster_token_is_refused():
    async def main(network: SimNetwork) -> Status:
        server, _ = await rpc_pair(network)
        intruder = RpcClient(f"a:{PORT}", tls=None, cluster_token="wrong", deadline_s=2.0)

        async def call() -> Status:
            with pytest.raises(RpcCallError) as failed:
                await intruder.call("T", "echo", {})
            await intruder.close()
            return failed.value.status

        status = await network.spawn("b", call())
        await server.close()
        return status

    assert simulate(main) == Status.UNAUTHENTICATED


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    def once(seed: int) -> str:
        trace = Trace()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            assert isinstance(loop, SimLoop)
            network = SimNetwork(loop, random.Random(seed), trace)
            server, client = await rpc_pair(network, handler_delay_s=0.001)

            async def calls() -> None:
                for n in range(30):
                    if n % 7 == 3:
                        network.reset("a", "b")
                    try:
                        await client.call("T", "echo", {"n": n}, deadline_s=0.5)
                        trace.add(loop.time(), f"call {n} ok")
                    except RpcCallError as exc:
                        trace.add(loop.time(), f"call {n} {exc.status.value}")
                await client.close()

            await network.spawn("b", calls())
            await server.close()

        run(main())
        return trace.digest()

    assert once(7) == once(7)
    assert once(7) != once(8)


def test_data_for_a_closed_socket_is_answered_with_a_reset():
    async def main(network: SimNetwork) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()  # closes both ways at once

        await network.spawn("a", asyncio.start_server(handle, "0.0.0.0", PORT))

        async def client() -> None:
            reader, writer = await asyncio.open_connection("a", PORT)
            assert await reader.read(1) == b""  # the other side's FIN
            writer.write(b"too late")
            with pytest.raises(ConnectionResetError):
                async with asyncio.timeout(1):
                    while True:
                        await writer.drain()
                        await asyncio.sleep(0.01)

        await network.spawn("b", client())

    simulate(main)


def test_a_writer_that_never_drains_breaks_its_connection_at_the_bound(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("sim.network.BUFFER_MAX_BYTES", 10 * 65536)

    async def main(network: SimNetwork) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(3600)  # never reads

        await network.spawn("a", asyncio.start_server(handle, "0.0.0.0", PORT))

        async def client() -> None:
            reader, writer = await asyncio.open_connection("a", PORT)
            for _ in range(11):
                writer.write(b"x" * 65536)  # no drain
            assert writer.transport.is_closing()
            with pytest.raises(OSError, match="unread on the link"):
                await reader.read(1)

        await network.spawn("b", client())

    simulate(main)
