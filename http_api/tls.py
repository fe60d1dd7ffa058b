"""TLS of the public listeners (HTTP and gRPC) and of the node's own calls to them.

HTTPS comes from ``tls_cert_file``/``tls_key_file``. With ``tls_client_ca_file`` the listeners
also require a client certificate issued by that CA (mutual TLS, as Kafka's
``ssl.client.auth=required``), on top of the bearer token, which still names the caller. A node
calling another node's public listener (group and queue calls passed on over HTTP, gRPC group
subscriptions passed on over gRPC, ``grpc_api.group_channels``) shows its own certificate, so with
mutual TLS on, the nodes' certificates must be issued by the client CA too (``logbroker certs``
makes them valid for both ends).
"""

from __future__ import annotations

import ssl

from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError


def server_context(config: NodeConfig) -> ssl.SSLContext | None:
    """None when no certificate is configured (plain HTTP)."""
    if not config.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidRequestError(f"configuration: cannot load tls_cert_file/tls_key_file: {exc}") from exc
    if config.tls_client_ca_file:
        try:
            context.load_verify_locations(cafile=config.tls_client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidRequestError(f"configuration: cannot load tls_client_ca_file: {exc}") from exc
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def node_client_context(config: NodeConfig) -> ssl.SSLContext:
    """For this node's HTTPS calls to another node's public listener: the node's certificate shown
    when listeners require one; the server's checked against ``rpc_tls_ca_file`` (or the system's
    CAs)."""
    context = ssl.create_default_context(cafile=config.rpc_tls_ca_file or None)
    if config.tls_client_ca_file:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    return context
