"""The ``logbroker`` command against a real node: topics, produce from stdin, consume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

TIMEOUT_S = 60


def cli(node, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ROOT, "LOGBROKER_URL": node.url}
    return subprocess.run([sys.executable, "-m", "logbroker", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=TIMEOUT_S)


def test_topic_produce_consume(node):
    created = cli(node, "topic", "create", "cli.t", "--partitions", "2", "--config", "retention_ms=60000")
    assert created.returncode == 0, created.stderr
    assert "created topic cli.t" in created.stdout
    assert "cli.t" in cli(node, "topic", "list").stdout
    described = json.loads(cli(node, "topic", "describe", "cli.t", "--json").stdout)
    assert described["config"]["retention_ms"] == 60000
    produced = cli(node, "produce", "cli.t", stdin="alpha\nk1\tbeta\nk1\tgamma\n")
    assert produced.returncode == 0 and "produced 3 record(s)" in produced.stdout
    consumed = cli(node, "consume", "cli.t", "--from-beginning", "--print-key")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(["\talpha", "k1\tbeta", "k1\tgamma"])
    lines = cli(node, "consume", "cli.t", "--from-beginning", "--json").stdout.splitlines()
    as_json = [json.loads(line) for line in lines]
    keyed = [r for r in as_json if r["key"] == "k1"]
    assert [r["value"] for r in keyed] == ["beta", "gamma"] and keyed[1]["offset"] == keyed[0]["offset"] + 1
    limited = cli(node, "consume", "cli.t", "--from-beginning", "--max-records", "1")
    assert len(limited.stdout.splitlines()) == 1
    assert cli(node, "topic", "delete", "cli.t").returncode == 0
    missing = cli(node, "topic", "describe", "cli.t")
    assert missing.returncode == 1 and "404" in missing.stderr


def test_topic_alter_changes_the_config_and_describe_shows_it(node):
    assert cli(node, "topic", "create", "cli.alter", "--config", "retention_ms=60000").returncode == 0
    altered = cli(node, "topic", "alter", "cli.alter", "retention_ms=3600000", "flush=always")
    assert altered.returncode == 0, altered.stderr
    assert "altered cli.alter" in altered.stdout and "retention_ms = 3600000" in altered.stdout
    described = cli(node, "topic", "describe", "cli.alter")
    assert "flush = always" in described.stdout and "retention_ms = 3600000" in described.stdout
    as_json = json.loads(cli(node, "topic", "alter", "cli.alter", "flush=", "--json").stdout)
    assert as_json["config"]["flush"] == "interval" and as_json["config"]["retention_ms"] == 3600000
    refused = cli(node, "topic", "alter", "cli.alter", "partitions=4")
    assert refused.returncode == 1 and "400" in refused.stderr and "partitions" in refused.stderr
    malformed = cli(node, "topic", "alter", "cli.alter", "retention_ms")
    assert malformed.returncode != 0 and "KEY=VALUE" in malformed.stderr
    assert json.loads(cli(node, "topic", "describe", "cli.alter", "--json").stdout)["config"]["retention_ms"] == 3600000


def test_leader_racks_is_a_comma_separated_list_on_the_command_line(node):
    created = cli(node, "topic", "create", "cli.racks", "--config", "leader_racks=b,a", "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["config"]["leader_racks"] == ["b", "a"]
    altered = cli(node, "topic", "alter", "cli.racks", "leader_racks=c")
    assert altered.returncode == 0 and "leader_racks = c" in altered.stdout, altered.stderr
    reset = json.loads(cli(node, "topic", "alter", "cli.racks", "leader_racks=", "--json").stdout)
    assert reset["config"]["leader_racks"] == []
    refused = cli(node, "topic", "alter", "cli.racks", "leader_racks=b,b")
    assert refused.returncode != 0 and "leader_racks" in refused.stderr


def test_help_on_every_command(node):
    for args in (["--help"], ["serve", "--help"], ["topic", "create", "--help"], ["topic", "alter", "--help"],
                 ["produce", "--help"],
                 ["consume", "--help"]):
        result = cli(node, *args)
        assert result.returncode == 0 and "usage:" in result.stdout


def test_serve_with_auth_on_and_no_admin_exits_with_a_clear_message(tmp_path):
    command = [sys.executable, "-m", "logbroker", "serve", "--data-dir", str(tmp_path), "--http-port", "0",
               "--rpc-port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBROKER_")}
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S,
                            env={**env, "PYTHONPATH": ROOT})
    assert result.returncode == 2
    assert "no admin user exists" in result.stderr and "--admin-password" in result.stderr
