"""The ``logbroker group`` and ``logbroker queue`` commands against a real node."""

from __future__ import annotations

import json

from tests.logbroker.cli.test_cli import cli
from tests.support.http import Http


def test_queue_send_and_receive(node):
    assert cli(node, "topic", "create", "cli.q", "--kind", "queue").returncode == 0
    sent = cli(node, "queue", "send", "cli.q", stdin="one\nk\ttwo\n")
    assert sent.returncode == 0 and "sent 2 message(s)" in sent.stdout
    held = cli(node, "queue", "receive", "cli.q", "--max-messages", "1", "--no-ack", "--json")
    assert held.returncode == 0, held.stderr
    first = json.loads(held.stdout)
    assert first["acked"] == 0 and [m["value"] for m in first["messages"]] == ["one"]
    got = cli(node, "queue", "receive", "cli.q", "--max-messages", "10", "--wait-ms", "500")
    assert got.returncode == 0 and got.stdout.splitlines() == ["0/1\t1\ttwo"]
    assert cli(node, "queue", "receive", "cli.q").stdout == ""
    not_queue = cli(node, "queue", "receive", "__consumer_offsets")
    assert not_queue.returncode == 1 and "not_a_queue" in not_queue.stderr


def test_group_list_describe_reset(node):
    assert cli(node, "topic", "create", "cli.g", "--partitions", "2").returncode == 0
    assert cli(node, "produce", "cli.g", "--partition", "1", stdin="a\nb\nc\n").returncode == 0
    http = Http(node.url)
    member = http.json("POST", "/v1/groups/cg/members", body={"topics": ["cli.g"]})
    listed = cli(node, "group", "list")
    assert listed.returncode == 0 and "cg\tstable\tgeneration 1\t1 member(s)" in listed.stdout
    busy = cli(node, "group", "reset-offsets", "cg", "--topic", "cli.g", "--to-latest")
    assert busy.returncode == 1 and "group_not_empty" in busy.stderr
    http.json("DELETE", f"/v1/groups/cg/members/{member['member_id']}", expect=204)
    reset = cli(node, "group", "reset-offsets", "cg", "--topic", "cli.g", "--to-latest")
    assert reset.returncode == 0 and reset.stdout.splitlines() == ["cli.g/0 -> 0", "cli.g/1 -> 3"]
    explicit = cli(node, "group", "reset-offsets", "cg", "--topic", "cli.g", "--to-offset", "1=1")
    assert explicit.returncode == 0 and explicit.stdout.splitlines() == ["cli.g/1 -> 1"]
    described = json.loads(cli(node, "group", "describe", "cg", "--json").stdout)
    assert {o["partition"]: (o["committed_offset"], o["lag"]) for o in described["offsets"]} == {0: (0, 0), 1: (1, 2)}
    human = cli(node, "group", "describe", "cg").stdout
    assert "cli.g/1: committed 1 high watermark 3 lag 2" in human
    bad = cli(node, "group", "reset-offsets", "cg", "--topic", "cli.g", "--to-offset", "x")
    assert bad.returncode == 1 and "PARTITION=OFFSET" in bad.stderr


def test_group_delete(node):
    assert cli(node, "topic", "create", "cli.d").returncode == 0
    http = Http(node.url)
    member = http.json("POST", "/v1/groups/cd/members", body={"topics": ["cli.d"]})
    busy = cli(node, "group", "delete", "cd")
    assert busy.returncode == 1 and "group_not_empty" in busy.stderr
    http.json("DELETE", f"/v1/groups/cd/members/{member['member_id']}", expect=204)
    deleted = cli(node, "group", "delete", "cd")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "deleted group cd"
    assert "cd\t" not in cli(node, "group", "list").stdout
    assert json.loads(cli(node, "group", "acl-get", "cd", "--json").stdout) == {"group": "cd", "owner": None, "acl": []}


def test_group_list_follows_pages_and_stops_at_a_limit(node):
    assert cli(node, "topic", "create", "cli.p").returncode == 0
    http = Http(node.url)
    names = [f"cp{i}" for i in range(5)]
    for name in names:
        http.json("POST", f"/v1/groups/{name}/members", body={"topics": ["cli.p"]})
    everything = [g["group"] for g in json.loads(cli(node, "group", "list", "--json").stdout)]
    assert set(names) <= set(everything) and everything == sorted(everything)
    paged = cli(node, "group", "list", "--page-size", "1", "--json")
    assert paged.returncode == 0 and [g["group"] for g in json.loads(paged.stdout)] == everything
    some = cli(node, "group", "list", "--after", "cp0", "--limit", "3", "--page-size", "2")
    assert some.returncode == 0 and [line.split("\t")[0] for line in some.stdout.splitlines()] == names[1:4]
    assert "more groups follow: --after cp3" in some.stderr
    assert cli(node, "group", "list", "--limit", "0").returncode == 1
    bad = cli(node, "group", "list", "--page-size", "10001")
    assert bad.returncode == 1 and "invalid_request" in bad.stderr
