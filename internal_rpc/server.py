"""The RPC server: services of unary methods on msgpack maps, behind mutual TLS and the cluster
token. A method is ``async (request: dict) -> dict``; an exception with a ``code`` attribute (the
broker's typed errors) is sent as that code with a matching gRPC status, anything else as
INTERNAL. ``RpcServer`` is an async context manager; ``close`` is idempotent and bounded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import grpc
import msgpack

from internal_rpc.errors import ERROR_CODE_KEY, ERROR_EXTRA_BYTES_MAX, ERROR_EXTRA_KEY
from internal_rpc.security import TlsFiles, token_matches

log = logging.getLogger(__name__)
Method = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MESSAGE_BYTES_MAX: Final = 64 * 1024 * 1024
STOP_GRACE_S: Final = 5.0
STREAM_SUFFIX: Final = "Stream"  # every method is also served as a stream at <name>Stream
STREAM_ERROR_KEY: Final = "x-logbroker-error-code"  # an answer on a stream that is a handler's error
STATUS_BY_RETRIABLE: Final = {True: grpc.StatusCode.UNAVAILABLE, False: grpc.StatusCode.FAILED_PRECONDITION}
OPTIONS: Final = (("grpc.max_receive_message_length", MESSAGE_BYTES_MAX),
                  ("grpc.max_send_message_length", MESSAGE_BYTES_MAX),
                  ("grpc.keepalive_time_ms", 10_000), ("grpc.keepalive_timeout_ms", 5_000),
                  ("grpc.http2.min_ping_interval_without_data_ms", 5_000))


def pack(message: dict[str, Any]) -> bytes:
    data: bytes = msgpack.packb(message, use_bin_type=True)
    return data


def unpack(data: bytes) -> dict[str, Any]:
    message = msgpack.unpackb(data, raw=False, strict_map_key=True)
    if not isinstance(message, dict):
        raise ValueError("an RPC message must be a map")
    return message


def error_extra(exc: Exception) -> str:
    """The JSON details of a handler's error (its ``extra`` and an offset range's bounds), as far
    as they are plain values and fit ``ERROR_EXTRA_BYTES_MAX``."""
    extra = {k: v for k, v in (getattr(exc, "extra", None) or {}).items()
             if isinstance(v, (str, int, float, bool, type(None)))}
    for name in ("earliest", "latest"):
        value = getattr(exc, name, None)
        if isinstance(value, int):
            extra[name] = value
    text = json.dumps(extra)
    return text if len(text) <= ERROR_EXTRA_BYTES_MAX else "{}"


class RpcServer:
    def __init__(self, host: str, port: int, services: Mapping[str, Mapping[str, Method]], *,
                 tls: TlsFiles | None, cluster_token: str | None) -> None:
        """``tls`` None serves plaintext (development only); ``cluster_token`` None checks none."""
        self._address = f"{host}:{port}"
        self._tls = tls
        self._token = cluster_token
        self._server = grpc.aio.server(options=OPTIONS)
        for service, methods in services.items():
            handlers = {name: grpc.unary_unary_rpc_method_handler(
                self._guard(f"{service}/{name}", method), request_deserializer=unpack, response_serializer=pack)
                for name, method in methods.items()}
            handlers.update({name + STREAM_SUFFIX: grpc.stream_stream_rpc_method_handler(
                self._stream_guard(f"{service}/{name}", method), request_deserializer=unpack,
                response_serializer=pack) for name, method in methods.items()})
            self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
        self.port = 0
        self._closed = False

    def _guard(self, name: str, method: Method) -> Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]:
        async def call(request: dict[str, Any], context: grpc.aio.ServicerContext) -> dict[str, Any]:
            if self._token is not None and not token_matches(self._token, context.invocation_metadata()):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")
            try:
                return await method(request)
            except Exception as exc:
                code = getattr(exc, "code", None)
                if not isinstance(code, str):
                    log.exception("internal RPC %s failed", name)
                    context.set_trailing_metadata(((ERROR_CODE_KEY, "internal"),))
                    await context.abort(grpc.StatusCode.INTERNAL, "internal error")
                context.set_trailing_metadata(((ERROR_CODE_KEY, code), (ERROR_EXTRA_KEY, error_extra(exc))))
                await context.abort(STATUS_BY_RETRIABLE[bool(getattr(exc, "retriable", False))], str(exc))
            raise AssertionError("unreachable")

        return call

    def _stream_guard(self, name: str, method: Method) -> Callable[[AsyncIterator[dict[str, Any]], Any],
                                                                   AsyncIterator[dict[str, Any]]]:
        """The same method served over one long-lived stream: one answer per request, in order
        (no call set-up per message: what a leader's shipments to a follower want). A handler's
        error is an answer of its own (``STREAM_ERROR_KEY``); the stream goes on."""
        async def call(requests: AsyncIterator[dict[str, Any]],
                       context: grpc.aio.ServicerContext) -> AsyncIterator[dict[str, Any]]:
            if self._token is not None and not token_matches(self._token, context.invocation_metadata()):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")
            async for request in requests:
                try:
                    answer = await method(request)
                except Exception as exc:
                    code = getattr(exc, "code", None)
                    if not isinstance(code, str):
                        log.exception("internal RPC %s failed", name)
                        code = "internal"
                    answer = {STREAM_ERROR_KEY: code, "detail": str(exc),
                              "retriable": bool(getattr(exc, "retriable", False)), "extra": error_extra(exc)}
                yield answer

        return call

    async def start(self) -> int:
        if self._tls is None:
            self.port = self._server.add_insecure_port(self._address)
        else:
            self.port = self._server.add_secure_port(self._address, self._tls.server_credentials())
        await self._server.start()
        return self.port

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._server.stop(STOP_GRACE_S)

    async def __aenter__(self) -> RpcServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
