"""What grpcio itself can stream, one message per record, with no broker behind it: a bare
``grpc.aio`` server (its own process, as a node is) whose ``/logbroker.v1.Broker/Subscribe`` sends
one pre-serialized ``Record`` of the benchmark's size, again and again, until the caller cancels.

Read with the same client code as the node's Subscribe, it is the ceiling of a per-record stream on
this machine: the node's Subscribe is quoted against it, to tell the broker's cost from grpcio's
per-message cost (client and server both).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final

import grpc
import uvloop

from grpc_api import stubs

METHOD: Final = "Subscribe"
START_TIMEOUT_S: Final = 30.0
STOP_TIMEOUT_S: Final = 5.0


def _serve(record_bytes: int, ready: multiprocessing.connection.Connection) -> None:
    pb, _ = stubs.load()
    service = pb.DESCRIPTOR.services_by_name["Broker"].full_name
    message = pb.Record(topic="grpcbench", partition=0, offset=1_000_000, timestamp_ms=1_790_000_000_000,
                        value=b"x" * record_bytes).SerializeToString()

    async def subscribe(_request: Any, _context: Any) -> AsyncIterator[bytes]:
        while True:
            yield message

    async def main() -> None:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(service, {
            METHOD: grpc.unary_stream_rpc_method_handler(subscribe, request_deserializer=bytes,
                                                          response_serializer=bytes)})
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        ready.send(port)
        await server.wait_for_termination()

    uvloop.run(main())


@contextlib.contextmanager
def running(record_bytes: int) -> Iterator[str]:
    """A bare streaming server in a child process for the block: its address."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(target=_serve, args=(record_bytes, sender), daemon=True)
    process.start()
    try:
        if not receiver.poll(START_TIMEOUT_S):
            raise RuntimeError("the bare gRPC server did not start")
        yield f"127.0.0.1:{receiver.recv()}"
    finally:
        process.terminate()
        process.join(STOP_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()

