"""The configuration page's settings table is generated from ``NodeConfig`` and its descriptions
(``logbroker.config_docs``), so it lists every ``logbroker serve`` setting with its real default."""

from __future__ import annotations

import argparse
import dataclasses
import os

import pytest

from logbroker import config_docs
from logbroker.cli.command import build_parser
from logbroker.config import ENV_ONLY, NodeConfig, field_names
from tests.conftest import ROOT


def page() -> str:
    with open(os.path.join(ROOT, config_docs.PAGE), encoding="utf-8") as f:
        return f.read()


def test_the_configuration_pages_table_is_the_generated_one() -> None:
    assert config_docs.section(page()) == config_docs.render_table(), \
        f"the settings table is out of date: run `python -m logbroker.config_docs --write {config_docs.PAGE}`"


def test_every_setting_is_in_the_table_with_its_default() -> None:
    table = config_docs.render_table()
    for field in dataclasses.fields(NodeConfig):
        name = f"`LOGBROKER_{field.name.upper()}`" if field.name in ENV_ONLY else f"`{field.name}`"
        [row] = [row for row in table.splitlines() if row.startswith(f"| {name} ")]
        assert f"| {config_docs.default_text(field.name)} |" in row
    for name in ("grpc_port", "rack", "lease_ttl_ms", "replica_lag_ms", "replication_timeout_ms",
                 "metrics_token", "advertised_host"):
        assert f"| `{name}` (`--{name.replace('_', '-')}`) |" in table


def test_a_setting_without_a_description_or_a_description_without_a_setting_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_docs, "field_names", lambda: [*field_names(), "new_setting_ms"])
    with pytest.raises(ValueError, match=r"undescribed \['new_setting_ms'\]"):
        config_docs.render_table()
    monkeypatch.setattr(config_docs, "field_names", lambda: [n for n in field_names() if n != "rack"])
    with pytest.raises(ValueError, match=r"not settings \['rack'\]"):
        config_docs.render_table()


def test_defaults_read_as_a_person_would_write_them() -> None:
    assert config_docs.default_text("request_body_bytes_max") == "16 MiB"
    assert config_docs.default_text("jwt_secret") == "empty"
    assert config_docs.default_text("coordinator") == "`local`"
    assert config_docs.default_text("lease_ttl_ms") == "3000"
    assert config_docs.default_text("data_dir") == "`./.data/node-<id>`"


def test_serve_help_says_what_each_flag_is_for() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {action.dest: action.help for action in commands.choices["serve"]._actions}
    assert helps["lease_ttl_ms"] == f"{config_docs.meaning('lease_ttl_ms')} (default: 3000)"
    assert "etcd_password" not in helps


def test_write_replaces_only_the_table(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "configuration.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"before\n{config_docs.BEGIN}\n| stale |\n{config_docs.END}\nafter\n")
    assert config_docs.main(["--write", path]) == 0
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == f"before\n{config_docs.BEGIN}\n{config_docs.render_table()}\n{config_docs.END}\nafter\n"
