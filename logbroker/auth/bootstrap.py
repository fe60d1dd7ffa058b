"""Building the node's ``AuthService`` from its configuration.

Signing keys come from ``jwt_keys_file`` (rotation), else ``jwt_secret``, else a random secret
made once and kept in ``<data_dir>/jwt-secret`` (mode 0600), so a single node's tokens survive a
restart with no set-up; nodes of a cluster must share a configured key instead.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Final

from coordinator.base import Coordinator
from logbroker.auth.keys import KeyRing
from logbroker.auth.quotas import QuotaLimits
from logbroker.auth.service import AuthService
from logbroker.auth.shares import resolve_shares
from logbroker.auth.tokens import Tokens
from logbroker.config import QUOTA_FIELDS, NodeConfig
from segments.checkpoint import write_atomic

log = logging.getLogger(__name__)
LOCAL_SECRET_FILE: Final = "jwt-secret"
LOCAL_SECRET_BYTES: Final = 48


def key_ring(config: NodeConfig) -> KeyRing:
    if config.jwt_keys_file:
        return KeyRing.load(config.jwt_keys_file)
    if config.jwt_secret:
        return KeyRing.from_secret(config.jwt_secret, config.jwt_key_id)
    return KeyRing.from_secret(_local_secret(config.data_dir), config.jwt_key_id)


def _local_secret(data_dir: str) -> bytes:
    path = os.path.join(data_dir, LOCAL_SECRET_FILE)
    try:
        with open(path, "rb") as f:
            secret = f.read(1024).strip()
        if len(secret) >= LOCAL_SECRET_BYTES:
            return secret
    except FileNotFoundError:
        pass
    os.makedirs(data_dir, exist_ok=True)
    secret = secrets.token_urlsafe(LOCAL_SECRET_BYTES).encode()
    write_atomic(path, secret, mode=0o600)
    log.warning("no jwt_secret or jwt_keys_file configured: made a signing key for this node only "
                "(configure a shared one for a cluster)", extra={"fields": {"path": path}})
    return secret


def node_limits(config: NodeConfig, *, node_partitions_max: int, disk_bytes: int | None) -> QuotaLimits:
    """The node's default per-user limits: the configured ones, ``QUOTA_AUTO`` ones as the node's
    share (``logbroker.auth.shares``)."""
    configured = QuotaLimits(**{name.removeprefix("quota_"): getattr(config, name) for name in QUOTA_FIELDS})
    return resolve_shares(configured, node_partitions_max=node_partitions_max, disk_bytes=disk_bytes)


def build_auth(config: NodeConfig, coordinator: Coordinator, *, node_partitions_max: int) -> AuthService:
    """The node's auth; its default limits are resolved again once the node knows its budgets."""
    limits = node_limits(config, node_partitions_max=node_partitions_max, disk_bytes=None)

    def make_tokens() -> Tokens:
        return Tokens(key_ring(config), ttl_s=config.token_ttl_s)

    return AuthService(coordinator, make_tokens if config.auth == "on" else None, limits)
