"""Node configuration: flag > environment (``LOGBROKER_<NAME>``) > TOML file > default.

Every field of ``NodeConfig`` is a ``--flag`` (underscores become dashes), an environment variable
``LOGBROKER_<FIELD>`` and a key of the TOML file given by ``--config``. Values are checked once
here; the rest of the node reads the frozen result. Units are in the names. Secrets that must
never show in a process list (``/proc/<pid>/cmdline``) have no flag (``ENV_ONLY``); the first
admin's password may also come from a file (``admin_password_file``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from logbroker.errors import InvalidRequestError
from logbroker.proxies import parse_networks

ENV_PREFIX: Final = "LOGBROKER_"
ETCD_URL_SCHEMES: Final = ("etcd://", "etcds://")
# No --flag: a command line is readable by every local user.
ENV_ONLY: Final = frozenset({"etcd_password", "encryption_keys"})
METRICS_TOKEN_CHARS_MIN: Final = 16
LEASE_TTL_MS_MIN: Final = 2_000
LEASE_TTL_MS_MAX: Final = 300_000
QUOTA_FIELDS: Final = ("quota_produce_bytes_per_s", "quota_fetch_bytes_per_s", "quota_connections_max",
                       "quota_topics_max", "quota_partitions_max", "quota_streams_max", "quota_long_polls_max",
                       "quota_groups_max", "quota_group_members_max", "quota_storage_bytes_max")
# Per-user defaults that may be ``QUOTA_AUTO``: a share of what the node has (``logbroker.auth.shares``).
QUOTA_AUTO: Final = -1
AUTO_QUOTA_FIELDS: Final = ("quota_partitions_max", "quota_storage_bytes_max")


@dataclasses.dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int = 1
    data_dir: str = ""
    http_host: str = "127.0.0.1"
    http_port: int = 8080
    rpc_port: int = 9090
    grpc_port: int = 0  # the public gRPC API (DESIGN §4b); 0 picks a free port, told by the ready line
    grpc_calls_max: int = 4_096  # gRPC calls in progress on the node (grpcio's maximum_concurrent_rpcs)
    grpc_calls_reserved: int = 1_024  # of those, kept for calls whose token checked out
    grpc_calls_per_connection_max: int = 256
    grpc_calls_per_address_max: int = 512
    grpc_calls_per_user_max: int = 1_024
    grpc_request_timeout_ms: int = 5_000  # a call's request message must arrive within this, or it ends
    kafka_port: int = -1  # the Kafka protocol listener (DESIGN §4c); -1: none, 0: a free port, told by the ready line
    kafka_advertised_host: str = ""  # the host Kafka clients are told to connect to (empty: advertised_host)
    kafka_advertised_port: int = 0  # the port they are told (0: the listener's own; decision 0391)
    coordinator: str = "local"
    cluster_name: str = "logbroker"
    rack: str = ""
    lease_ttl_ms: int = 3_000
    replica_lag_ms: int = 10_000
    replica_stall_ms: int = 500  # a follower lacking a waiting acks=all write, silent this long, leaves the ISR
    replication_timeout_ms: int = 30_000
    advertised_host: str = ""
    auth: str = "on"
    admin_user: str = "admin"
    admin_password: str = ""
    admin_password_file: str = ""
    log_level: str = "info"
    request_body_bytes_max: int = 16 * 1024 * 1024
    fetch_bytes_max: int = 16 * 1024 * 1024
    fetch_records_max: int = 100_000
    fetch_wait_ms_max: int = 30_000
    topic_segment_bytes_min: int = 1024 * 1024
    long_poll_waiters_max: int = 10_000
    dedup_entries_max: int = 100_000  # idempotent writes remembered per partition (the fullest writer's go first)
    usage_retention_days: int = 35  # usage records kept (GET /v1/usage); 0: for good
    usage_flush_ms: int = 15_000  # how often a node writes its usage counts
    flush_threads: int = 2
    maintenance_interval_ms: int = 1_000
    compaction_bytes_per_s: int = 32 * 1024 * 1024  # compaction's reads and writes, all partitions; 0: unbounded
    shutdown_grace_ms: int = 10_000
    connections_max: int = 10_000
    connections_per_address_max: int = 0  # 0: a tenth of the node's bound (decision 0235)
    trusted_proxies: str = ""  # comma-separated CIDRs whose X-Forwarded-For is believed
    header_timeout_ms: int = 30_000
    tls_handshake_timeout_ms: int = 5_000
    body_timeout_ms: int = 60_000
    keepalive_timeout_ms: int = 75_000
    access_recheck_ms: int = 5_000
    jwt_secret: str = ""
    jwt_key_id: str = "default"
    jwt_keys_file: str = ""
    token_ttl_s: int = 3600
    quota_produce_bytes_per_s: int = 0
    quota_fetch_bytes_per_s: int = 0
    quota_connections_max: int = 0
    quota_topics_max: int = 1_000
    quota_partitions_max: int = QUOTA_AUTO  # -1: a share of the node's partition budget
    quota_streams_max: int = 100
    quota_long_polls_max: int = 1_000
    quota_groups_max: int = 1_000
    quota_group_members_max: int = 1_000
    quota_storage_bytes_max: int = QUOTA_AUTO  # -1: a share of the data directory's file system
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    rpc_tls_ca_file: str = ""
    rpc_tls_cert_file: str = ""
    rpc_tls_key_file: str = ""
    cluster_token: str = ""
    etcd_ca_file: str = ""
    etcd_cert_file: str = ""
    etcd_key_file: str = ""
    etcd_user: str = ""
    etcd_password: str = dataclasses.field(default="", repr=False)
    etcd_adopt_unsealed: str = "false"
    metrics_token: str = ""
    encryption_keys_file: str = ""  # a key ring (mode 0600) turns encryption at rest on (decision 0316)
    encryption_keys: str = dataclasses.field(default="", repr=False)  # or the ring's text itself
    metrics_public: str = "false"
    auto_create: str = "off"  # on: a produce or send to a missing name creates it (decision 0311)
    auto_create_owned_max: int = 10  # auto-create makes a name only for a user owning fewer than this

    def __post_init__(self) -> None:
        if not self.data_dir:
            object.__setattr__(self, "data_dir", os.path.join(".", ".data", f"node-{self.node_id}"))
        _check(self.node_id >= 0, "node_id must not be negative")
        _check(all(0 <= port <= 65535 for port in (self.http_port, self.rpc_port, self.grpc_port)),
               "ports must be in [0, 65535]")
        _check(-1 <= self.kafka_port <= 65535, "kafka_port must be in [0, 65535], or -1 for no Kafka listener")
        _check(0 <= self.kafka_advertised_port <= 65535,
               "kafka_advertised_port must be in [1, 65535], or 0 for the listener's own port")
        _check(self.auth in ("on", "off"), f"auth must be on or off, not {self.auth!r}")
        _check(self.coordinator == "local" or self.coordinator.startswith(ETCD_URL_SCHEMES),
               f"coordinator must be local, etcd://host:port[,...] or etcds://host:port[,...] (TLS), not "
               f"{self.coordinator!r}")
        _check(re.fullmatch(r"[A-Za-z0-9._-]{1,100}", self.cluster_name) is not None,
               f"cluster_name must match [A-Za-z0-9._-]{{1,100}}, not {self.cluster_name!r}")
        _check(LEASE_TTL_MS_MIN <= self.lease_ttl_ms <= LEASE_TTL_MS_MAX,
               f"lease_ttl_ms must be in [{LEASE_TTL_MS_MIN}, {LEASE_TTL_MS_MAX}] (etcd leases count whole seconds)")
        _check(len(self.rack) <= 100, "rack must have at most 100 characters")
        _check(self.coordinator == "local" or self.auth == "off" or bool(self.jwt_secret or self.jwt_keys_file),
               "a cluster node needs the cluster's shared signing key (jwt_secret or jwt_keys_file), so that a "
               "token one node issues is accepted by every node")
        _check(self.log_level in ("debug", "info", "warning", "error"), f"bad log_level {self.log_level!r}")
        _check(0 <= self.usage_retention_days <= 100 * 366, "usage_retention_days must be in [0, 36600]")
        for name in ("request_body_bytes_max", "fetch_bytes_max", "fetch_records_max", "fetch_wait_ms_max",
                     "long_poll_waiters_max", "dedup_entries_max", "flush_threads", "maintenance_interval_ms",
                     "shutdown_grace_ms", "connections_max", "header_timeout_ms", "tls_handshake_timeout_ms",
                     "body_timeout_ms", "keepalive_timeout_ms",
                     "topic_segment_bytes_min", "access_recheck_ms", "replica_lag_ms", "replica_stall_ms",
                     "replication_timeout_ms",
                     "grpc_calls_max", "grpc_calls_per_connection_max", "grpc_calls_per_address_max",
                     "grpc_calls_per_user_max", "grpc_request_timeout_ms", "usage_flush_ms"):
            _check(getattr(self, name) > 0, f"{name} must be positive")
        _check(0 <= self.grpc_calls_reserved < self.grpc_calls_max,
               "grpc_calls_reserved must be in [0, grpc_calls_max): calls not yet authenticated need a slot")
        _check(self.token_ttl_s > 0, "token_ttl_s must be positive")
        _check(self.compaction_bytes_per_s >= 0, "compaction_bytes_per_s must not be negative (0: unbounded)")
        _check(self.connections_per_address_max >= 0,
               "connections_per_address_max must not be negative (0: a tenth of the node's bound)")
        try:
            parse_networks(self.trusted_proxies)
        except ValueError as exc:
            raise InvalidRequestError(f"configuration: trusted_proxies: {exc}") from None
        for name in QUOTA_FIELDS:
            auto = name in AUTO_QUOTA_FIELDS and getattr(self, name) == QUOTA_AUTO
            _check(auto or getattr(self, name) >= 0, f"{name} must not be negative (0: unlimited)"
                   + (f", or {QUOTA_AUTO} for the node's share" if name in AUTO_QUOTA_FIELDS else ""))
        _check(self.metrics_public in ("true", "false"), f"metrics_public must be true or false, not "
               f"{self.metrics_public!r}")
        _check(self.auto_create in ("on", "off"), f"auto_create must be on or off, not {self.auto_create!r}")
        _check(self.auto_create_owned_max >= 0, "auto_create_owned_max must not be negative (0: no allowance)")
        _check(not self.metrics_token or len(self.metrics_token) >= METRICS_TOKEN_CHARS_MIN,
               f"metrics_token must have at least {METRICS_TOKEN_CHARS_MIN} characters")
        _check(bool(self.tls_cert_file) == bool(self.tls_key_file), "tls_cert_file and tls_key_file go together")
        _check(not self.tls_client_ca_file or bool(self.tls_cert_file),
               "tls_client_ca_file (clients must show a certificate) needs tls_cert_file (HTTPS)")
        rpc_tls = (self.rpc_tls_ca_file, self.rpc_tls_cert_file, self.rpc_tls_key_file)
        _check(all(rpc_tls) or not any(rpc_tls), "rpc_tls_ca_file, rpc_tls_cert_file and rpc_tls_key_file go together")
        self._check_etcd()

    def _check_etcd(self) -> None:
        etcd_tls = (self.etcd_ca_file, self.etcd_cert_file, self.etcd_key_file)
        _check(all(etcd_tls) or not any(etcd_tls), "etcd TLS is half configured: etcd_ca_file, etcd_cert_file and "
               "etcd_key_file go together (etcd's --client-cert-auth asks for the client certificate)")
        _check(not self.coordinator.startswith("etcds://") or all(etcd_tls),
               "an etcds:// coordinator (TLS) needs etcd_ca_file, etcd_cert_file and etcd_key_file")
        _check(not self.etcd_user or all(etcd_tls),
               "etcd_user needs TLS to etcd (etcd_ca_file, etcd_cert_file, etcd_key_file): the password must not "
               "cross a plain channel")
        _check(bool(self.etcd_user) == bool(self.etcd_password),
               "etcd_user and its password (the environment variable LOGBROKER_ETCD_PASSWORD) go together")
        _check(self.etcd_adopt_unsealed in ("true", "false"),
               f"etcd_adopt_unsealed must be true or false, not {self.etcd_adopt_unsealed!r}")
        _check(not (self.encryption_keys and self.encryption_keys_file),
               "encryption_keys and encryption_keys_file are two sources of one key ring: give one")
        _check(not (self.admin_password and self.admin_password_file),
               "admin_password and admin_password_file are two sources of one password: give one")

    @property
    def etcd_tls(self) -> bool:
        return bool(self.etcd_ca_file)

    @property
    def http_scheme(self) -> str:
        return "https" if self.tls_cert_file else "http"


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidRequestError(f"configuration: {message}")


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(NodeConfig)]


def resolve(flags: Mapping[str, Any], env: Mapping[str, str], file_path: str | None) -> NodeConfig:
    """Merge the sources in precedence order and build the config."""
    values: dict[str, Any] = {}
    if file_path:
        try:
            with open(file_path, "rb") as f:
                from_file = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InvalidRequestError(f"configuration file {file_path}: {exc}") from exc
        unknown = set(from_file) - set(field_names())
        _check(not unknown, f"unknown keys in {file_path}: {sorted(unknown)}")
        values.update(from_file)
    for name in field_names():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = raw
    values.update({k: v for k, v in flags.items() if v is not None})
    if values.get("admin_password_file") and not values.get("admin_password"):
        values["admin_password"] = read_secret_file(str(values["admin_password_file"]), "admin_password_file")
        values["admin_password_file"] = ""
    return NodeConfig(**{name: _coerce(name, value) for name, value in values.items()})


def read_secret_file(path: str, name: str) -> str:
    """A secret kept in a file (its first line, without the line end)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = f.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"configuration: {name} {path}: {exc}") from exc
    _check(bool(value), f"{name} {path} is empty")
    return value


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in dataclasses.fields(NodeConfig)}[name]
    if kind == "int":
        if isinstance(value, bool):
            raise InvalidRequestError(f"configuration: {name} must be an integer")
        try:
            return int(value)
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"configuration: {name} must be an integer, not {value!r}") from exc
    if isinstance(value, bool):  # a TOML switch such as metrics_public = true
        return "true" if value else "false"
    if not isinstance(value, str):
        raise InvalidRequestError(f"configuration: {name} must be a string, not {value!r}")
    return value
