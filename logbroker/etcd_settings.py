"""A node's way to etcd, from its configuration (DESIGN §5, decisions 0225 and 0226).

``etcds://`` or the etcd TLS files make the coordinator speak TLS with a client certificate; a
plain ``etcd://`` URL is accepted for tests and development, with a warning in the node's log
(anyone who reaches such an etcd reads every user's password hash). The cluster token, which
every node of a cluster shares, is the secret the access-granting records in etcd are sealed
with; a node without one seals and checks nothing, and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from coordinator.base import Coordinator
from coordinator.errors import CoordinatorError
from coordinator.models import NodeInfo
from logbroker.config import NodeConfig
from logbroker.errors import InvalidRequestError

log = logging.getLogger(__name__)

PLAINTEXT_WARNING: Final = ("etcd is reached without TLS (a plain etcd:// URL): anyone who reaches it reads "
                            "and writes the cluster's metadata; use etcds:// with etcd_ca_file, etcd_cert_file and "
                            "etcd_key_file outside development")
UNSEALED_WARNING: Final = ("no cluster_token: the users, grants, owners and node addresses this node reads from etcd "
                           "are not checked for the cluster's seal; development only")


def etcd_coordinator(config: NodeConfig, info: NodeInfo) -> Coordinator:
    """The etcd coordinator ``config`` asks for (``InvalidRequestError`` for a TLS or user set-up
    that cannot work: a file that cannot be read, a password without TLS)."""
    from coordinator.etcd import EtcdCoordinator  # the etcd client is loaded by cluster nodes only
    from coordinator.etcd_client import EtcdAccess

    try:
        access = EtcdAccess.for_url(config.coordinator, config.etcd_ca_file, config.etcd_cert_file,
                                    config.etcd_key_file, config.etcd_user, config.etcd_password)
        if access.tls:
            access.credentials()  # every file readable now, not at the first connection
    except CoordinatorError as exc:
        raise InvalidRequestError(f"configuration: {exc}") from exc
    if not access.tls:
        log.warning(PLAINTEXT_WARNING, extra={"fields": {"coordinator": config.coordinator}})
    if not config.cluster_token:
        log.warning(UNSEALED_WARNING)
    return EtcdCoordinator.from_url(config.coordinator, config.cluster_name, info, config.lease_ttl_ms,
                                    access=access, seal_secret=config.cluster_token or None,
                                    adopt_unsealed=config.etcd_adopt_unsealed == "true")


class _RejectedRecords(Collector):
    def __init__(self, coordinator: Coordinator) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[CounterMetricFamily]:
        count = getattr(self._coordinator, "rejected_records", 0)
        rejected = CounterMetricFamily("logbroker_etcd_rejected_records",
                                       "Records read from etcd and ignored because their seal did not verify "
                                       "(written by something without the cluster's key)")
        rejected.add_metric([], count)
        yield rejected


def register_etcd_metrics(registry: CollectorRegistry, coordinator: Coordinator) -> None:
    """``logbroker_etcd_rejected_records`` for a cluster node (nothing for the embedded coordinator)."""
    if coordinator.is_cluster:
        registry.register(_RejectedRecords(coordinator))
