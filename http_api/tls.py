"""HTTPS for the API: a server TLS context from the configured certificate and key."""

from __future__ import annotations

import ssl

from logbroker.errors import InvalidRequestError


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext | None:
    """None when no certificate is configured (plain HTTP)."""
    if not cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidRequestError(f"configuration: cannot load tls_cert_file/tls_key_file: {exc}") from exc
    return context
