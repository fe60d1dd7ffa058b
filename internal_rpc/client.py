"""The RPC client: one channel to one node (gRPC reconnects it by itself), mutual TLS, the
cluster token on every call, a deadline on every call and keepalive pings on idle channels."""

from __future__ import annotations

from typing import Any, Final

import grpc

from internal_rpc.errors import ERROR_CODE_KEY, RpcCallError
from internal_rpc.security import TOKEN_KEY, TlsFiles
from internal_rpc.server import OPTIONS, pack, unpack

DEADLINE_S: Final = 10.0


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

    async def call(self, service: str, method: str, request: dict[str, Any]) -> dict[str, Any]:
        stub = self._channel.unary_unary(f"/{service}/{method}", request_serializer=pack,
                                         response_deserializer=unpack)
        try:
            response: dict[str, Any] = await stub(request, timeout=self._deadline_s, metadata=self._metadata)
            return response
        except grpc.aio.AioRpcError as exc:
            trailing = dict(exc.trailing_metadata() or ())
            code = str(trailing.get(ERROR_CODE_KEY, exc.code().name.lower()))
            raise RpcCallError(exc.code(), code, exc.details() or "") from exc

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
