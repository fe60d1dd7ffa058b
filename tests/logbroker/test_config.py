"""Node configuration precedence (flag > env > file > default) and validation."""

from __future__ import annotations

import pytest

from logbroker.config import NodeConfig, resolve
from logbroker.errors import InvalidRequestError


def test_defaults():
    config = resolve({}, {}, None)
    assert (config.node_id, config.http_host, config.http_port, config.rpc_port) == (1, "127.0.0.1", 8080, 9090)
    assert config.coordinator == "local" and config.auth == "on"
    assert config.data_dir.endswith(".data/node-1")
    assert resolve({"node_id": "3"}, {}, None).data_dir.endswith(".data/node-3")


def test_precedence(tmp_path):
    path = tmp_path / "node.toml"
    path.write_text('http_port = 7000\nnode_id = 5\nlog_level = "debug"\n')
    env = {"LOGBROKER_HTTP_PORT": "7100", "LOGBROKER_NODE_ID": "6"}
    config = resolve({"http_port": "7200"}, env, str(path))
    assert config.http_port == 7200
    assert config.node_id == 6
    assert config.log_level == "debug"
    assert resolve({}, env, str(path)).http_port == 7100
    assert resolve({}, {}, str(path)).http_port == 7000


@pytest.mark.parametrize(("flags", "env", "toml"), [
    ({"http_port": "eighty"}, {}, ""),
    ({"http_port": "70000"}, {}, ""),
    ({"auth": "maybe"}, {}, ""),
    ({"coordinator": "zookeeper://x"}, {}, ""),
    ({}, {"LOGBROKER_FETCH_BYTES_MAX": "0"}, ""),
    ({"header_timeout_ms": "0"}, {}, ""),
    ({}, {}, "connections_max = -1\n"),
    ({}, {}, "unknown_key = 1\n"),
    ({}, {}, "http_port = [1]\n"),
    ({}, {}, "this is not toml"),
    ({"metrics_public": "yes"}, {}, ""),
    ({"metrics_token": "short"}, {}, ""),
])
def test_bad_values_are_refused(tmp_path, flags, env, toml):
    path = None
    if toml:
        path = tmp_path / "bad.toml"
        path.write_text(toml)
    with pytest.raises(InvalidRequestError):
        resolve(flags, env, str(path) if path else None)


def test_slow_client_bounds_have_defaults_and_every_source(tmp_path):
    defaults = resolve({}, {}, None)
    assert (defaults.header_timeout_ms, defaults.body_timeout_ms, defaults.keepalive_timeout_ms) == (30_000, 60_000,
                                                                                                      75_000)
    assert defaults.connections_max == 10_000
    path = tmp_path / "node.toml"
    path.write_text("connections_max = 50\n")
    config = resolve({"body_timeout_ms": "900"}, {"LOGBROKER_HEADER_TIMEOUT_MS": "800"}, str(path))
    assert (config.connections_max, config.header_timeout_ms, config.body_timeout_ms) == (50, 800, 900)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(InvalidRequestError):
        resolve({}, {}, str(tmp_path / "absent.toml"))


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        NodeConfig().http_port = 1  # type: ignore[misc]


def test_metrics_scrape_settings(tmp_path):
    assert resolve({}, {}, None).metrics_public == "false" and resolve({}, {}, None).metrics_token == ""
    path = tmp_path / "node.toml"
    path.write_text('metrics_public = true\nmetrics_token = "a-scrape-credential-1"\n')
    config = resolve({}, {}, str(path))
    assert config.metrics_public == "true" and config.metrics_token == "a-scrape-credential-1"
    assert resolve({}, {"LOGBROKER_METRICS_PUBLIC": "false"}, str(path)).metrics_public == "false"


def test_cluster_settings_are_checked():
    with pytest.raises(InvalidRequestError, match="shared signing key"):
        NodeConfig(coordinator="etcd://127.0.0.1:2379", auth="on")
    assert NodeConfig(coordinator="etcd://127.0.0.1:2379", auth="on", jwt_secret="x" * 32).lease_ttl_ms == 3_000
    assert NodeConfig(coordinator="etcd://127.0.0.1:2379", auth="off").cluster_name == "logbroker"
    for bad in ({"coordinator": "zookeeper://x:1"}, {"lease_ttl_ms": 1_000}, {"lease_ttl_ms": 400_000},
                {"cluster_name": "a/b"}, {"cluster_name": ""}, {"rack": "r" * 101}):
        with pytest.raises(InvalidRequestError):
            NodeConfig(**bad)  # type: ignore[arg-type]


def test_etcd_tls_and_user_settings(tmp_path):
    base = {"coordinator": "etcds://etcd:2379", "auth": "off"}
    files = {"etcd_ca_file": "/c/etcd-ca.pem", "etcd_cert_file": "/c/etcd-client.pem",
             "etcd_key_file": "/c/etcd-client.key"}
    config = resolve({**base, **files}, {"LOGBROKER_ETCD_USER": "node", "LOGBROKER_ETCD_PASSWORD": "s3cr3t-etcd"},
                     None)
    assert config.etcd_tls and (config.etcd_user, config.etcd_password) == ("node", "s3cr3t-etcd")
    assert "s3cr3t-etcd" not in repr(config)
    assert resolve({"coordinator": "etcd://etcd:2379", "auth": "off", **files}, {}, None).etcd_tls
    for name in files:  # a half-configured TLS set, whichever file is missing
        with pytest.raises(InvalidRequestError, match="half configured"):
            resolve({**base, **{k: v for k, v in files.items() if k != name}}, {}, None)
    with pytest.raises(InvalidRequestError, match="etcds://"):
        resolve(base, {}, None)
    with pytest.raises(InvalidRequestError, match="needs TLS"):
        resolve({"coordinator": "etcd://etcd:2379", "auth": "off", "etcd_user": "node"},
                {"LOGBROKER_ETCD_PASSWORD": "p"}, None)
    with pytest.raises(InvalidRequestError, match="LOGBROKER_ETCD_PASSWORD"):
        resolve({**base, **files, "etcd_user": "node"}, {}, None)


def test_secrets_have_no_flag_and_the_admin_password_may_come_from_a_file(tmp_path):
    from logbroker.cli.command import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--etcd-password", "p"])
    secret = tmp_path / "admin-password"
    secret.write_text("from-a-file\n")
    parsed = vars(build_parser().parse_args(["serve", "--admin-password-file", str(secret)]))
    config = resolve({k: v for k, v in parsed.items() if k not in ("command", "config")}, {}, None)
    assert config.admin_password == "from-a-file"
    assert resolve({}, {"LOGBROKER_ADMIN_PASSWORD": "from-the-env"}, None).admin_password == "from-the-env"
    with pytest.raises(InvalidRequestError, match="one password"):
        resolve({"admin_password_file": str(secret)}, {"LOGBROKER_ADMIN_PASSWORD": "x"}, None)
    for bad in (tmp_path / "absent", tmp_path / "empty"):
        if bad.name == "empty":
            bad.write_text("")
        with pytest.raises(InvalidRequestError, match="admin_password_file"):
            resolve({"admin_password_file": str(bad)}, {}, None)
