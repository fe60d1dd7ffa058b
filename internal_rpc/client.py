"""The RPC client: one channel to one node (gRPC reconnects it by itself), mutual TLS, the
cluster token on every call, a deadline on every call and keepalive pings on idle channels."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

import grpc

from internal_rpc.errors import ERROR_CODE_KEY, ERROR_EXTRA_BYTES_MAX, ERROR_EXTRA_KEY, RpcCallError
from internal_rpc.security import TOKEN_KEY, TlsFiles
from internal_rpc.server import OPTIONS, STREAM_ERROR_KEY, STREAM_SUFFIX, pack, unpack

DEADLINE_S: Final = 10.0


def _extra(raw: object) -> dict[str, Any]:
    if not isinstance(raw, str) or len(raw) > ERROR_EXTRA_BYTES_MAX:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class RpcClient:
    def __init__(self, address: str, *, tls: TlsFiles | None, cluster_token: str | None,
                 deadline_s: float = DEADLINE_S, server_name: str | None = None) -> None:
        options: list[tuple[str, Any]] = list(OPTIONS)
        if server_name is not None:
            options.append(("grpc.ssl_target_name_override", server_name))
        if tls is None:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        else:
            self._channel = grpc.aio.secure_channel(address, tls.channel_credentials(), options=options)
        self._metadata = ((TOKEN_KEY, cluster_token),) if cluster_token is not None else ()
        self._deadline_s = deadline_s
        self.address = address
        self._stubs: dict[str, Any] = {}  # one callable per method: made once, not per call

    async def call(self, service: str, method: str, request: dict[str, Any], *,
                   deadline_s: float | None = None) -> dict[str, Any]:
        """One unary call, bounded by ``deadline_s`` (default: the client's)."""
        path = f"/{service}/{method}"
        stub = self._stubs.get(path)
        if stub is None:
            stub = self._stubs[path] = self._channel.unary_unary(path, request_serializer=pack,
                                                                 response_deserializer=unpack)
        timeout = self._deadline_s if deadline_s is None else deadline_s
        try:
            response: dict[str, Any] = await stub(request, timeout=timeout, metadata=self._metadata)
            return response
        except grpc.aio.AioRpcError as exc:
            trailing = dict(exc.trailing_metadata() or ())
            code = str(trailing.get(ERROR_CODE_KEY, exc.code().name.lower()))
            raise RpcCallError(exc.code(), code, exc.details() or "", _extra(trailing.get(ERROR_EXTRA_KEY)),
                               answered=ERROR_CODE_KEY in trailing) from exc

    def stream(self, service: str, method: str) -> RpcStream:
        """A long-lived stream of ``method`` calls (served at ``<method>Stream``)."""
        factory = self._channel.stream_stream(f"/{service}/{method}{STREAM_SUFFIX}", request_serializer=pack,
                                              response_deserializer=unpack)
        return RpcStream(factory(metadata=self._metadata))

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RpcStream:
    """One call at a time over a stream: write a request, read its answer. Any failure of the
    stream itself (deadline, lost connection, closed by the server) closes it for good and is an
    unanswered ``RpcCallError``; a handler's error is an answered one and the stream goes on."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.closed = False

    async def call(self, request: dict[str, Any], *, deadline_s: float) -> dict[str, Any]:
        if self.closed:
            raise RpcCallError(grpc.StatusCode.UNAVAILABLE, "stream_closed", "the stream is closed")
        try:
            async with asyncio.timeout(deadline_s):
                await self._call.write(request)
                answer = await self._call.read()
        except TimeoutError:
            self.close()
            raise RpcCallError(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline_exceeded",
                               f"no answer on the stream within {deadline_s:g} s") from None
        except grpc.aio.AioRpcError as exc:
            self.close()
            raise RpcCallError(exc.code(), exc.code().name.lower(), exc.details() or "") from exc
        except (grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
            self.close()
            raise RpcCallError(grpc.StatusCode.UNAVAILABLE, "stream_closed", str(exc)) from exc
        if answer is grpc.aio.EOF or not isinstance(answer, dict):
            self.close()
            raise RpcCallError(grpc.StatusCode.UNAVAILABLE, "stream_closed", "the other node closed the stream")
        code = answer.get(STREAM_ERROR_KEY)
        if code is not None:
            retriable = bool(answer.get("retriable"))
            status = grpc.StatusCode.UNAVAILABLE if retriable else grpc.StatusCode.FAILED_PRECONDITION
            raise RpcCallError(status, str(code), str(answer.get("detail", "")), _extra(answer.get("extra")),
                               answered=True)
        return answer

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._call.cancel()
