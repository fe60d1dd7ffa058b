"""``logbroker dev-cluster``: what ``status`` prints from the launcher's state and a node's
``/v1/cluster``, and the errors said before anything is asked (an unknown node id) or when no
launcher answers in ``CLUSTER_DIR``. The command against a real ``make cluster``:
``tests/logbroker/test_dev_cluster.py``."""

from __future__ import annotations

import pytest

from logbroker.cli.command import main
from logbroker.cli.dev_cluster import LEADS_SHOWN_MAX, format_status, leaders_by_node

CLUSTER = {"work_dir": "/w", "launcher_pid": 10, "etcd": {"pid": 11, "url": "etcds://127.0.0.1:2379"},
           "nodes": [{"node_id": 1, "pid": 21, "state": "running", "http_url": "http://127.0.0.1:8081",
                      "exit_code": None},
                     {"node_id": 2, "pid": None, "state": "down", "http_url": "http://127.0.0.1:8082",
                      "exit_code": -9},
                     {"node_id": 3, "pid": 23, "state": "running", "http_url": "http://127.0.0.1:8083",
                      "exit_code": None}]}


def test_leaders_by_node_from_the_cluster_answer():
    answer = {"topics": [{"name": "a", "partitions": [{"partition": 0, "leader": 1}, {"partition": 1, "leader": 3}]},
                         {"name": "b", "partitions": [{"partition": 0, "leader": -1}]}]}
    assert leaders_by_node(answer) == {1: ["a/0"], 3: ["a/1"], -1: ["b/0"]}


def test_status_lines():
    text = format_status(CLUSTER, {1: ["a/0", "b/2"], -1: ["c/0"]})
    assert text.splitlines() == [
        "make cluster in /w (launcher pid 10, etcd pid 11 at etcds://127.0.0.1:2379)",
        "  node 1  pid 21                   http://127.0.0.1:8081  leads a/0, b/2",
        "  node 2  down (exited with -9)    http://127.0.0.1:8082",
        "  node 3  pid 23                   http://127.0.0.1:8083  leads nothing",
        "  without a leader: c/0"]
    unknown = format_status(CLUSTER, None, "no node said (TimeoutError: )")
    assert unknown.splitlines()[1].endswith("http://127.0.0.1:8081")
    assert unknown.splitlines()[-1] == "  leaders: unknown (no node said (TimeoutError: ))"
    many = format_status(CLUSTER, {1: [f"t/{p}" for p in range(LEADS_SHOWN_MAX + 3)]})
    assert many.splitlines()[1].endswith(f"t/{LEADS_SHOWN_MAX - 1} and 3 more")


@pytest.mark.parametrize("argv", [["status"], ["kill", "2"], ["start", "1"], ["stop", "3"]])
def test_no_cluster_running_is_said(argv: list[str], tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLUSTER_DIR", str(tmp_path))
    assert main(["dev-cluster", *argv]) == 1
    assert capsys.readouterr().err == (f"logbroker dev-cluster: no `make cluster` is running in {tmp_path} (nothing "
                                       f"answers at {tmp_path}/control.sock); start one, or set CLUSTER_DIR to its "
                                       "work dir\n")


def test_an_unknown_node_is_said_before_asking(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLUSTER_DIR", str(tmp_path))
    assert main(["dev-cluster", "kill", "4"]) == 1
    assert capsys.readouterr().err == "logbroker dev-cluster: no node 4 in this cluster; its nodes are 1, 2, 3\n"
    with pytest.raises(SystemExit) as exited:  # argparse: a node id is a number
        main(["dev-cluster", "kill", "two"])
    assert exited.value.code == 2
