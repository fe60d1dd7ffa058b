"""The RPC client: one channel to one node (gRPC reconnects it by itself), mutual TLS, the
cluster token on every call, a deadline on every call and keepalive pings on idle channels."""

from __future__ import annotations

import json
from typing import Any, Final

import grpc

from internal_rpc.errors import ERROR_CODE_KEY, ERROR_EXTRA_BYTES_MAX, ERROR_EXTRA_KEY, RpcCallError
from internal_rpc.security import TOKEN_KEY, TlsFiles
from internal_rpc.server import OPTIONS, pack, unpack

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

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
