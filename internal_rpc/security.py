"""Mutual TLS and the cluster token.

Both ends present a certificate signed by the cluster CA (``logbroker certs`` makes a development
one) and the server requires the client's (``require_client_auth``), so a process without the
cluster's certificate cannot open a channel at all. Every call also carries the cluster token in
its metadata, compared in constant time, so a stolen certificate alone is not enough either.
"""

from __future__ import annotations

import dataclasses
import hmac
from typing import Final

import grpc

from internal_rpc.errors import RpcConfigError

TOKEN_KEY: Final = "x-logbroker-cluster-token"
PEM_BYTES_MAX: Final = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class TlsFiles:
    ca_file: str
    cert_file: str
    key_file: str

    def _read(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for path in (self.ca_file, self.cert_file, self.key_file):
            try:
                with open(path, "rb") as f:
                    out.append(f.read(PEM_BYTES_MAX))
            except OSError as exc:
                raise RpcConfigError(f"internal RPC TLS: {exc}") from exc
        return out[0], out[1], out[2]

    def server_credentials(self) -> grpc.ServerCredentials:
        ca, cert, key = self._read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        ca, cert, key = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def token_matches(expected: str, metadata: object) -> bool:
    """True when the call's metadata carries ``expected`` as the cluster token."""
    if not isinstance(metadata, (list, tuple)):
        return False
    for item in metadata:
        key, value = item
        if key == TOKEN_KEY and isinstance(value, str):
            return hmac.compare_digest(value.encode(), expected.encode())
    return False
