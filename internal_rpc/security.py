"""Mutual TLS and the cluster token.

Both ends present a certificate signed by the cluster CA (``logbroker certs`` makes a development
one) and the server requires the client's (``CERT_REQUIRED``), so a process without the cluster's
certificate cannot open a connection at all. Every connection also opens with the cluster token,
compared in constant time, so a stolen certificate alone is not enough either.
"""

from __future__ import annotations

import dataclasses
import hmac
import ssl
from typing import Final

from internal_rpc.errors import RpcConfigError

PEM_BYTES_MAX: Final = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class TlsFiles:
    ca_file: str
    cert_file: str
    key_file: str

    def _context(self, purpose: ssl.Purpose) -> ssl.SSLContext:
        try:
            with open(self.ca_file, "rb") as f:
                ca = f.read(PEM_BYTES_MAX).decode("ascii")
            context = ssl.create_default_context(purpose, cadata=ca)
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise RpcConfigError(f"internal RPC TLS: {exc}") from exc
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def server_context(self) -> ssl.SSLContext:
        """Requires the client's certificate, signed by the cluster CA."""
        return self._context(ssl.Purpose.CLIENT_AUTH)

    def client_context(self) -> ssl.SSLContext:
        """Checks the server's certificate against the cluster CA and the name dialled."""
        context = self._context(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = True
        return context


def token_matches(expected: str, offered: object) -> bool:
    """True when ``offered`` (the connection's hello) is ``expected``, compared in constant time."""
    return isinstance(offered, str) and hmac.compare_digest(offered.encode(), expected.encode())
