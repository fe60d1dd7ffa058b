"""The systemd example (``deploy/systemd/``) is one the node accepts: the unit's command line parses
as ``logbroker serve``, its config file and environment file name only real settings and build a
node configuration, the secrets stay off the command line and out of the world-readable file, and
systemd waits longer for a stop than the node's shutdown grace."""

from __future__ import annotations

import configparser
import os
import shlex

from logbroker.cli.command import build_parser
from logbroker.config import ENV_PREFIX, NodeConfig, field_names, resolve
from tests.conftest import ROOT

SYSTEMD = os.path.join(ROOT, "deploy", "systemd")
SECRETS = frozenset({"admin_password", "cluster_token", "jwt_secret", "etcd_password", "metrics_token"})


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd's keys are case-sensitive
    parser.read(os.path.join(SYSTEMD, "logbroker.service"), encoding="utf-8")
    return parser


def environment_file() -> dict[str, str]:
    values = {}
    with open(os.path.join(SYSTEMD, "logbroker.env"), encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, _, value = line.strip().partition("=")
                values[name] = value
    return values


def test_the_unit_runs_logbroker_serve_with_a_config_file_the_node_reads() -> None:
    service = unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv[0].endswith("/bin/logbroker")
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.config == "/etc/logbroker/node.toml"
    assert service["EnvironmentFile"] == "/etc/logbroker/logbroker.env"
    flags = {name: value for name, value in vars(args).items() if name in field_names()}
    assert not SECRETS & {name for name, value in flags.items() if value is not None}, "a secret on the command line"
    config = resolve(flags, environment_file(), os.path.join(SYSTEMD, "node.toml"))
    assert isinstance(config, NodeConfig)
    assert config.coordinator.startswith("etcds://") and config.cluster_token and config.jwt_secret
    assert config.data_dir == "/var/lib/" + service["StateDirectory"]


def test_the_environment_file_holds_the_secrets_and_only_settings() -> None:
    names = set(environment_file())
    assert names, "no variable read from logbroker.env"
    assert all(name.startswith(ENV_PREFIX) and name[len(ENV_PREFIX):].lower() in field_names() for name in names)
    with open(os.path.join(SYSTEMD, "node.toml"), encoding="utf-8") as f:
        toml = f.read()
    assert not [name for name in SECRETS if f"\n{name} =" in toml], "a secret in the world-readable config file"


def test_systemd_waits_past_the_shutdown_grace_and_stops_with_sigterm() -> None:
    service = unit()["Service"]
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) * 1000 > NodeConfig().shutdown_grace_ms
    assert unit()["Install"]["WantedBy"] == "multi-user.target"
